//! Chaos runs (`capfleet run --chaos`) on a fleet of sim sessions in a plain
//! directory: the fleet written, its run's `chaos` records read back.

use serde_json::Value;

use super::EnvMarker;
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
