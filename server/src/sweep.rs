//! At start, what a dead server's runs left (or a `capfleet run`'s, in the same data
//! dir): a run whose journal never ended, whose lock is free and whose capfleet's pid
//! is gone is ended in its journal as interrupted (`run_ended` with the reason), and
//! the agents it left behind — found by their `CAPFLEET_AGENT` marker, as `capfleet
//! run`'s own sweep does (`capfleet_app::orphans`) — are killed. Both are said
//! on stderr.

use std::path::Path;

use serde_json::json;

use capfleet_app::fleet::run_dir::{Orchestrator, RunDir};
use capfleet_app::launch::EXIT_INTERRUPTED;
use capfleet_app::orphans::{self, alive};
use capfleet_app::runs::{self, RunState};

/// A run left marked running, now ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ended {
    pub run: String,
    pub pid: u32,
}

/// End the dead runs of the runs directory `runs` and kill what they left; what was
/// done.
pub(super) fn sweep(runs: &Path) -> (Vec<Ended>, Vec<orphans::Killed>) {
    let mut ended = Vec::new();
    for run in RunDir::all_in(runs).unwrap_or_default() {
        let Orchestrator::Gone(owner) = run.orchestrator() else {
            continue;
        };
        let row = runs::row(&run);
        if alive(owner.pid) || row.state != RunState::Interrupted || row.outcome.is_some() {
            continue;
        }
        let record = json!({
            "type": "run_ended",
            "run_id": run.id,
            "exit_code": EXIT_INTERRUPTED,
            "outcome": "interrupted",
            "reason": format!("its capfleet (pid {}) died; ended by a server's start", owner.pid),
        });
        match run.append(record) {
            Ok(()) => ended.push(Ended {
                run: run.id.clone(),
                pid: owner.pid,
            }),
            Err(e) => tracing::error!(run = %run.id, "ending a dead run's journal: {e}"),
        }
    }
    (ended, orphans::sweep_in(runs))
}

/// [`sweep`], said on stderr.
pub(super) fn report(runs: &Path) {
    let (ended, killed) = sweep(runs);
    for e in &ended {
        eprintln!(
            "capfleet: run {} was left running by a dead capfleet (pid {}): ended as interrupted",
            e.run, e.pid
        );
    }
    for k in &killed {
        eprintln!(
            "capfleet: killed {} process(es) left running by run {} (its capfleet, pid {}, is dead)",
            k.processes, k.run, k.pid
        );
    }
}
