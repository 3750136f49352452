//! Events lost: what the agents say they emitted against what the journal holds. A
//! simulator appends a line per turn result it wrote (`--emitted`; a run's sims write
//! to `<run>/sim/<session>/emitted.jsonl`); each result becomes one `cap.usage`
//! record. A result emitted and not journaled is lost — unless a fault on its way
//! explains it: a `garble` or `truncate` of that session's frames (reported as a
//! parse failure), or a `self_kill` of capfleet before it journaled what it read.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::faults::Fault;

/// The file a run's simulator session appends its results to, under the run's directory.
pub const EMITTED: &str = "emitted.jsonl";

/// Turn results emitted by the agents and journaled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Events {
    /// Sessions whose agent counted what it emitted (the others are not compared).
    pub measured_sessions: usize,
    pub emitted: u64,
    /// `cap.usage` records of those sessions.
    pub journaled: u64,
    /// Emitted, not journaled.
    pub lost: u64,
    /// Of those, explained by a fault on the way (`garble`, `truncate`, `self_kill`).
    pub lost_to_faults: u64,
    /// Lost with no fault to explain it: the figure that must be 0.
    pub unexplained: u64,
}

impl std::ops::AddAssign<&Events> for Events {
    /// The figures of several runs together.
    fn add_assign(&mut self, e: &Events) {
        self.measured_sessions += e.measured_sessions;
        self.emitted += e.emitted;
        self.journaled += e.journaled;
        self.lost += e.lost;
        self.lost_to_faults += e.lost_to_faults;
        self.unexplained += e.unexplained;
    }
}

/// Compare what each session of `sessions` (name, URN) emitted, under `run_dir`,
/// with `usage` (its `cap.usage` records by URN).
pub(super) fn compare(
    run_dir: &Path,
    sessions: &[(String, String)],
    usage: &HashMap<String, u64>,
    faults: &[Fault],
) -> Events {
    let crashes = faults.iter().filter(|f| f.kind == "self_kill").count() as u64;
    let mut e = Events::default();
    for (name, urn) in sessions {
        let path = run_dir.join("sim").join(name).join(EMITTED);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let emitted = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
        let journaled = usage.get(urn).copied().unwrap_or(0);
        let lost = emitted.saturating_sub(journaled);
        let cut = faults
            .iter()
            .filter(|f| &f.urn == urn && matches!(f.kind.as_str(), "garble" | "truncate"))
            .count() as u64;
        let explained = lost.min(cut + crashes);
        e.measured_sessions += 1;
        e.emitted += emitted;
        e.journaled += journaled;
        e.lost += lost;
        e.lost_to_faults += explained;
        e.unexplained += lost - explained;
    }
    e
}
