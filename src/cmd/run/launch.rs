//! What `capfleet run` and `capfleet serve` share to run a validated fleet: the
//! engine's [`RunSpec`] built from the fleet and its run directory, and the exit code
//! a run's report maps to.

use std::collections::HashMap;
use std::sync::Arc;

use capfleet_actors::answerer::HumanQuestion;
use capfleet_actors::budget::BudgetLimits;
use capfleet_actors::events::{RunOutcome, Signal, urn};
use capfleet_actors::journal::JournalSpec;
use capfleet_actors::run::{Resume, RunReport, RunSpec, RunTelemetry, WorkspacePhase};
use tokio::sync::mpsc;

use super::{EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_SESSION_FAILED};
use crate::fleet::{Fleet, OnError, RunDir};

/// What a run gets beside its fleet and directory.
pub(crate) struct Launch {
    /// Who answers what the policy leaves open (none: answered fail-safe).
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub telemetry: RunTelemetry,
    pub workspace: WorkspacePhase,
    pub resume: Option<Resume>,
}

/// The engine's spec of `fleet` run in `run`.
pub(crate) fn run_spec(fleet: &Fleet, run: &RunDir, launch: Launch) -> RunSpec {
    let per_session_usd = fleet
        .budgets
        .per_session
        .iter()
        .map(|(name, usd)| (Arc::from(urn(&fleet.name, name)), *usd))
        .collect::<HashMap<_, _>>();
    RunSpec {
        fleet: fleet.name.clone(),
        sessions: fleet.specs().cloned().collect(),
        routing: fleet.routing.clone(),
        policy: fleet.policy.clone(),
        budget: BudgetLimits {
            total_usd: fleet.budgets.total_usd,
            per_session_usd,
        },
        journal: Some(JournalSpec {
            path: run.journal(),
            max_bytes: fleet.journal_max_bytes,
        }),
        human: launch.human,
        research: fleet.research.clone(),
        abort_on_error: fleet.on_error == OnError::Abort,
        telemetry: launch.telemetry,
        workspace: Some(launch.workspace),
        resume: launch.resume,
        chaos: fleet.chaos.clone(),
    }
}

/// The exit code: by outcome; a run a signal stopped exits 128 + its number (130
/// for `SIGINT`, 143 `SIGTERM`, 129 `SIGHUP`), a cancelled one 130.
pub(crate) fn exit_code(r: &RunReport) -> u8 {
    match r.outcome {
        RunOutcome::Completed => 0,
        RunOutcome::SessionFailed | RunOutcome::DiskFailed => EXIT_SESSION_FAILED,
        RunOutcome::BudgetExceeded => EXIT_BUDGET,
        RunOutcome::Interrupted => r.signal.map_or(EXIT_INTERRUPTED, Signal::exit_code),
    }
}
