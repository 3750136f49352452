//! The chaos report (issue 18, point 3): what a chaos run's faults did, read back from
//! its journal alone — every fault is a `chaos` record, journaled before it is applied,
//! on its target's stream — so the same report comes at the end of the run and from
//! `capfleet chaos report <run>` at any time after.
//!
//! - faults injected by kind; detected (the driver or session noticed); recovered (the
//!   turn it hit completed) — [`faults`] says which records count;
//! - MTTR p50 / p95 / max from the fault to the next `cap.session.ready` and to the
//!   turn's completion, per kind and in all ([`Mttr`]);
//! - turns failed and why; sessions failed; the run's outcome;
//! - events lost: the agents' emitted results against the journal ([`events`]);
//! - budget overshoot caused by retries: what the attempts before a turn's last one
//!   cost, against what the run went over its budgets by;
//! - a verdict per invariant ([`invariants`]).
//!
//! # The JSON shape (`capfleet chaos report --json`), stable
//!
//! ```json
//! {
//!   "schema": "capfleet.chaos.report/1",
//!   "journal": "/path/.capfleet/runs/<id>/journal.jsonl",
//!   "outcome": "completed",            // run_ended's outcome; null if it never ended
//!   "stop_reason": null,               // the `stopping` record's reason (a meltdown)
//!   "faults": {
//!     "total": 12,
//!     "by_kind": { "kill": { "injected": 4, "detected": 4, "recovered": 4,
//!                            "mttr_ready": {"count":4,"p50_ms":31,"p95_ms":40,"max_ms":40},
//!                            "mttr_turn": {"count":4,"p50_ms":…,"p95_ms":…,"max_ms":…} } },
//!     "mttr_ready": {…}, "mttr_turn": {…},   // every kind together
//!     "list": [ { "kind":"kill", "target":"w1", "urn":"cap://f/w1", "turn":3,
//!                 "seed_pos":12, "ts_ms":…, "detail":"SIGKILL to group 4242", "group":4242,
//!                 "detected_by":"restart (signaled 9)",
//!                 "ready_ms":31, "turn_ms":208, "recovered":true } ]
//!   },
//!   "turns": { "started": 40, "completed": 38, "failed": 1, "cancelled": 0,
//!              "cut_by_crash": 1, "retried": 6,
//!              "not_completed": [ {"session":"cap://f/w1","turn":4,"outcome":"failed",
//!                                  "why":"hung past the turn timeout of 500 ms"} ] },
//!   "sessions_failed": [ {"session":"cap://f/w2","reason":"…"} ],
//!   "events": { "measured_sessions": 20, "emitted": 200, "journaled": 199, "lost": 1,
//!               "lost_to_faults": 1, "unexplained": 0, "in_flight": 1,
//!               "in_flight_journaled": 0, "unrecorded": 0,
//!               "in_flight_frames": [ {"session":"w1","pid":4242,"ts_ms":…,
//!                   "journaled":false,
//!                   "cut_by":{"kind":"kill","seed_pos":12,"ts_ms":…}} ] },
//!   "budget": { "retry_spend_usd": 0.02, "overshoot_usd": 0.0,
//!               "overshoot_from_retries_usd": 0.0 },
//!   "invariants": [ {"name":"no_lost_record","holds":true,"detail":"…"},
//!                   {"name":"no_orphan_process","holds":null,"detail":"not checked …"},
//!                   {"name":"no_duplicate_route","holds":true,"detail":"…"},
//!                   {"name":"every_turn_explicit","holds":true,"detail":"…"} ],
//!   "holds": true                      // every checked invariant holds
//! }
//! ```
//!
//! New fields may be added; none is removed or changes meaning within a schema version.

mod display;
pub(crate) mod events;
pub(crate) mod faults;
pub(crate) mod invariants;
mod line;
pub(crate) mod metrics;
mod pass;
mod span;
pub(crate) mod stats;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub(crate) use events::{Events, InFlight};
pub(crate) use faults::Fault;
pub(crate) use invariants::Verdict;
pub use stats::Mttr;

use crate::journal::replay;

/// The report's schema, in its JSON.
pub(crate) const SCHEMA: &str = "capfleet.chaos.report/1";

/// A chaos run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub journal: PathBuf,
    pub outcome: Option<String>,
    pub stop_reason: Option<String>,
    pub faults: Faults,
    pub turns: Turns,
    pub sessions_failed: Vec<SessionFailure>,
    pub events: Events,
    pub budget: Budget,
    pub invariants: Vec<Verdict>,
    pub holds: bool,
    /// The run's session URNs (whose markers the orphan check looks for).
    #[serde(skip)]
    urns: Vec<String>,
}

/// The faults, by kind and each.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Faults {
    pub total: usize,
    pub by_kind: BTreeMap<String, KindSummary>,
    pub mttr_ready: Mttr,
    pub mttr_turn: Mttr,
    pub list: Vec<Fault>,
}

/// One fault kind's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KindSummary {
    pub injected: usize,
    pub detected: usize,
    pub recovered: usize,
    pub mttr_ready: Mttr,
    pub mttr_turn: Mttr,
}

/// The run's turns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Turns {
    pub started: usize,
    pub completed: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// Cut by a crash of capfleet, taken over by a resume.
    pub cut_by_crash: usize,
    /// Turns that took more than one attempt (a restart in them).
    pub retried: usize,
    /// Every turn that did not complete, and why.
    pub not_completed: Vec<TurnFailure>,
}

/// A turn that did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnFailure {
    pub session: String,
    pub turn: u32,
    /// `failed`, `cancelled`, `cut_by_crash`, `session_failed`, `unended`.
    pub outcome: String,
    /// The last error or restart cause in it.
    pub why: Option<String>,
}

/// A session that failed for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionFailure {
    pub session: String,
    pub reason: String,
}

/// What retries cost, against the budgets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Budget {
    /// Usage reported by the attempts before each turn's last one.
    pub retry_spend_usd: f64,
    /// What the run went over its budgets by (`budget_exceeded` records).
    pub overshoot_usd: f64,
    /// The part of the overshoot the retries account for.
    pub overshoot_from_retries_usd: f64,
}

/// Why there is no report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read the journal {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Report {
    /// The report of the run whose journal is `path` (the agents' emitted results
    /// are looked for beside it, under `sim/<session>/`). The orphan check is left
    /// undone: [`Report::check_orphans`] does it on this machine.
    pub fn from_journal(path: &Path) -> Result<Report, ReportError> {
        let mut pass = pass::Pass::default();
        let tail = replay::scan(path, |bytes| {
            match serde_json::from_slice::<line::Line<'_>>(bytes) {
                Ok(l) => {
                    pass.record(l);
                    true
                }
                // A record, of a shape the report does not read (its sequence aside:
                // a record with a field of a type not expected here, a repeated key).
                Err(_) => {
                    let head = serde_json::from_slice::<line::Head>(bytes).ok();
                    let whole = serde_json::from_slice::<serde_json::Value>(bytes).ok();
                    match (head, whole) {
                        (Some(head), Some(v)) => {
                            pass.unread(head, &v);
                            true
                        }
                        _ => false,
                    }
                }
            }
        })
        .map_err(|source| ReportError::Read {
            path: path.to_owned(),
            source,
        })?;
        pass.tracker.finish();
        let run_dir = path.parent().unwrap_or(Path::new("."));
        Ok(Report::from_pass(pass, &tail, run_dir, path))
    }

    fn from_pass(pass: pass::Pass, tail: &replay::Tail, run_dir: &Path, path: &Path) -> Report {
        let sessions = session_urns(&pass);
        let faults = &pass.tracker.faults;
        let events = events::compare(run_dir, &sessions, &pass.usage, faults, &pass.resumed_ts);
        let invariants = vec![
            invariants::no_lost_record(&pass, tail),
            invariants::no_orphan_process(None),
            invariants::no_duplicate_route(&pass),
            invariants::every_turn_explicit(&pass),
        ];
        let not_completed = pass.turn_failures();
        let count = |o: &str| not_completed.iter().filter(|t| t.outcome == o).count();
        let turns = Turns {
            started: pass.turns.len(),
            completed: pass
                .turns
                .values()
                .filter(|b| b.outcome.as_deref() == Some("completed"))
                .count(),
            failed: count("failed") + count("session_failed"),
            cancelled: count("cancelled"),
            cut_by_crash: count("cut_by_crash"),
            retried: pass.turns.values().filter(|b| b.attempts > 1).count(),
            not_completed,
        };
        let retry_spend_usd: f64 = pass
            .turns
            .values()
            .map(|b| b.cost.iter().rev().skip(1).sum::<f64>())
            .sum();
        let budget = Budget {
            retry_spend_usd,
            overshoot_usd: pass.overshoot_usd,
            overshoot_from_retries_usd: pass.overshoot_usd.min(retry_spend_usd),
        };
        let mut report = Report {
            schema: SCHEMA,
            journal: path.to_owned(),
            outcome: pass.outcome.clone(),
            stop_reason: pass.stop_reason.clone(),
            faults: summarise(faults),
            turns,
            sessions_failed: pass.failures.clone(),
            events,
            budget,
            invariants,
            holds: false,
            urns: sessions.into_iter().map(|(_, urn)| urn).collect(),
        };
        report.holds = report.all_hold();
        report
    }

    /// Look for the run's orphans on this machine: live processes marked for one of
    /// its sessions by a capfleet of `ended` (pids whose run is over: the one that
    /// just ended it, the one its lock names) or by one that is gone.
    pub fn check_orphans(&mut self, ended: &[u32]) {
        let found = invariants::orphans(&self.urns, ended);
        if let Some(v) = self
            .invariants
            .iter_mut()
            .find(|v| v.name == "no_orphan_process")
        {
            *v = invariants::no_orphan_process(Some(found));
        }
        self.holds = self.all_hold();
    }

    /// The verdict of invariant `name` (`no_orphan_process`, …).
    pub fn verdict(&self, name: &str) -> Option<&Verdict> {
        self.invariants.iter().find(|v| v.name == name)
    }

    /// Every checked invariant holds.
    fn all_hold(&self) -> bool {
        self.invariants.iter().all(|v| v.holds != Some(false))
    }
}

/// The run's sessions as (name, URN): from its `session` records, on the fleet's
/// URN prefix (that of its router stream).
fn session_urns(pass: &pass::Pass) -> Vec<(String, String)> {
    let prefix = pass
        .seqs
        .keys()
        .find_map(|u| u.strip_suffix(line::ROUTER_SUFFIX))
        .map(|p| format!("{p}/"));
    let mut names = pass.sessions.clone();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| {
            let urn = format!("{}{n}", prefix.as_deref()?);
            Some((n, urn))
        })
        .collect()
}

/// The faults by kind, and their recovery times.
fn summarise(faults: &[Fault]) -> Faults {
    let mut by_kind: BTreeMap<String, Vec<&Fault>> = BTreeMap::new();
    for f in faults {
        by_kind.entry(f.kind.clone()).or_default().push(f);
    }
    let mttr = |fs: &[&Fault], pick: fn(&Fault) -> Option<u64>| {
        Mttr::of(fs.iter().filter_map(|f| pick(f)))
    };
    let all: Vec<&Fault> = faults.iter().collect();
    Faults {
        total: faults.len(),
        by_kind: by_kind
            .into_iter()
            .map(|(k, fs)| {
                let s = KindSummary {
                    injected: fs.len(),
                    detected: fs.iter().filter(|f| f.detected_by.is_some()).count(),
                    recovered: fs.iter().filter(|f| f.recovered).count(),
                    mttr_ready: mttr(&fs, |f| f.ready_ms),
                    mttr_turn: mttr(&fs, |f| f.turn_ms),
                };
                (k, s)
            })
            .collect(),
        mttr_ready: mttr(&all, |f| f.ready_ms),
        mttr_turn: mttr(&all, |f| f.turn_ms),
        list: faults.to_vec(),
    }
}
