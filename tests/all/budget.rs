//! Money counted exactly, through `capfleet run`: a run whose turn crosses the fleet's
//! `budget_usd` exits 3 every time (whichever turn crosses it, however the crossing
//! races the run's end), no turn starts past the limit, a session's own budget stops
//! that session (recorded, in the summary), and spend reported before a Ctrl-C is
//! what the summary and the journal show.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::sim::fleet_session;
use common::{EnvMarker, capfleet, journal_records, run_ended};
use serde_json::Value;

use crate::common;

/// A turn spending `usd`, then saying `say`.
fn spend(usd: f64, say: &str) -> String {
    format!(
        "[[turn]]\nsteps = [{{ usage = {{ input_tokens = 10, output_tokens = 10, cost_usd = {usd} }} }}, {{ say = \"{say}\" }}]\n"
    )
}

/// A fleet directory: `scripts` written, `fleet.toml` from `fleet` (the `[fleet]`
/// table's lines after its name) and the sessions.
fn fleet_dir(scripts: &[(&str, String)], fleet: &str, sessions: &[String]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in scripts {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let toml = format!("[fleet]\nname = \"b\"\n{fleet}\n\n{}", sessions.join("\n"));
    std::fs::write(dir.path().join("fleet.toml"), toml).unwrap();
    dir
}

/// A two-step pipeline under a 0.25 USD budget: `a` (running `a_script`) gets the
/// task, its end routes to `b` (running `b_script`).
fn pipeline(m: &EnvMarker, a_script: String, b_script: String) -> tempfile::TempDir {
    fleet_dir(
        &[("a.toml", a_script), ("b.toml", b_script)],
        "start = [\"a\"]\ntask = \"go\"\nbudget_usd = 0.25\n\n[[routes]]\nwhen = \"a\"\nroute_to = \"b\"",
        &[
            fleet_session("a", "a.toml", m, ""),
            fleet_session("b", "b.toml", m, ""),
        ],
    )
}

fn run(dir: &Path) -> (Output, Vec<Value>) {
    let out = capfleet(dir).args(["run", "fleet.toml"]).output().unwrap();
    let records = journal_records(&common::latest_run(dir).join("journal.jsonl"));
    (out, records)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn of_type<'r>(records: &'r [Value], kind: &str) -> Vec<&'r Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

/// 50 runs of a fleet whose only turn overspends, ten at a time: every one exits 3
/// with `budget_exceeded` journaled (before the fix, most ended "completed", exit 0:
/// the run's end raced the budget's verdict).
#[test]
fn fifty_runs_whose_only_turn_overspends_all_exit_3() {
    let m = EnvMarker::new("budget-fifty");
    let exits: Vec<(Option<i32>, Option<String>, String)> = (0..5)
        .flat_map(|_| {
            let batch: Vec<_> = (0..10)
                .map(|_| {
                    let m = &m;
                    let dir = fleet_dir(
                        &[("spend.toml", spend(0.4, "spent"))],
                        "start = [\"spend\"]\ntask = \"go\"\nbudget_usd = 0.25",
                        &[fleet_session("spend", "spend.toml", m, "")],
                    );
                    std::thread::spawn(move || {
                        let (out, records) = run(dir.path());
                        (out.status.code(), run_ended(&records), stderr(&out))
                    })
                })
                .collect();
            batch
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let wrong: Vec<_> = exits
        .iter()
        .filter(|(code, ended, _)| *code != Some(3) || ended.as_deref() != Some("budget_exceeded"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of 50 runs did not exit 3 budget_exceeded; first: {:?}",
        wrong.len(),
        wrong.first()
    );
    assert!(common::wait_until(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || m.processes().is_empty()
    ));
}

/// The last turn of a pipeline crosses the budget (the first stays under it): exit 3,
/// the crossing recorded with that turn, and the summary shows the overshoot and why.
#[test]
fn the_last_turn_crossing_the_budget_exits_3_with_the_overshoot() {
    let m = EnvMarker::new("budget-last");
    let dir = pipeline(&m, spend(0.2, "first"), spend(0.2, "last"));
    let (out, records) = run(dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(run_ended(&records).as_deref(), Some("budget_exceeded"));
    let crossed = of_type(&records, "budget_exceeded");
    assert_eq!(crossed.len(), 1, "{crossed:?}");
    assert_eq!(crossed[0]["scope"], "fleet");
    assert_eq!(crossed[0]["urn"], "cap://b/b");
    assert_eq!(crossed[0]["turn"], 1);
    assert!(
        err.contains("fleet budget exceeded: $0.4000 spent of $0.2500, over by $0.1500: crossed by turn 1 of b in flight"),
        "{err}"
    );
}

/// The first turn crosses the budget: the route it would fire is refused, the next
/// session never starts a turn.
#[test]
fn no_turn_starts_once_the_budget_is_crossed() {
    let m = EnvMarker::new("budget-no-next");
    let dir = pipeline(&m, spend(0.4, "over"), spend(0.0, "never"));
    let (out, records) = run(dir.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        !records
            .iter()
            .any(|r| r["urn"] == "cap://b/b" && r["type"] == "turn_started"),
        "b started a turn past the budget"
    );
    assert!(
        of_type(&records, "refused")
            .iter()
            .any(|r| r["to"] == "b" && r["reason"].as_str().unwrap_or("").contains("stopping")),
        "the route to b is refused, recorded"
    );
}

/// A session crossing its own budget is recorded and stopped (a later mention to it is
/// refused); the other session finishes; the run exits 3 and the summary says so.
#[test]
fn a_session_crossing_its_own_budget_is_stopped_and_reported() {
    let m = EnvMarker::new("budget-session");
    let dir = fleet_dir(
        &[
            ("s.toml", spend(0.3, "spent")),
            (
                "w.toml",
                "[[turn]]\nsteps = [{ sleep_ms = 1500 }, { say = \"@cap://s more work\" }]\n"
                    .to_owned(),
            ),
        ],
        "start = [\"s\", \"w\"]\ntask = \"go\"",
        &[
            fleet_session("s", "s.toml", &m, "budget_usd = 0.1"),
            fleet_session("w", "w.toml", &m, ""),
        ],
    );
    let (out, records) = run(dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(run_ended(&records).as_deref(), Some("budget_exceeded"));
    let crossed = of_type(&records, "budget_exceeded");
    assert_eq!(crossed.len(), 1, "{crossed:?}");
    assert_eq!(crossed[0]["scope"], "cap://b/s");
    assert_eq!(crossed[0]["turn"], 1);
    assert!(
        of_type(&records, "refused")
            .iter()
            .any(|r| r["to"] == "s" && r["reason"] == "the session's budget is spent"),
        "the mention to s is refused: {records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["urn"] == "cap://b/w" && r["outcome"] == "completed"),
        "w finished its turn"
    );
    assert!(
        !records
            .iter()
            .any(|r| r["urn"] == "cap://b/s" && r["turn"] == 2),
        "s ran no second turn"
    );
    assert!(
        err.contains("s budget exceeded: $0.3000 spent of $0.1000, over by $0.2000: crossed by turn 1 of s in flight"),
        "{err}"
    );
}

/// Ctrl-C while a turn runs, after it reported $0.30: the summary and the journal
/// keep the $0.30 (before the fix: the tokens, but $0.0000 and a zero cost estimate).
/// The usage step comes before the `started` text the test waits for: once that text
/// is journaled the sim has certainly counted the spend.
#[test]
fn spend_reported_before_ctrl_c_is_kept() {
    let m = EnvMarker::new("budget-sigint");
    let dir = fleet_dir(
        &[(
            "long.toml",
            "[[turn]]\nsteps = [{ usage = { input_tokens = 100, output_tokens = 50, cost_usd = 0.3 } }, { say = \"started\" }, { sleep_ms = 20000 }, { say = \"never\" }]\n".to_owned(),
        )],
        "start = [\"a\"]\ntask = \"go\"",
        &[fleet_session("a", "long.toml", &m, "")],
    );
    let d = dir.path();
    let child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    let started = common::wait_until(Duration::from_secs(15), Duration::from_millis(50), || {
        d.join(".capfleet/runs").exists()
            && std::fs::read_to_string(common::latest_run(d).join("journal.jsonl"))
                .is_ok_and(|j| j.contains("\"started\""))
    });
    assert!(started, "the turn started");
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let records = journal_records(&common::latest_run(d).join("journal.jsonl"));
    let usage: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.usage")
        .collect();
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(usage[0]["event"]["input_tokens"], 100);
    assert_eq!(usage[0]["event"]["cost_usd_estimate"], 0.3);
    let total = err
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap_or_default();
    assert!(total.contains("$  0.3000"), "{err}");
    assert!(common::wait_until(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || m.processes().is_empty()
    ));
}
