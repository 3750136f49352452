//! What tracing costs a fleet, each figure against a baseline measured in the same run.
//! A process has one global subscriber, so every variant runs in a child process of
//! this bench (it re-executes itself), alternating, several rounds; medians reported.
//!
//! - export: events/s of a 200-session sim fleet whose spans go over OTLP/gRPC to the
//!   in-process fake collector (`fake-opentelemetry-collector`), against the same fleet
//!   with nothing configured;
//! - off: a 1,000-session sim fleet with nothing configured — capfleet's production
//!   subscriber (stderr diagnostics at `warn`, no span pipeline) — against the same
//!   fleet with no subscriber at all, where every `tracing` callsite is disabled before
//!   its arguments are evaluated: the closest to tracing compiled out of the hot path
//!   that one build can measure (a `max_level_off` build would be a second build).
//!
//! Run: `cargo bench --bench otel`. `CAPFLEET_BENCH_ROUNDS` (default 3) sets the rounds.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use capfleet::TracePipeline;
use capfleet_engine::run::RunTelemetry;
use capfleet_engine::telemetry::TraceConfig;
use capfleet_wire::events::{EventBody, TurnOutcome};
use serde_json::{Value, json};
use support::figures::ms;
use support::survivors;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

const VARIANT: &str = "CAPFLEET_BENCH_OTEL_VARIANT";
const SESSIONS: &str = "CAPFLEET_BENCH_OTEL_SESSIONS";

fn main() {
    if let Ok(variant) = std::env::var(VARIANT) {
        let n = std::env::var(SESSIONS)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        println!("{}", child(&variant, n));
        return;
    }
    let rounds: usize = std::env::var("CAPFLEET_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    println!("capfleet tracing overhead bench (2 worker threads, {rounds} rounds, medians)");

    let (quiet, export) = compare(rounds, 200, "quiet", "export");
    let rate = |r: &Value| r["events"].as_f64().unwrap() / (r["wall_ms"].as_f64().unwrap() / 1e3);
    println!(
        "export   200 sessions: {:.0} events/s exporting {} spans to the fake OTLP collector \
         ({} dropped) vs {:.0} events/s with no exporter: {:+.1}% throughput",
        rate(&export),
        export["spans_exported"],
        export["spans_dropped"],
        rate(&quiet),
        100.0 * (rate(&export) / rate(&quiet) - 1.0)
    );

    let (none, quiet) = compare(rounds, 1000, "none", "quiet");
    let (a, b) = (
        none["wall_ms"].as_f64().unwrap(),
        quiet["wall_ms"].as_f64().unwrap(),
    );
    println!(
        "off     1000 sessions: {b:.0} ms with nothing configured vs {a:.0} ms with tracing \
         disabled at every callsite (no subscriber): {:+.1}% (goal within 5%)",
        100.0 * (b / a - 1.0)
    );
}

/// Rounds of `a` then `b` (then `b` then `a`, alternating), each in a child; medians.
fn compare(rounds: usize, n: usize, a: &str, b: &str) -> (Value, Value) {
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 { [a, b] } else { [b, a] };
        for v in order {
            let r = spawn_child(v, n);
            if v == a {
                ra.push(r);
            } else {
                rb.push(r);
            }
        }
    }
    (median(ra), median(rb))
}

fn median(mut runs: Vec<Value>) -> Value {
    runs.sort_by(|x, y| {
        x["wall_ms"]
            .as_f64()
            .unwrap()
            .total_cmp(&y["wall_ms"].as_f64().unwrap())
    });
    runs.swap_remove(runs.len() / 2)
}

fn spawn_child(variant: &str, n: usize) -> Value {
    let out = Command::new(std::env::current_exe().expect("bench binary"))
        .env(VARIANT, variant)
        .env(SESSIONS, n.to_string())
        .output()
        .expect("child bench");
    assert!(
        out.status.success(),
        "{variant}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).expect("child result")
}

/// capfleet's subscriber: stderr at `warn`, plus `spans` when given.
fn install<L>(spans: Option<L>)
where
    L: Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(EnvFilter::new("warn"));
    let subscriber = tracing_subscriber::registry().with(spans).with(stderr);
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
}

/// One fleet of `n` sessions under `variant`: `none` (no subscriber), `quiet` (nothing
/// configured), `export` (spans to an in-process OTLP/gRPC collector).
fn child(variant: &str, n: usize) -> Value {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let collector = match variant {
            "none" => None,
            "quiet" => {
                install(None::<tracing_subscriber::layer::Identity>);
                None
            }
            "export" => {
                let (endpoint, drained) = collector().await;
                let cfg = TraceConfig {
                    otlp: Some(endpoint),
                    trace_file: None,
                };
                let env = |k: &str| (k == "OTEL_EXPORTER_OTLP_PROTOCOL").then(|| "grpc".to_owned());
                let pipeline = TracePipeline::start(&cfg, env)
                    .expect("pipeline")
                    .expect("configured");
                install(Some(pipeline.layer()));
                Some((pipeline, drained))
            }
            other => panic!("unknown variant {other}"),
        };
        let script = dir.path().join("turn.toml");
        let mut steps: Vec<String> = (0..10)
            .map(|i| format!("{{ say = \"chunk {i} of the answer\" }}"))
            .collect();
        steps.push(
            "{ tool = \"Read\", input = { file_path = \"a.rs\" }, output = \"fn a() {}\" }".into(),
        );
        steps.push(
            "{ tool = \"Edit\", input = { file_path = \"a.rs\" }, output = \"1 hunk\" }".into(),
        );
        steps
            .push("{ usage = { input_tokens = 10, output_tokens = 2, cost_usd = 0.0001 } }".into());
        std::fs::write(
            &script,
            format!("[[turn]]\nsteps = [{}]\n", steps.join(", ")),
        )
        .expect("script");
        let marker = format!("otel-bench-{}", std::process::id());
        let sessions = support::sim_sessions(dir.path(), "bench", n, &marker, |_| script.clone());
        let started = Instant::now();
        let (_report, events) =
            support::run("bench", sessions, None, None, RunTelemetry::default()).await;
        let wall = started.elapsed();
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
        assert_eq!(survivors(&marker), 0, "no agent left");
        let (mut exported, mut dropped) = (0, 0);
        if let Some((pipeline, drained)) = collector {
            let totals = tokio::task::spawn_blocking(move || pipeline.shutdown())
                .await
                .expect("shutdown");
            (exported, dropped) = (totals.exported, totals.dropped);
            let received = drained.received().await;
            assert_eq!(received, exported, "the collector got every exported span");
        }
        json!({
            "variant": variant,
            "sessions": n,
            "events": events.len(),
            "wall_ms": ms(wall),
            "spans_exported": exported,
            "spans_dropped": dropped,
        })
    })
}

/// The fake collector, drained as it receives; once told to stop, the task ends (with
/// the count) when nothing more arrives.
async fn collector() -> (String, Drain) {
    let mut fake = fake_opentelemetry_collector::FakeCollectorServer::start()
        .await
        .expect("fake collector");
    let endpoint = fake.endpoint();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut n = 0u64;
        let mut stopping = false;
        let mut quiet = Instant::now();
        loop {
            let got = fake
                .exported_spans(1, Duration::from_millis(100))
                .await
                .len() as u64;
            if got > 0 {
                n += got;
                quiet = Instant::now();
            }
            if !stopping {
                stopping = stopped.try_recv().is_ok();
            } else if quiet.elapsed() > Duration::from_millis(500) {
                break;
            }
        }
        fake.abort();
        n
    });
    (endpoint, Drain { stop, task })
}

/// The collector's drain: stop it to get what it received.
struct Drain {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<u64>,
}

impl Drain {
    async fn received(self) -> u64 {
        let _ = self.stop.send(());
        self.task.await.expect("drain")
    }
}
