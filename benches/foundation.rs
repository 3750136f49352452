//! Foundation figures, each against a baseline measured in the same run:
//!
//! - whole-process time of `capfleet --cap-manifest` and `capfleet resolve sim`
//!   (median of N runs), against `capfleet --version` (the floor: exec, dynamic
//!   loading and argument parsing of the same binary);
//! - decoding a 10 MB NDJSON file of mixed CAP events (events/s), against a raw
//!   `serde_json::Value` parse of the same lines.
//!
//! Run: `cargo bench --bench foundation`. Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capfleet_engine::protocol::{
    CancelScope, CapEvent, Decision, ErrorKind, PlanEntry, PlanStatus, RiskLevel, decode_event,
};
use serde_json::json;

#[allow(dead_code)]
#[path = "support/figures.rs"]
mod figures;

use figures::{best_of, mb, ms, ratio};

const RUNS: usize = 41;
const NDJSON_BYTES: usize = 10 * 1024 * 1024;

fn main() {
    let exe = env!("CARGO_BIN_EXE_capfleet");
    println!("capfleet foundation bench ({RUNS} runs per process figure)");

    let floor = median_wall(|| run(command(exe, &["--version"])));
    let manifest = median_wall(|| run(command(exe, &["--cap-manifest"])));
    let resolve = median_wall(|| run(command(exe, &["resolve", "sim"])));
    println!(
        "process  `true` (floor)            median {:>8.2} ms",
        ms(floor)
    );
    println!(
        "process  capfleet --cap-manifest      median {:>8.2} ms  ({:.2}x floor)",
        ms(manifest),
        ratio(manifest, floor)
    );
    println!(
        "process  capfleet resolve sim         median {:>8.2} ms  ({:.2}x floor)",
        ms(resolve),
        ratio(resolve, floor)
    );

    let lines = mixed_ndjson(NDJSON_BYTES);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    // Warm both paths once, then measure the better of three passes each.
    let raw = best_of(3, || {
        for l in &lines {
            let v: serde_json::Value = serde_json::from_str(l).expect("generated JSON parses");
            std::hint::black_box(v);
        }
    });
    let typed = best_of(3, || {
        for l in &lines {
            let e = decode_event(l).expect("generated events decode");
            std::hint::black_box(e);
        }
    });
    let n = lines.len() as f64;
    println!(
        "decode   raw serde_json::Value      {:>10.0} events/s  {:>7.1} MB/s  ({} events, {:.1} MB)",
        n / raw.as_secs_f64(),
        mb(bytes) / raw.as_secs_f64(),
        lines.len(),
        mb(bytes)
    );
    println!(
        "decode   CAP decode_event (typed)   {:>10.0} events/s  {:>7.1} MB/s  ({:.0}% of raw)",
        n / typed.as_secs_f64(),
        mb(bytes) / typed.as_secs_f64(),
        100.0 * raw.as_secs_f64() / typed.as_secs_f64()
    );
}

fn command(exe: &str, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args).env("NO_COLOR", "1");
    // `resolve sim` must find the shipped manifest, never a stray one on this machine.
    c.env(
        "XDG_CONFIG_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-xdg"),
    );
    c
}

fn run(mut c: Command) {
    let status = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "{c:?} failed: {status}");
}

fn median_wall(mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

/// Lines of mixed agent events, in roughly the proportions of a real turn:
/// mostly text chunks, then tool calls, plans, usage, permission traffic, errors.
fn mixed_ndjson(target_bytes: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut total = 0;
    let mut i = 0u64;
    while total < target_bytes {
        let event = match i % 16 {
            0..=8 => CapEvent::text(format!("msg_{}", i / 16), format!("chunk {i} of the answer, with some words in it. ")),
            9 => CapEvent::thought(format!("msg_{}", i / 16), "considering the next step"),
            10 => CapEvent::tool_start(format!("c{i}"), "Bash", json!({"command": "cargo test -p capfleet", "timeout": 120})),
            11 => CapEvent::tool_end(format!("c{}", i - 1), Some(json!("test result: ok. 41 passed")), false, Some(812)),
            12 => CapEvent::plan(vec![
                PlanEntry::new("p1", "Design schema", PlanStatus::Completed),
                PlanEntry::new("p2", "Implement", PlanStatus::InProgress),
            ]),
            13 => CapEvent::permission_request(format!("perm_{i}"), "Bash", Some(json!({"command": "rm -rf target"})), RiskLevel::Medium),
            14 => match i % 3 {
                0 => CapEvent::permission_response(format!("perm_{}", i - 1), Decision::AllowOnce),
                1 => CapEvent::cancel(CancelScope::CurrentTurn, Some("user".into())),
                _ => CapEvent::error(ErrorKind::RateLimit, "slow down", true),
            },
            _ => serde_json::from_value(json!({
                "kind": "cap.usage", "model_id": "sim-1", "input_tokens": 12450, "output_tokens": 3120,
                "cache_read_tokens": 8200, "cost_usd_estimate": 0.082, "stop_reason": "end_turn",
                "_meta": {"acme.trace": {"span": i}}
            }))
            .expect("usage event"),
        };
        let line = serde_json::to_string(&event).expect("events encode");
        total += line.len() + 1;
        lines.push(line);
        i += 1;
    }
    lines
}
