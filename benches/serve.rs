//! `capfleet serve` figures, each against `capfleet run` direct measured in the same
//! run (the release binary, simulator sessions, loopback):
//!
//! 1. submit -> first event: `POST /v1/runs` of a one-session fleet, then the run's
//!    event stream until its first record; against `capfleet run --json` from its
//!    spawn to its first NDJSON line.
//! 2. SSE fan-out: [`SUBSCRIBERS`] clients on the event stream of one run whose
//!    simulator emits [`EVENTS`] events (`tool` steps: a call and a result each):
//!    records per second delivered to each and in all, the p99 delay from an event's
//!    publication (its `ts_ms`) to its arrival, the server's RSS before and at its
//!    peak; against `capfleet run --json` of the same fleet (events per second on its
//!    stdout).
//! 3. sustained submissions: [`RUNS`] one-turn runs submitted by 8 clients to a server
//!    with `--max-runs 32`: submissions accepted per second and runs completed per
//!    second; against the same runs as `capfleet run` processes, 32 at a time.
//! 4. the burst: 500 submissions by 100 clients at once with `--max-runs 8`: how many
//!    were admitted and refused (429), that every admitted run completed, and how long
//!    it took (the suite's `serve::a_burst_…` checks the same in a debug build).
//!
//! Run: `cargo bench --bench serve`. `CAPFLEET_BENCH_PARTS=1,3` runs some parts;
//! `CAPFLEET_BENCH_EVENTS`, `CAPFLEET_BENCH_SUBSCRIBERS`, `CAPFLEET_BENCH_RUNS`
//! change the sizes. Prints figures; asserts only that nothing was lost.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Semaphore;

mod support;

use support::env_or;
use support::figures::ms;
use support::serve::{Api, EXE, Serve, epoch_ms, fleet, pct, ts_ms};

const SUBSCRIBERS: usize = 100;
const EVENTS: usize = 100_000;
const RUNS: usize = 300;
const LATENCY_SAMPLES: usize = 20;
const QUICK: &str = "[[turn]]\nsteps = [{ say = \"hello\" }]\n";

/// Submit `fleet` `n` times, `clients` at a time; each answer's status and body.
async fn submit_all(
    http: &reqwest::Client,
    api: &Api,
    fleet: &str,
    n: usize,
    clients: usize,
) -> Vec<(u16, Value)> {
    let clients = Arc::new(Semaphore::new(clients));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (http, api, fleet, clients) =
                (http.clone(), api.clone(), fleet.to_owned(), clients.clone());
            tokio::spawn(async move {
                let _client = clients.acquire_owned().await.expect("semaphore");
                api.submit(&http, &fleet).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("submit"));
    }
    answers
}

/// Read run `id`'s event stream to its end: (records, delays in ms, first and last
/// arrival), or only to its first record (`first_only`).
async fn follow(
    http: &reqwest::Client,
    api: &Api,
    id: &str,
    first_only: bool,
) -> (usize, Vec<f64>, Option<Instant>, Option<Instant>) {
    let (mut records, mut delays, mut first, mut last) = (0, Vec::new(), None, None);
    api.records(http, id, |data, at| {
        let ts = ts_ms(data).unwrap_or(0);
        records += 1;
        delays.push((epoch_ms() - ts as f64).max(0.0));
        first.get_or_insert(at);
        last = Some(at);
        !first_only
    })
    .await;
    (records, delays, first, last)
}

/// A directory with `script.toml` and `fleet.toml` (one session following it).
fn fleet_dir(script: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).expect("script");
    let text = fleet("bench", &path);
    std::fs::write(dir.path().join("fleet.toml"), &text).expect("fleet");
    (dir, text)
}

/// `capfleet run fleet.toml --json` in `dir`: from its spawn to its first stdout line,
/// to its end, and the lines it printed.
fn run_direct(dir: &Path) -> (Duration, Duration, usize) {
    let t0 = Instant::now();
    let mut child = Command::new(EXE)
        .current_dir(dir)
        .args(["run", "fleet.toml", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet run");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = Vec::new();
    let mut first = None;
    let mut lines = 0;
    while out
        .read_until(b'\n', &mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        first.get_or_insert_with(|| t0.elapsed());
        lines += 1;
        line.clear();
    }
    let _ = child.wait();
    (first.unwrap_or_default(), t0.elapsed(), lines)
}

async fn first_event_latency(http: &reqwest::Client) {
    println!("\n1. submit -> first event ({LATENCY_SAMPLES} runs, one sim session, one turn)");
    let (dir, text) = fleet_dir(QUICK);
    let serve = Serve::start(&["--max-runs", "4"]);
    let mut served = Vec::new();
    for _ in 0..LATENCY_SAMPLES {
        let t0 = Instant::now();
        let (status, body) = serve.api.submit(http, &text).await;
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_str().expect("id").to_owned();
        let (n, _, _, _) = follow(http, &serve.api, &id, true).await;
        assert_eq!(n, 1);
        served.push(ms(t0.elapsed()));
        serve.api.ended(http, &id).await;
    }
    let mut direct: Vec<f64> = (0..LATENCY_SAMPLES)
        .map(|_| ms(run_direct(dir.path()).0))
        .collect();
    served.sort_by(f64::total_cmp);
    direct.sort_by(f64::total_cmp);
    let (s, d) = (pct(&served, 0.5), pct(&direct, 0.5));
    println!(
        "   serve: median {s:.1} ms, p90 {:.1} ms; `capfleet run` direct (spawn to first line): median {d:.1} ms, p90 {:.1} ms; ratio {:.2}x",
        pct(&served, 0.9),
        pct(&direct, 0.9),
        s / d
    );
}

async fn fan_out(http: &reqwest::Client) {
    let (events, subscribers) = (
        env_or("CAPFLEET_BENCH_EVENTS", EVENTS),
        env_or("CAPFLEET_BENCH_SUBSCRIBERS", SUBSCRIBERS),
    );
    println!("\n2. SSE fan-out: {subscribers} subscribers on one run of {events} events");
    // A tool step is two records (its call and its result); usage steps would be
    // folded into the turn's one.
    let mut script = String::from("[[turn]]\nsteps = [\n");
    for _ in 0..events / 2 {
        script.push_str("{ tool = \"Read\", input = { path = \"a\" } },\n");
    }
    script.push_str("]\n");
    let (dir, text) = fleet_dir(&script);
    let serve = Serve::start(&[]);
    let before = serve.rss();
    let (status, body) = serve.api.submit(http, &text).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let t0 = Instant::now();
    let readers: Vec<_> = (0..subscribers)
        .map(|_| {
            let (http, api, id) = (http.clone(), serve.api.clone(), id.clone());
            tokio::spawn(async move { follow(&http, &api, &id, false).await })
        })
        .collect();
    let mut peak = before.1;
    let mut results = Vec::new();
    for r in readers {
        while !r.is_finished() {
            peak = peak.max(serve.rss().1);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        results.push(r.await.expect("reader"));
    }
    let took = t0.elapsed();
    peak = peak.max(serve.rss().1);
    let counts: Vec<usize> = results.iter().map(|r| r.0).collect();
    let (min, max) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    assert_eq!(min, max, "every subscriber got every record");
    assert!(min >= events, "{min} records for {events} events");
    let mut delays: Vec<f64> = results.iter().flat_map(|r| r.1.iter().copied()).collect();
    delays.sort_by(f64::total_cmp);
    let total: usize = counts.iter().sum();
    let per = min as f64 / took.as_secs_f64();
    println!(
        "   {min} records to each of {subscribers} in {:.2} s: {per:.0} records/s per subscriber, {:.0}/s in all; delay publication -> arrival p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64(),
        pct(&delays, 0.5),
        pct(&delays, 0.99),
        delays.last().copied().unwrap_or(f64::NAN),
    );
    println!(
        "   server RSS: {:.1} MiB before, peak {:.1} MiB",
        before.0 as f64 / 1024.0,
        peak as f64 / 1024.0
    );
    drop(serve);
    let (_, whole, lines) = run_direct(dir.path());
    let direct = lines as f64 / whole.as_secs_f64();
    println!(
        "   `capfleet run --json` direct: {lines} lines in {:.2} s = {direct:.0} events/s; per-subscriber ratio {:.2}x, all subscribers {:.2}x",
        whole.as_secs_f64(),
        per / direct,
        total as f64 / took.as_secs_f64() / direct
    );
}

async fn sustained(http: &reqwest::Client) {
    let runs = env_or("CAPFLEET_BENCH_RUNS", RUNS);
    println!("\n3. sustained submissions: {runs} one-turn runs, 8 clients, --max-runs 32");
    let (dir, text) = fleet_dir(QUICK);
    let queue = runs.to_string();
    let serve = Serve::start(&[
        "--max-runs",
        "32",
        "--queue",
        &queue,
        "--max-sessions",
        "64",
    ]);
    let t0 = Instant::now();
    let ids: Vec<String> = submit_all(http, &serve.api, &text, runs, 8)
        .await
        .into_iter()
        .map(|(status, body)| {
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().expect("id").to_owned()
        })
        .collect();
    let accepted = t0.elapsed();
    for id in &ids {
        assert_eq!(serve.api.ended(http, id).await, "completed");
    }
    let all = t0.elapsed();
    drop(serve);
    let d = dir.path().to_owned();
    let direct = tokio::task::spawn_blocking(move || direct_runs(&d, runs, 32))
        .await
        .expect("direct");
    let (a, c, b) = (
        runs as f64 / accepted.as_secs_f64(),
        runs as f64 / all.as_secs_f64(),
        runs as f64 / direct.as_secs_f64(),
    );
    println!(
        "   serve: {a:.1} submissions/s accepted, {c:.1} runs/s completed ({:.2} s in all); \
         `capfleet run` x {runs}, 32 at a time: {b:.1} runs/s ({:.2} s); ratio {:.2}x",
        all.as_secs_f64(),
        direct.as_secs_f64(),
        c / b
    );
}

/// `runs` `capfleet run` processes in `dir`, `at_once` at a time; the time they took.
fn direct_runs(dir: &Path, runs: usize, at_once: usize) -> Duration {
    let t0 = Instant::now();
    let mut live: Vec<Child> = Vec::new();
    let mut started = 0;
    while started < runs || !live.is_empty() {
        live.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        while live.len() < at_once && started < runs {
            live.push(
                Command::new(EXE)
                    .current_dir(dir)
                    .args(["run", "fleet.toml"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("capfleet run"),
            );
            started += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

async fn burst(http: &reqwest::Client) {
    const BURST: usize = 500;
    println!("\n4. burst: {BURST} submissions by 100 clients at once, --max-runs 8 (queue 16)");
    let (_dir, text) = fleet_dir(QUICK);
    let serve = Serve::start(&["--max-runs", "8", "--queue", "16"]);
    // 100 connections at a time: 500 simultaneous connects trip the kernel's SYN-flood
    // guard on loopback, which resets some.
    let t0 = Instant::now();
    let (mut admitted, mut refused) = (Vec::new(), 0);
    for answer in submit_all(http, &serve.api, &text, BURST, 100).await {
        match answer {
            (201, body) => admitted.push(body["id"].as_str().expect("id").to_owned()),
            (429, _) => refused += 1,
            (status, body) => panic!("{status}: {body}"),
        }
    }
    let answered = t0.elapsed();
    for id in &admitted {
        assert_eq!(serve.api.ended(http, id).await, "completed");
    }
    println!(
        "   {} admitted, {refused} refused (429), none lost: every answer in {:.2} s, every admitted run completed in {:.2} s",
        admitted.len(),
        answered.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}

fn main() {
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3,4".into());
    let runtime = support::runtime();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    println!("capfleet serve bench (release binary; loopback; simulator sessions)");
    let _ = std::io::stdout().flush();
    runtime.block_on(async {
        if parts.contains('1') {
            first_event_latency(&http).await;
        }
        if parts.contains('2') {
            fan_out(&http).await;
        }
        if parts.contains('3') {
            sustained(&http).await;
        }
        if parts.contains('4') {
            burst(&http).await;
        }
    });
}
