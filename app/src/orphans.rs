//! The sweep at the start of `capfleet run`: processes left by a run whose capfleet
//! died (what its keeper could not reach, or all of them when it had none) still
//! carry their marker (`process::sweep`), which names that capfleet's pid; a run of
//! this data dir whose lock is free and whose pid is gone owns them. They are killed
//! and reported with the run they belonged to.

use std::collections::HashMap;
use std::path::Path;

use capfleet_wire::process::sweep;

use crate::fleet::run_dir::{Orchestrator, RUNS_DIR, RunDir};

/// One dead run's leftovers that were killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Killed {
    pub run: String,
    pub pid: u32,
    pub processes: usize,
}

/// Kill what the dead runs under `base` left running; what was killed, per run.
pub fn sweep(base: &Path) -> Vec<Killed> {
    sweep_in(&base.join(RUNS_DIR))
}

/// [`sweep`] of the runs directory `runs` itself.
pub fn sweep_in(runs: &Path) -> Vec<Killed> {
    let dead: HashMap<u32, String> = RunDir::all_in(runs)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|run| match run.orchestrator() {
            Orchestrator::Gone(owner) if !alive(owner.pid) => Some((owner.pid, run.id)),
            _ => None,
        })
        .collect();
    if dead.is_empty() {
        return Vec::new();
    }
    sweep::kill_orphans(|pid| dead.contains_key(&pid))
        .into_iter()
        .filter_map(|(pid, processes)| {
            Some(Killed {
                run: dead.get(&pid)?.clone(),
                pid,
                processes,
            })
        })
        .collect()
}

/// Whether a process `pid` exists (a reused pid counts: its owner is left alone).
pub fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
