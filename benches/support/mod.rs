//! What the fleet-scale benches share: simulator sessions (stream-json, each following
//! a script), a run of them through `run_fleet` with every event collected, and the
//! no-survivor check; a journal actor fed events straight. [`serve`]: `capfleet serve`
//! driven over HTTP. [`a2a_peer`]: the A2A sim (the test crate's, included).
//! [`figures`]: best-of timing, ms, ratios.
#![allow(dead_code)]

#[path = "../../tests/all/common/a2a_peer.rs"]
pub(crate) mod a2a_peer;
pub(crate) mod figures;
pub(crate) mod serve;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capfleet_engine::budget::BudgetLimits;
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::router::RoutingSpec;
use capfleet_engine::run::{RunReport, RunSpec, RunTelemetry, run_fleet};
use capfleet_engine::session::SessionSpec;
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::events::{Published, urn};
use capfleet_wire::registry::Binding;
use tokio::sync::mpsc;

/// The environment marker every bench agent carries (for the survivor check).
pub(crate) const MARKER: &str = "CAPFLEET_BENCH_FLEET";

fn sim_manifest() -> Arc<Manifest> {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents/sim.toml"),
    )
    .expect("sim.toml");
    Arc::new(
        Manifest::parse(&src, "sim.toml")
            .expect("sim manifest")
            .manifest,
    )
}

/// `n` sim sessions `s0`… of fleet `fleet` in `dir`; session `i` follows `script(i)`.
pub(crate) fn sim_sessions(
    dir: &Path,
    fleet: &str,
    n: usize,
    marker: &str,
    script: impl Fn(usize) -> PathBuf,
) -> Vec<SessionSpec> {
    let manifest = sim_manifest();
    (0..n)
        .map(|i| {
            let name = format!("s{i}");
            let mut launch = LaunchSpec::new(
                urn(fleet, &name),
                manifest.clone(),
                SessionConfig::new(dir.display().to_string()),
            );
            launch.program = Some(PathBuf::from(env!("CARGO_BIN_EXE_capfleet")));
            launch.env = vec![
                (
                    "CAPFLEET_SIM_SCRIPT".into(),
                    script(i).display().to_string(),
                ),
                (MARKER.into(), marker.into()),
            ];
            SessionSpec::new(name, launch, Binding::StreamJson)
        })
        .collect()
}

/// [`run_with`], every published event kept.
pub(crate) async fn run(
    fleet: &str,
    sessions: Vec<SessionSpec>,
    budget_usd: Option<f64>,
    journal: Option<PathBuf>,
    telemetry: RunTelemetry,
) -> (RunReport, Vec<Published>) {
    let (tx, mut rx) = mpsc::channel(4096);
    let collector = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(e) = rx.recv().await {
            all.push(e);
        }
        all
    });
    let report = run_with(fleet, sessions, budget_usd, journal, telemetry, tx).await;
    (report, collector.await.expect("collector"))
}

/// Every session of `sessions` starts with the task `go`; `watcher` sees every event.
pub(crate) async fn run_with(
    fleet: &str,
    sessions: Vec<SessionSpec>,
    budget_usd: Option<f64>,
    journal: Option<PathBuf>,
    telemetry: RunTelemetry,
    watcher: mpsc::Sender<Published>,
) -> RunReport {
    let routing = RoutingSpec {
        start: sessions.iter().map(|s| s.name.clone()).collect(),
        task: "go".into(),
        routes: vec![],
        max_concurrent: 0,
        queue: Default::default(),
    };
    let spec = RunSpec {
        fleet: fleet.into(),
        sessions,
        routing,
        policy: Default::default(),
        budget: BudgetLimits {
            total_usd: budget_usd,
            ..Default::default()
        },
        journal: journal.map(Into::into),
        human: None,
        research: None,
        abort_on_error: false,
        telemetry,
        workspace: None,
        resume: None,
        chaos: None,
        calls: None,
    };
    run_fleet(spec, vec![watcher], tokio::sync::mpsc::channel(1).1)
        .await
        .expect("run")
}

/// The benches' runtime: two workers (the machine's cores, as `capfleet` runs), with
/// rustls' provider installed (reqwest and the A2A driver need one).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    capfleet_wire::driver::crypto_provider();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The value of the environment variable `key`, else `default`.
pub(crate) fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bench agents still alive.
pub(crate) fn survivors(marker: &str) -> usize {
    capfleet_wire::process::sweep::processes_with_marker(MARKER, marker).len()
}

/// Push `n` events made by `event(seq)` straight into a journal actor writing `path`:
/// the records written and the time until all are on disk.
pub(crate) async fn journal_through(
    path: PathBuf,
    n: u64,
    event: impl Fn(u64) -> capfleet_wire::events::SessionEvent,
) -> (u64, std::time::Duration) {
    use capfleet_engine::journal::{Journal, JournalMsg};
    let (journal, _) = ractor::Actor::spawn(None, Journal, path.into())
        .await
        .expect("journal");
    let tx = ractor::call!(journal, JournalMsg::Subscribe).expect("subscribe");
    let started = std::time::Instant::now();
    for seq in 1..=n {
        tx.send(Arc::new(event(seq))).await.expect("journal alive");
    }
    drop(tx);
    let written = ractor::call!(journal, JournalMsg::Finish)
        .expect("finish")
        .records;
    let took = started.elapsed();
    journal.stop(None);
    (written, took)
}
