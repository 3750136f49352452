//! The "must hold" kill test (issue 17): a six-session fleet with routes, a
//! join, a master plan, a mention, a restart and a budget, in a git checkout, is
//! `SIGKILL`ed at 30 seeded moments — the first during the run, each other during
//! the resume before it — and resumed after each: within 1 s of each kill no agent
//! of the run survives; the last resume completes the run; across all of it no
//! delivery is routed or completed twice and no turn completes twice; the usage
//! the journal holds is what the agents billed (each sim records each result before
//! writing it, `--emitted`: all of it is in the journal but, at most, the last result
//! of an agent killed with capfleet before capfleet could journal it — or before the
//! agent wrote it); and the run ends as
//! an uninterrupted one of the same fleet does (the same deliveries completed, the
//! same diffs of every worktree).
//!
//! The same with `SIGTERM` and with `SIGINT`, 8 stops each (the same code, the signal
//! a parameter; each stop journals `stopping`, cancels the turns and ends the run
//! cleanly, so one costs more than a kill): the resume takes up what the stop cut —
//! the turns it cancelled are no turns done (`max_turns` does not count them) and run
//! again, a turn that completed during the stop is replayed where that resume took it
//! — with the same assertions.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::EnvMarker;
use crate::common::durable::{
    Moments, as_uninterrupted, completed, diffs, emitted, journaled, same_work, six, stop,
    usage_as_billed,
};
use crate::common::repo::{Fixture, stderr};

const KILLS: usize = 30;
/// Clean stops (SIGTERM, SIGINT), each signal.
const STOPS: usize = 8;

#[test]
fn thirty_sigkills_and_resumes_end_as_an_uninterrupted_run() {
    stopped_and_resumed(libc::SIGKILL, KILLS, 0x5eed_0017, "durable-kills");
}

#[test]
fn eight_sigterms_and_resumes_end_as_an_uninterrupted_run() {
    stopped_and_resumed(libc::SIGTERM, STOPS, 0x5eed_0015, "durable-terms");
}

#[test]
fn eight_sigints_and_resumes_end_as_an_uninterrupted_run() {
    stopped_and_resumed(libc::SIGINT, STOPS, 0x5eed_0002, "durable-ints");
}

/// Turns started so far in `f`'s last run (none before it has a journal).
fn turns_started(f: &Fixture) -> usize {
    f.journal_so_far()
        .iter()
        .filter(|r| r["type"] == "turn_started")
        .count()
}

/// Wait until capfleet `child`, running in `f`, has started a turn past the `before`
/// of its journal: false if it ended first.
fn working(f: &Fixture, child: &mut Child, before: usize) -> bool {
    let t = Instant::now();
    while turns_started(f) <= before {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no turn started in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// The fleet run once whole, then stopped by `signal` at `wanted` seeded moments
/// (each during the resume before it) and resumed to its end.
fn stopped_and_resumed(signal: libc::c_int, wanted: usize, seed: u64, marker: &str) {
    let t = Instant::now();
    let m = EnvMarker::new(marker);
    let usage = tempfile::tempdir().unwrap();
    let whole = six(&m, &usage.path().join("whole.jsonl"));
    let mut child = whole
        .command(&["run", "fleets/six.toml"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(working(&whole, &mut child, 0), "the run starts a turn");
    let starting = t.elapsed();
    let out = child.wait_with_output().unwrap();
    let span = t.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let wj = whole.journal();
    let expected = completed(&wj);
    assert!(expected.len() >= 8, "{expected:?}");
    for kind in ["join", "plan_entry", "restart"] {
        assert!(
            wj.iter().any(|r| r["type"] == kind),
            "the fleet has a {kind}"
        );
    }
    let (whole_emitted, _) = emitted(&usage.path().join("whole.jsonl"));
    let kept = journaled(&wj);
    assert!(
        kept.within(whole_emitted) && whole_emitted.within(kept),
        "uninterrupted, all usage journaled: {kept:?} of {whole_emitted:?}"
    );

    let file = usage.path().join("killed.jsonl");
    let repo = six(&m, &file);
    let mut at = Moments(seed);
    // Kill moments: counted from the first turn each start begins (what a start costs
    // before that follows the machine's load, the agents' work does not), within the
    // time the agents' work took uninterrupted.
    let work = (span - starting).as_millis() as u64;
    let (lo, hi) = (work / 20, work / 6);
    eprintln!(
        "uninterrupted: {span:?}, agents at work after {starting:?}; kills {lo}..{hi} ms into each one's work"
    );
    let mut kills = 0;
    let mut args = vec!["run".to_owned(), "fleets/six.toml".to_owned()];
    while kills < wanted {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = turns_started(&repo);
        let mut child = repo
            .command(&argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if !working(&repo, &mut child, before) {
            // It ended before starting a turn: completed.
            break;
        }
        std::thread::sleep(at.next(lo, hi));
        if child.try_wait().unwrap().is_some() {
            // It ended before the kill: completed.
            break;
        }
        kills += 1;
        stop(&mut child, signal, &format!("stop {kills}"));
        assert!(
            m.processes().is_empty(),
            "stop {kills}: {:?}",
            m.processes()
        );
        args = vec!["run".into(), "--resume".into(), repo.run_id()];
    }
    let before = completed(&repo.journal()).len();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let last = repo.capfleet(&argv);
    let err = stderr(&last);
    assert_eq!(last.status.code(), Some(0), "after {kills} kills: {err}");
    eprintln!(
        "{kills} kills ({before} of {} deliveries completed before the last resume), {:?} in all",
        expected.len(),
        t.elapsed()
    );
    assert!(kills >= wanted / 2, "most kills landed mid-run: {kills}");
    let j = repo.journal();
    as_uninterrupted(&j, &expected);
    // The same work in every worktree, as docs/guide/durability.md promises it across
    // cuts (an edit a cut turn had applied may be applied again by its re-issue).
    if let Err(e) = same_work(&diffs(&repo), &diffs(&whole)) {
        panic!("after {kills} stops: {e}");
    }
    if let Err(e) = usage_as_billed(&j, &file) {
        panic!("{e}");
    }
    assert!(m.processes().is_empty());
}
