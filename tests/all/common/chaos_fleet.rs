//! Chaos runs of sim fleets (`chaos_report`, `chaos_soak`): a directory with the soak
//! agent's script (`config/sim/soak.toml`) and a fleet, `capfleet run` on it within a
//! deadline, and its report read back with `capfleet chaos report latest --json` (its
//! `chaos` records: [`super::chaos_run::records`]).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::output_within;
use crate::common::repo::Fixture;

/// A plain directory with `sim/soak.toml` and `fleets/<name>.toml` holding `fleet`.
pub(crate) fn fixture(name: &str, fleet: &str) -> Fixture {
    let f = Fixture::plain();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    f.write(
        "sim/soak.toml",
        &std::fs::read_to_string(config.join("sim/soak.toml")).unwrap(),
    );
    f.write(&format!("fleets/{name}.toml"), fleet);
    f
}

/// The shipped soak fleet (`config/fleets/soak.toml`) with `max_turns` per session.
pub(crate) fn soak_fleet(max_turns: u32) -> String {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let text = std::fs::read_to_string(config.join("fleets/soak.toml")).unwrap();
    assert!(text.contains("max_turns = 480"), "the soak's turns moved");
    text.replace("max_turns = 480", &format!("max_turns = {max_turns}"))
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
    super::chaos_run::records(&f.journal())
        .iter()
        .map(|r| r["fault"].as_str().unwrap_or_default().to_owned())
        .collect()
}
