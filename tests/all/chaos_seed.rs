//! A chaos run's faults come from its seed: two runs of one fleet with one seed
//! journal the same (fault, target, turn) list, and only the targeted sessions are
//! hit. `[chaos]` and `--chaos` are validated before anything spawns, every bad key
//! named with its file, line and fix.

use std::time::Duration;

use crate::common::EnvMarker;
use crate::common::chaos_run::{fleet, parse_failures, records, said, sequence};
use crate::common::repo::stderr;
use crate::common::run_ended;

const SESSIONS: &[&str] = &["worker-1", "worker-2", "worker-3", "worker-4", "lead"];
const SPEC: &str = "seed=10,kill=0.45/turn,term=0.3/turn,exit=0.1/turn,target=worker-*";

#[test]
fn the_same_seed_gives_the_same_fault_sequence() {
    let marker = EnvMarker::new("chaos-seed");
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let dir = fleet(SESSIONS, &marker, 10, 150, 10);
            let out = dir.capfleet(&["run", "fleet.toml", "--chaos", SPEC]);
            let journal = dir.journal();
            (out, journal)
        })
        .collect();
    marker.wait_gone(Duration::from_secs(2), "agents after the chaos runs");
    let (first, second) = (&runs[0].1, &runs[1].1);
    let faults = sequence(first);
    assert!(
        faults.len() >= 3,
        "the seed hits several attempts: {faults:?}\n{}",
        stderr(&runs[0].0)
    );
    assert_eq!(faults, sequence(second), "the same seed, the same faults");
    for r in records(first) {
        assert_ne!(r["target"], "lead", "lead is no target: {r}");
        assert!(r["seed_pos"].is_u64(), "{r}");
        assert_eq!(
            r["urn"],
            format!("cap://chaos/{}", r["target"].as_str().unwrap()),
            "journaled on the target's stream"
        );
        // Journaled before it is applied: the restart it caused comes after it.
        if r["fault"] == "kill" || r["fault"] == "term" {
            assert!(
                first.iter().any(|e| e["type"] == "restart"
                    && e["urn"] == r["urn"]
                    && e["seq"].as_u64() > r["seq"].as_u64()),
                "no restart after {r}"
            );
        }
    }
    assert!(
        faults.iter().any(|(f, _, _, _)| f == "kill"),
        "a kill among {faults:?}"
    );
    // Each killed attempt was restarted: a restart record follows each kill or term
    // on the same stream.
    let restarts = first.iter().filter(|r| r["type"] == "restart").count();
    let signals = faults
        .iter()
        .filter(|(f, _, _, _)| f == "kill" || f == "term")
        .count();
    assert!(
        restarts >= signals,
        "{restarts} restarts for {signals} signals"
    );
    assert_eq!(run_ended(first), run_ended(second), "the same outcome");
}

#[test]
fn a_bad_chaos_spec_is_refused_naming_file_line_and_fix() {
    let marker = EnvMarker::new("chaos-invalid");
    let dir = fleet(&["worker-1"], &marker, 3, 10, 10);
    let text = dir.read("fleet.toml");
    let with = |chaos: &str| {
        dir.write("bad.toml", &format!("{text}\n[chaos]\n{chaos}"));
        let out = dir.capfleet(&["run", "--dry-run", "bad.toml"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    let err = with("seed = 3\nkill = \"2/turn\"\nhang = { at = [\"soon\"] }\n");
    assert!(
        err.contains("bad.toml:") && err.contains("chaos.kill"),
        "{err}"
    );
    assert!(err.contains("at most 1"), "the fix: {err}");
    assert!(err.contains("chaos.hang.at"), "{err}");
    let err = with("seed = 3\nkill = \"0.5/turn\"\ntarget = [\"worker-*\", \"nobody\"]\n");
    assert!(
        err.contains("chaos.target") && err.contains("\"nobody\" is no session"),
        "{err}"
    );

    let inline = |spec: &str| {
        let out = dir.capfleet(&["run", "fleet.toml", "--chaos", spec]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    let err = inline("seed=1,kill=0.1/turn,target=nobody");
    assert!(
        err.contains("--chaos") && err.contains("\"nobody\" is no session"),
        "{err}"
    );
    let err = inline("kill=often");
    assert!(
        err.contains("kill: \"often\"") && err.contains("seed"),
        "{err}"
    );
    marker.wait_gone(Duration::from_secs(1), "nothing was started");
}

/// A byte fault of `--chaos` reaches the agent's frames through the session's
/// interposer, armed before the attempt's prompt is written: the turn's first frame
/// (its text "working") is wholly garbled, one `parse_failed` after the `chaos`
/// record; the rest of the turn ("done", the result) passes, and the turn completes
/// without a restart.
#[test]
fn a_garble_fault_of_the_spec_garbles_the_agents_frames() {
    let marker = EnvMarker::new("chaos-garble");
    let dir = fleet(&["worker-1"], &marker, 3, 50, 10);
    let out = dir.capfleet(&[
        "run",
        "fleet.toml",
        "--chaos",
        "seed=2,garble=1/turn,garble_fraction=1,garble_frames=1",
    ]);
    let journal = dir.journal();
    marker.wait_gone(Duration::from_secs(2), "agents after the run");
    let chaos = records(&journal);
    assert_eq!(
        chaos.len(),
        1,
        "one attempt, one garble: {chaos:?}\n{}",
        stderr(&out)
    );
    assert_eq!(chaos[0]["fault"], "garble");
    let urn = &chaos[0]["urn"];
    assert_eq!(parse_failures(&journal, urn), 1, "{journal:?}");
    let parse_failed = journal
        .iter()
        .position(|r| r["event"]["code"] == "parse_failed");
    let record = journal.iter().position(|r| r["type"] == "chaos");
    assert!(record < parse_failed, "the record first: {journal:?}");
    assert_eq!(said(&journal, urn), "done", "the first frame garbled");
    assert_eq!(run_ended(&journal).as_deref(), Some("completed"));
    assert!(
        !journal.iter().any(|r| r["type"] == "restart"),
        "{journal:?}"
    );
}
