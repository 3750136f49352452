//! Every way to stop `capfleet run` is a clean stop: `SIGTERM`, `SIGHUP`, `SIGINT`
//! and a second signal, sent at varied moments (before the agents are up, while they
//! boot, mid-turn) over the three bindings (stream-json, ACP, PTY, all the sim),
//! leave no agent process — not the agents, not their process groups, not a
//! grandchild that left its parent — and end the journal with a `run_ended` that
//! names the signal; the exit code is 128 + the signal. And a 100-session run whose
//! agents ignore end of input (and interrupts) stops on `SIGTERM` in bounded time.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::stop_fleet::{sim_sessions, write_fleet};
use crate::common::wires::{Wire, session};
use crate::common::{self, EnvMarker, capfleet, latest_run, processes_in_group, wait_until};

/// The kill grace between `SIGTERM` and `SIGKILL` (`process::DEFAULT_GRACE`).
const KILL_GRACE: Duration = Duration::from_secs(5);

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// A varied delay in `0..max_ms` (the clock's nanoseconds), printed for a rerun.
fn some_ms(max_ms: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos) % max_ms
}

/// The journal's `run_ended` record, once the run is over.
fn run_ended(dir: &Path) -> Option<Value> {
    let path = latest_run(dir).join("journal.jsonl");
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["type"] == "run_ended")
}

/// A second signal comes at least this long after the one before: two signals sent in
/// the same instant have no order capfleet could see (it takes them strongest first).
const SECOND_SIGNAL_AFTER_MS: u64 = 100;

/// Run a two-session fleet on `wire`, send `signals` (the first at a varied moment
/// after the run started, a second one shortly after), and check the stop was clean.
fn stop_cleanly(wire: Wire, signals: &[i32]) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("stop-signals");
    write_fleet(
        d,
        &[
            session("s0", wire, "hang.toml", &m),
            session("s1", wire, "hang.toml", &m),
        ],
    );
    let child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    // The run directory exists once the handlers are in place.
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(5), || d
            .join(".capfleet/runs")
            .is_dir()),
        "the run starts"
    );
    let delay = some_ms(1500);
    eprintln!("{wire:?} {signals:?}: first signal {delay} ms after the run started");
    // The agents' groups, as seen until the signal.
    let mut groups = BTreeSet::new();
    let until = Instant::now() + Duration::from_millis(delay);
    while Instant::now() < until {
        for pid in m.processes() {
            if let Some(s) = common::procs::stat(pid) {
                groups.insert(s.pgrp);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    signal(&child, signals[0]);
    for &again in &signals[1..] {
        std::thread::sleep(Duration::from_millis(SECOND_SIGNAL_AFTER_MS + some_ms(400)));
        signal(&child, again);
    }
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + signals[0]), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(took < KILL_GRACE + Duration::from_secs(5), "took {took:?}");
    let ended = run_ended(d).unwrap_or_else(|| panic!("no run_ended: {stderr}"));
    let name = match signals[0] {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGINT",
    };
    assert_eq!(ended["signal"], name, "{ended}");
    assert_eq!(ended["outcome"], "interrupted", "{ended}");
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
            .processes()
            .is_empty()),
        "no agent (nor grandchild) survives: {:?}",
        m.processes()
    );
    for pgid in groups {
        assert!(
            processes_in_group(pgid).is_empty(),
            "group {pgid} survives: {:?}",
            processes_in_group(pgid)
        );
    }
}

#[test]
fn sigterm_stops_a_stream_json_run_cleanly() {
    stop_cleanly(Wire::StreamJson, &[libc::SIGTERM]);
}

#[test]
fn sighup_stops_a_stream_json_run_cleanly() {
    stop_cleanly(Wire::StreamJson, &[libc::SIGHUP]);
}

#[test]
fn sigint_stops_a_stream_json_run_cleanly() {
    stop_cleanly(Wire::StreamJson, &[libc::SIGINT]);
}

#[test]
fn a_second_signal_stops_a_stream_json_run_cleanly() {
    stop_cleanly(Wire::StreamJson, &[libc::SIGINT, libc::SIGTERM]);
}

#[test]
fn sigterm_stops_an_acp_run_cleanly() {
    stop_cleanly(Wire::Acp, &[libc::SIGTERM]);
}

#[test]
fn sighup_stops_an_acp_run_cleanly() {
    stop_cleanly(Wire::Acp, &[libc::SIGHUP]);
}

#[test]
fn sigint_stops_an_acp_run_cleanly() {
    stop_cleanly(Wire::Acp, &[libc::SIGINT]);
}

#[test]
fn a_second_signal_stops_an_acp_run_cleanly() {
    stop_cleanly(Wire::Acp, &[libc::SIGTERM, libc::SIGINT]);
}

#[test]
fn sigterm_stops_a_pty_run_cleanly() {
    stop_cleanly(Wire::Pty, &[libc::SIGTERM]);
}

#[test]
fn sighup_stops_a_pty_run_cleanly() {
    stop_cleanly(Wire::Pty, &[libc::SIGHUP]);
}

#[test]
fn sigint_stops_a_pty_run_cleanly() {
    stop_cleanly(Wire::Pty, &[libc::SIGINT]);
}

#[test]
fn a_second_signal_stops_a_pty_run_cleanly() {
    stop_cleanly(Wire::Pty, &[libc::SIGINT, libc::SIGINT]);
}

/// 100 sessions whose agents ignore end of input and interrupts: `SIGTERM` ends the
/// run (every agent's group killed, in parallel) in bounded time.
#[test]
fn a_hundred_sessions_stop_on_sigterm_in_bounded_time() {
    const N: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("stop-hundred");
    let (k, v) = m.pair();
    write_fleet(d, &sim_sessions(N, k, v));
    let child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(120), Duration::from_millis(50), || m
            .processes()
            .len()
            >= N),
        "{N} agents run: {}",
        m.processes().len()
    );
    // Every agent in its hang (its `started` said).
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    eprintln!("{N} sessions: SIGTERM to exit {took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(took < KILL_GRACE + Duration::from_secs(5), "took {took:?}");
    assert_eq!(run_ended(d).expect("run_ended")["signal"], "SIGTERM");
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
            .processes()
            .is_empty()),
        "no agent survives: {} left",
        m.processes().len()
    );
}
