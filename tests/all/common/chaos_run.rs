//! Chaos runs (`capfleet run --chaos`, `[chaos]`) of sim fleets in a plain directory:
//! a fleet of independent sim sessions written ([`fleet`]), or the shipped soak agent
//! and fleet ([`fixture`], [`soak_fleet`]); the run within a deadline ([`run`]); its
//! `chaos` records read back ([`records`], [`sequence`]) and its report
//! (`capfleet chaos report latest --json`, [`report`]) checked.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use super::EnvMarker;
use super::output_within;
use super::repo::Fixture;

/// A fleet `chaos` of independent sim sessions (each gets the task once, all start
/// together), every session `restart = "permanent"` with `max_restarts` in a minute,
/// a turn timeout of `turn_timeout_s`, each turn `turn_ms` long; `marker` in every
/// agent's environment. Written as `fleet.toml` in a new plain directory.
pub(crate) fn fleet(
    sessions: &[&str],
    marker: &EnvMarker,
    max_restarts: u32,
    turn_ms: u64,
    turn_timeout_s: u64,
) -> Fixture {
    let dir = Fixture::plain();
    dir.write(
        "turn.toml",
        &format!(
            "[[turn]]\nsteps = [{{ say = \"working\" }}, {{ sleep_ms = {turn_ms} }}, \
             {{ say = \"done\" }}]\n"
        ),
    );
    let start: Vec<String> = sessions.iter().map(|s| format!("{s:?}")).collect();
    let (k, v) = marker.pair();
    let mut text = format!(
        "[fleet]\nname = \"chaos\"\nstart = [{}]\ntask = \"work\"\nauto_answer = true\n\
         turn_timeout_s = {turn_timeout_s}\n",
        start.join(", ")
    );
    for s in sessions {
        text.push_str(&format!(
            "\n[[sessions]]\nname = \"{s}\"\nagent = \"sim\"\nscript = \"turn.toml\"\n\
             restart = \"permanent\"\nmax_restarts = {max_restarts}\nrestart_window_s = 60\n\
             env = {{ {k} = \"{v}\" }}\n"
        ));
    }
    dir.write("fleet.toml", &text);
    dir
}

/// The `chaos` records of a journal.
pub(crate) fn records(journal: &[Value]) -> Vec<&Value> {
    journal.iter().filter(|r| r["type"] == "chaos").collect()
}

/// The text the journal holds of stream `urn` (its `cap` text events, joined).
pub(crate) fn said(journal: &[Value], urn: &Value) -> String {
    journal
        .iter()
        .filter(|r| r["type"] == "cap" && &r["urn"] == urn)
        .filter_map(|r| r["event"]["text"].as_str())
        .collect()
}

/// The `parse_failed` errors journaled on stream `urn`.
pub(crate) fn parse_failures(journal: &[Value], urn: &Value) -> usize {
    journal
        .iter()
        .filter(|r| &r["urn"] == urn && r["event"]["code"] == "parse_failed")
        .count()
}

/// Each `chaos` record as (fault, target, turn, seed_pos), sorted: the sequence a
/// seed decides (the sessions' records interleave by timing; each session's own are
/// in order).
pub(crate) fn sequence(journal: &[Value]) -> Vec<(String, String, u64, u64)> {
    let mut out: Vec<_> = records(journal)
        .into_iter()
        .map(|r| {
            (
                r["fault"].as_str().unwrap_or_default().to_owned(),
                r["target"].as_str().unwrap_or_default().to_owned(),
                r["turn"].as_u64().unwrap_or(0),
                r["seed_pos"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

/// A plain directory with `sim/soak.toml` and `fleets/<name>.toml` holding `fleet`.
pub(crate) fn fixture(name: &str, fleet: &str) -> Fixture {
    let f = Fixture::plain();
    f.write("sim/soak.toml", &shipped("sim/soak.toml"));
    f.write(&format!("fleets/{name}.toml"), fleet);
    f
}

/// The shipped soak fleet (`config/fleets/soak.toml`) with `max_turns` per session.
pub(crate) fn soak_fleet(max_turns: u32) -> String {
    let text = shipped("fleets/soak.toml");
    assert!(text.contains("max_turns = 480"), "the soak's turns moved");
    text.replace("max_turns = 480", &format!("max_turns = {max_turns}"))
}

/// The shipped `config/<path>`.
fn shipped(path: &str) -> String {
    std::fs::read_to_string(super::repo_root().join("config").join(path)).unwrap()
}

/// `capfleet run fleets/<name>.toml` in `f`, to its end within `limit`.
pub(crate) fn run(f: &Fixture, name: &str, limit: Duration) -> Output {
    let mut c = f.command(&["run", &format!("fleets/{name}.toml")]);
    c.env("CAPFLEET_LOG", "error");
    output_within(c, limit)
}

/// `capfleet chaos report latest --json` in `f`: the report, and whether the command
/// said every invariant holds (exit 0).
pub(crate) fn report(f: &Fixture) -> (Value, bool) {
    let out = f.capfleet(&["chaos", "report", "latest", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "chaos report --json ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, out.status.success())
}

/// Every invariant of `report` checked and holding (the orphan check included: the
/// run's capfleet is gone), said with the report's details.
pub(crate) fn assert_invariants_hold(report: &Value) {
    let verdicts = report["invariants"].as_array().expect("invariants");
    let names: Vec<&str> = verdicts.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "no_lost_record",
            "no_orphan_process",
            "no_duplicate_route",
            "every_turn_explicit"
        ]
    );
    for v in verdicts {
        assert_eq!(v["holds"], true, "invariant {}: {}", v["name"], v["detail"]);
    }
    assert_eq!(report["holds"], true);
}

/// The run ended `completed`, or failed explicitly naming a meltdown (a session past
/// its restart budget, with the reason in the report).
pub(crate) fn assert_completed_or_meltdown(report: &Value, out: &Output) {
    let outcome = report["outcome"].as_str().unwrap_or("not ended");
    if outcome == "completed" {
        assert!(out.status.success(), "completed, yet exit {:?}", out.status);
        return;
    }
    assert_eq!(outcome, "session_failed", "{report}");
    let failed = report["sessions_failed"].as_array().unwrap();
    assert!(
        !failed.is_empty(),
        "failed without a failed session: {report}"
    );
    for s in failed {
        let reason = s["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("meltdown"), "not a meltdown: {s}");
    }
}

/// The kind of each `chaos` record of the newest run under `f`.
pub(crate) fn journaled_faults(f: &Fixture) -> Vec<String> {
    records(&f.journal())
        .iter()
        .map(|r| r["fault"].as_str().unwrap_or_default().to_owned())
        .collect()
}
