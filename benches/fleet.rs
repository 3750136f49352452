//! Fleet-scale figures, each with a same-run baseline:
//!
//! - N = 200 and 1,000 concurrent simulator sessions (stream-json, one short scripted
//!   turn each) through `run_fleet`: wall time, the orchestrator's peak RSS per session
//!   (the process's VmHWM over the baseline RSS of an idle tree), and that no agent
//!   process is left afterwards;
//! - journal throughput: records/s written by a 200-session run with its journal on,
//!   against the same run with the journal off;
//! - budget-cancel latency: 100 sessions, one of them crosses the budget; the time from
//!   that usage event to the last session's turn ending cancelled.
//!
//! Run: `cargo bench --bench fleet`. `CAPFLEET_BENCH_SESSIONS=200,1000` chooses N.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_actors::budget::BudgetLimits;
use capfleet_actors::driver::LaunchSpec;
use capfleet_actors::fleet::urn;
use capfleet_actors::manifest::Manifest;
use capfleet_actors::protocol::{CapEvent, SessionConfig};
use capfleet_actors::registry::Binding;
use capfleet_actors::router::RoutingSpec;
use capfleet_actors::run::{RunReport, RunSpec, run_fleet};
use capfleet_actors::session::{EventBody, Published, SessionSpec, TurnOutcome};
use tokio::sync::mpsc;

const MARKER: &str = "CAPFLEET_BENCH_FLEET";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let sizes: Vec<usize> = std::env::var("CAPFLEET_BENCH_SESSIONS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![200, 1000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("fleet-bench-{}", std::process::id());
    println!("capfleet fleet bench (2 worker threads)");
    let idle_kib = rss_kib("VmRSS");
    for n in sizes {
        let started = Instant::now();
        let (report, events) = rt.block_on(run(dir.path(), n, None, &marker, 0.0));
        let wall = started.elapsed();
        let peak = rss_kib("VmHWM");
        let completed = events
            .iter()
            .filter(|e| {
                matches!(
                    e.body,
                    EventBody::TurnEnded {
                        outcome: TurnOutcome::Completed,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(completed, n, "every session completed its turn");
        let left = survivors(&marker);
        println!(
            "fleet    {n:>5} sessions  wall {:>7.0} ms  ({:.2} ms/session)  peak RSS {:>7} KiB ({:.1} KiB/session over idle {idle_kib} KiB)  agents left {left}  outcome {:?}",
            ms(wall),
            ms(wall) / n as f64,
            peak,
            (peak.saturating_sub(idle_kib)) as f64 / n as f64,
            report.outcome
        );
    }

    // Journal throughput: the same 200-session run with and without the journal.
    let j = dir.path().join("journal.jsonl");
    let t = Instant::now();
    let (_baseline, _) = rt.block_on(run(dir.path(), 200, None, &marker, 0.0));
    let base = t.elapsed();
    let t = Instant::now();
    let (with, _) = rt.block_on(run(dir.path(), 200, Some(j.clone()), &marker, 0.0));
    let journaled = t.elapsed();
    let records = with.journal_records;
    println!(
        "journal  {records} records in a {:.0} ms run (same run without journal {:.0} ms): {:.0} records/s of run time; overhead {:+.1}%",
        ms(journaled),
        ms(base),
        records as f64 / journaled.as_secs_f64(),
        100.0 * (journaled.as_secs_f64() / base.as_secs_f64() - 1.0)
    );

    // The journal on its own: 200,000 session events through the journal actor to disk.
    let (n, took) = rt.block_on(journal_alone(dir.path(), 200_000));
    println!(
        "journal  {n} events written and synced in {:.0} ms: {:.0} events/s (goal >= 50k/s)",
        ms(took),
        n as f64 / took.as_secs_f64()
    );

    // Budget-cancel latency to 100 sessions.
    let (report, events) = rt.block_on(run(dir.path(), 100, None, &marker, 0.5));
    let crossing = events
        .iter()
        .find(|e| matches!(&e.body, EventBody::Cap { event: CapEvent::Usage(u) } if u.cost_usd().unwrap_or(0.0) > 0.5))
        .map(|e| e.ts_ms)
        .expect("a usage event crossed the budget");
    let cancelled: Vec<u64> = events
        .iter()
        .filter(|e| {
            matches!(
                e.body,
                EventBody::TurnEnded {
                    outcome: TurnOutcome::Cancelled | TurnOutcome::Failed,
                    ..
                }
            )
        })
        .map(|e| e.ts_ms)
        .collect();
    let last = cancelled.iter().max().copied().unwrap_or(crossing);
    println!(
        "budget   crossing → last of {} sessions' turns ended: {} ms  (outcome {:?}; goal ≤ 50 ms)",
        cancelled.len(),
        last.saturating_sub(crossing),
        report.outcome
    );
    assert_eq!(survivors(&marker), 0, "no agent left");
}

/// Push `n` published events straight into a journal actor; time until all are on disk.
async fn journal_alone(dir: &Path, n: u64) -> (u64, Duration) {
    use capfleet_actors::journal::{Journal, JournalMsg};
    use capfleet_actors::session::SessionEvent;
    let path = dir.join("alone.jsonl");
    let (journal, _) = ractor::Actor::spawn(None, Journal, path)
        .await
        .expect("journal");
    let tx = ractor::call!(journal, JournalMsg::Subscribe).expect("subscribe");
    let urn: Arc<str> = Arc::from("cap://bench/s0");
    let started = Instant::now();
    for seq in 1..=n {
        let event = Arc::new(SessionEvent {
            seq,
            urn: urn.clone(),
            turn: Some(1),
            ts_ms: 0,
            body: EventBody::Cap {
                event: CapEvent::text("msg_1", "a chunk of the answer, forty-odd bytes long"),
            },
        });
        tx.send(event).await.expect("journal alive");
    }
    drop(tx);
    let written = ractor::call!(journal, JournalMsg::Finish).expect("finish");
    let took = started.elapsed();
    journal.stop(None);
    (written, took)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn survivors(marker: &str) -> usize {
    capfleet_actors::process::sweep::processes_with_marker(MARKER, marker).len()
}

/// One run of `n` sim sessions; with `budget` > 0, session 0 spends over it and the
/// others wait long (so they are cancelled).
async fn run(
    dir: &Path,
    n: usize,
    journal: Option<PathBuf>,
    marker: &str,
    budget: f64,
) -> (RunReport, Vec<Published>) {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents/sim.toml"),
    )
    .expect("sim.toml");
    let manifest = Arc::new(
        Manifest::parse(&src, "sim.toml")
            .expect("sim manifest")
            .manifest,
    );
    let quick = dir.join("quick.toml");
    std::fs::write(&quick, "[[turn]]\nsteps = [{ say = \"done\" }, { usage = { input_tokens = 10, output_tokens = 2, cost_usd = 0.0001 } }]\n").expect("script");
    let spend = dir.join("spend.toml");
    std::fs::write(&spend, "[[turn]]\nsteps = [{ sleep_ms = 300 }, { usage = { input_tokens = 10, output_tokens = 2, cost_usd = 1.0 } }, { say = \"spent\" }]\n").expect("script");
    let wait = dir.join("wait.toml");
    std::fs::write(
        &wait,
        "[[turn]]\nsteps = [{ say = \"waiting\" }, { sleep_ms = 30000 }]\n",
    )
    .expect("script");
    let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let sessions = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let script = match (budget > 0.0, i) {
                (false, _) => &quick,
                (true, 0) => &spend,
                (true, _) => &wait,
            };
            let mut launch = LaunchSpec::new(
                urn("bench", name),
                manifest.clone(),
                SessionConfig::new(dir.display().to_string()),
            );
            launch.program = Some(PathBuf::from(env!("CARGO_BIN_EXE_capfleet")));
            launch.env = vec![
                ("CAPFLEET_SIM_SCRIPT".into(), script.display().to_string()),
                (MARKER.into(), marker.into()),
            ];
            SessionSpec::new(name.clone(), launch, Binding::StreamJson)
        })
        .collect();
    let routing = RoutingSpec {
        start: names.clone(),
        task: "go".into(),
        routes: vec![],
        max_concurrent: 0,
    };
    let (tx, mut rx) = mpsc::channel(4096);
    let collector = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(e) = rx.recv().await {
            all.push(e);
        }
        all
    });
    let spec = RunSpec {
        fleet: "bench".into(),
        sessions,
        routing,
        policy: Default::default(),
        budget: BudgetLimits {
            total_usd: (budget > 0.0).then_some(budget),
            ..Default::default()
        },
        journal,
        human: None,
        abort_on_error: false,
    };
    let report = run_fleet(spec, vec![tx], std::future::pending())
        .await
        .expect("run");
    let events = collector.await.expect("collector");
    (report, events)
}
