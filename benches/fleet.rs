//! Fleet-scale figures, each with a same-run baseline:
//!
//! - N = 100, 200 and 1,000 concurrent simulator sessions (stream-json, one short
//!   scripted turn each) through `run_fleet`, each N in a fresh child process: wall time
//!   against a bare spawn-prompt-wait loop over the same agents (no actors), the
//!   process's peak RSS (and its anonymous part), the peak RSS per session over the
//!   process warmed by a one-session run (VmHWM reset through `clear_refs`), the peak
//!   live heap per session (a counting allocator), and that no agent is left;
//! - journal throughput: a 200-session run with its journal on against the same run
//!   with it off, and the journal actor alone (events/s to disk);
//! - budget-cancel latency: 100 sessions, one of them crosses the budget; from that
//!   usage event to every other session's `cancel_requested` (delivery, asserted), and
//!   to the last turn ending cancelled (which includes the agents' own reaction);
//! - shutdown: `capfleet run` of 100 sessions whose agents ignore end of input and
//!   interrupts, from `SIGTERM` to its exit, against the same for one session (it must
//!   not grow with the sessions: every agent's group is killed in parallel).
//!
//! Run: `cargo bench --bench fleet`. `CAPFLEET_BENCH_SESSIONS=200,1000` chooses N;
//! `CAPFLEET_BENCH_PARTS=1,4` runs some parts only (1 sizes, 2 journal, 3 budget, 4
//! shutdown).
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capfleet_engine::protocol::CapEvent;
use capfleet_engine::run::RunReport;
use capfleet_engine::session::SessionSpec;
use capfleet_wire::events::{EventBody, Published, TurnOutcome};
use tokio::sync::mpsc;

mod support;

#[path = "../tests/all/common/stop_fleet.rs"]
mod stop_fleet;

use support::figures::ms;
use support::survivors;

/// Counts live heap bytes (and their peak) so the per-session figure is the
/// orchestrator's own memory, not the allocator's or the kernel's rounding.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed)
                    + (new_size - layout.size());
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Set in a child process: run one fleet of this many sessions and print its figures.
const CHILD: &str = "CAPFLEET_BENCH_FLEET_CHILD";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn main() {
    if let Some(n) = std::env::var(CHILD).ok().and_then(|n| n.parse().ok()) {
        return child(n);
    }
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3,4".into());
    let rt = runtime();
    let sizes: Vec<usize> = std::env::var("CAPFLEET_BENCH_SESSIONS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 200, 1000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("fleet-bench-{}", std::process::id());
    println!("capfleet fleet bench (2 worker threads)");
    // Each size in a fresh process, so its peak RSS is its own.
    for n in sizes.into_iter().filter(|_| parts.contains('1')) {
        let out = Command::new(std::env::current_exe().expect("exe"))
            .env(CHILD, n.to_string())
            .stderr(Stdio::inherit())
            .output()
            .expect("bench child");
        assert!(out.status.success(), "the {n}-session child failed");
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }

    if parts.contains('2') {
        // Journal throughput: the same 200-session run with and without the journal.
        let j = dir.path().join("journal.jsonl");
        let t = Instant::now();
        let (_baseline, _) = rt.block_on(run(dir.path(), 200, None, &marker, 0.0));
        let base = t.elapsed();
        let t = Instant::now();
        let (with, _) = rt.block_on(run(dir.path(), 200, Some(j.clone()), &marker, 0.0));
        let journaled = t.elapsed();
        let records = with.journal.records;
        println!(
            "journal  {records} records in a {:.0} ms run (same run without journal {:.0} ms): {:.0} records/s of run time; overhead {:+.1}%",
            ms(journaled),
            ms(base),
            records as f64 / journaled.as_secs_f64(),
            100.0 * (journaled.as_secs_f64() / base.as_secs_f64() - 1.0)
        );

        // The journal on its own: 200,000 session events through the journal actor to disk.
        // Consecutive text chunks are joined into one record: the rate is of events in.
        let events = 200_000;
        let (records, took) = rt.block_on(journal_alone(dir.path(), events));
        println!(
            "journal  {events} events ({records} records: text runs joined) written and synced in {:.0} ms: {:.0} events/s (goal >= 50k/s)",
            ms(took),
            events as f64 / took.as_secs_f64()
        );
    }

    if parts.contains('3') {
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
        // Delivery: each session's `cancel_requested` (the Cancel message handled, the
        // interrupt sent to its agent), against the crossing usage event.
        let mut delivered: Vec<u64> = events
            .iter()
            .filter(|e| matches!(e.body, EventBody::CancelRequested { .. }))
            .map(|e| e.ts_ms.saturating_sub(crossing))
            .collect();
        delivered.sort_unstable();
        let pct = |p: usize| {
            delivered
                .get((delivered.len() * p / 100).min(delivered.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "budget   crossing usage event → cancel delivered to {} sessions: median {} ms, max {} ms (goal ≤ 50 ms); → last turn ended cancelled: {} ms (includes the agents' own reaction); outcome {:?}",
            delivered.len(),
            pct(50),
            pct(100),
            last.saturating_sub(crossing),
            report.outcome
        );
        assert!(
            delivered.len() >= 99,
            "the cancel reached the 99 waiting sessions"
        );
        assert!(
            pct(100) <= 100,
            "cancel delivery within twice the 50 ms goal"
        );
        assert_eq!(survivors(&marker), 0, "no agent left");
    }

    if parts.contains('4') {
        shutdown(&marker);
    }
}

/// `capfleet run` of `n` sessions whose agents hang (ignoring end of input and
/// interrupts): the time from `SIGTERM`, once every agent is up, to its exit (143);
/// no agent left after it.
fn sigterm_to_exit(n: usize, marker: &str) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    stop_fleet::write_fleet(d, &stop_fleet::sim_sessions(n, support::MARKER, marker));
    let mut child = Command::new(env!("CARGO_BIN_EXE_capfleet"))
        .args(["run", "fleet.toml"])
        .current_dir(d)
        .env("XDG_CONFIG_HOME", d.join("config"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet run");
    let up = Instant::now() + Duration::from_secs(120);
    while survivors(marker) < n {
        assert!(Instant::now() < up, "{n} agents up: {}", survivors(marker));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every agent in its hang (its `started` said).
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(143), "exit of the {n}-session run");
    let gone = Instant::now() + Duration::from_secs(3);
    while survivors(marker) > 0 {
        assert!(Instant::now() < gone, "{} agents left", survivors(marker));
        std::thread::sleep(Duration::from_millis(20));
    }
    took
}

/// Shutdown of a 100-session run against a one-session run, same agents, same run.
fn shutdown(marker: &str) {
    let one = sigterm_to_exit(1, &format!("{marker}-stop-1"));
    let hundred = sigterm_to_exit(100, &format!("{marker}-stop-100"));
    println!(
        "shutdown SIGTERM → exit of `capfleet run`, agents ignoring end of input: 100 sessions {:.0} ms, 1 session {:.0} ms: {:.2}x (goal: flat in sessions, ≤ 1 s + the kill grace)",
        ms(hundred),
        ms(one),
        hundred.as_secs_f64() / one.as_secs_f64()
    );
}

/// One fleet of `n` sessions in this (fresh) process: wall time, peak RSS and peak
/// live heap over the idle process, agents left.
fn child(n: usize) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("fleet-bench-child-{}", std::process::id());
    // A one-session run first, so the code, the runtime's worker state and the lazily
    // compiled patterns are resident: what is measured after it is what sessions cost.
    let (_, warm) = rt.block_on(run_counting(dir.path(), 1, &marker));
    assert_eq!(warm, 1, "the warm-up session completed");
    let warm_rss = rss_kib("VmRSS");
    // Reset the peak (VmHWM) to the current RSS (proc(5), clear_refs "5").
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let idle_rss = rss_kib("VmRSS");
    let idle_heap = LIVE.load(Ordering::Relaxed);
    PEAK.store(idle_heap, Ordering::Relaxed);
    // Anonymous memory has no kernel peak counter: sample it.
    let peak_anon = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let peak_anon = peak_anon.clone();
        rt.spawn(async move {
            loop {
                peak_anon.fetch_max(rss_kib("RssAnon") as usize, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let started = Instant::now();
    let (report, completed) = rt.block_on(run_counting(dir.path(), n, &marker));
    let wall = started.elapsed();
    sampler.abort();
    // Baseline, same process: the same n agents spawned, prompted and waited for by a
    // bare loop (no actors, no routing, no journal): what any orchestrator must pay.
    let started = Instant::now();
    rt.block_on(bare(dir.path(), n));
    let bare_wall = started.elapsed();
    let peak_rss = rss_kib("VmHWM");
    let peak_heap = PEAK.load(Ordering::Relaxed);
    assert_eq!(completed, n, "every session completed its turn");
    let left = survivors(&marker);
    println!(
        "fleet    {n:>5} sessions  wall {:>7.0} ms ({:.2} ms/session; bare spawn-prompt-wait loop {:.0} ms, ratio {:.2})  process peak {:.1} MiB (anonymous {:.1} MiB, the rest code pages)  peak RSS {:.1} KiB/session over the warm process ({warm_rss} KiB)  peak heap {:.1} KiB/session  agents left {left}  outcome {:?}",
        ms(wall),
        ms(wall) / n as f64,
        ms(bare_wall),
        wall.as_secs_f64() / bare_wall.as_secs_f64(),
        peak_rss as f64 / 1024.0,
        peak_anon.load(Ordering::Relaxed) as f64 / 1024.0,
        peak_rss.saturating_sub(idle_rss) as f64 / n as f64,
        peak_heap.saturating_sub(idle_heap) as f64 / 1024.0 / n as f64,
        report.outcome
    );
    assert_eq!(left, 0, "no agent left");
}

/// `n` simulator agents run by hand, concurrently: spawn, one prompt frame, read to
/// the result line, close stdin, wait for the exit.
async fn bare(dir: &Path, n: usize) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let script = dir.join("quick.toml");
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let script = script.clone();
            tokio::spawn(async move {
                let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capfleet"))
                    .args(["sim", "--mode", "stream-json"])
                    .env("CAPFLEET_SIM_SCRIPT", &script)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("sim");
                let mut stdin = child.stdin.take().expect("stdin");
                let frame = capfleet_wire::bindings::stream_json::outbound::user_frame("go");
                stdin.write_all(frame.as_bytes()).await.expect("prompt");
                stdin.write_all(b"\n").await.expect("prompt");
                let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
                while let Some(line) = lines.next_line().await.expect("read") {
                    if line.contains("\"type\":\"result\"") {
                        break;
                    }
                }
                drop(stdin);
                child.wait().await.expect("exit");
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("bare session");
    }
}

/// [`run`] with a watcher that only counts completed turns (keeps nothing).
async fn run_counting(dir: &Path, n: usize, marker: &str) -> (RunReport, usize) {
    let (tx, mut rx) = mpsc::channel::<Published>(4096);
    let counter = tokio::spawn(async move {
        let mut completed = 0;
        while let Some(e) = rx.recv().await {
            if matches!(
                e.body,
                EventBody::TurnEnded {
                    outcome: TurnOutcome::Completed,
                    ..
                }
            ) {
                completed += 1;
            }
        }
        completed
    });
    let report = run_with(dir, n, None, marker, 0.0, tx).await;
    (report, counter.await.expect("counter"))
}

/// Push `n` published events straight into a journal actor; the records written and the
/// time until all are on disk.
async fn journal_alone(dir: &Path, n: u64) -> (u64, Duration) {
    use capfleet_wire::events::SessionEvent;
    let urn: Arc<str> = Arc::from("cap://bench/s0");
    support::journal_through(dir.join("alone.jsonl"), n, |seq| SessionEvent {
        seq,
        urn: urn.clone(),
        turn: Some(1),
        ts_ms: 0,
        body: EventBody::Cap {
            event: CapEvent::text("msg_1", "a chunk of the answer, forty-odd bytes long"),
        },
    })
    .await
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

/// [`run_with`], every published event kept.
async fn run(
    dir: &Path,
    n: usize,
    journal: Option<PathBuf>,
    marker: &str,
    budget: f64,
) -> (RunReport, Vec<Published>) {
    let sessions = sessions(dir, n, marker, budget);
    let budget = (budget > 0.0).then_some(budget);
    support::run("bench", sessions, budget, journal, Default::default()).await
}

/// One run of `n` sim sessions; with `budget` > 0, session 0 spends over it and the
/// others wait long (so they are cancelled).
async fn run_with(
    dir: &Path,
    n: usize,
    journal: Option<PathBuf>,
    marker: &str,
    budget: f64,
    watcher: mpsc::Sender<Published>,
) -> RunReport {
    let sessions = sessions(dir, n, marker, budget);
    let budget = (budget > 0.0).then_some(budget);
    support::run_with(
        "bench",
        sessions,
        budget,
        journal,
        Default::default(),
        watcher,
    )
    .await
}

/// `n` sim sessions with one quick turn each; with `budget` > 0, session 0 spends
/// over it and the others wait long.
fn sessions(dir: &Path, n: usize, marker: &str, budget: f64) -> Vec<SessionSpec> {
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
    support::sim_sessions(dir, "bench", n, marker, |i| match (budget > 0.0, i) {
        (false, _) => quick.clone(),
        (true, 0) => spend.clone(),
        (true, _) => wait.clone(),
    })
}
