//! What `capfleet run`, `capfleet serve` and `capfleet worker` share to run a
//! validated fleet: the engine's [`RunSpec`] built from the fleet and its run
//! directory, the exit code a run's report maps to, and ([`in_process`]) a run
//! driven to its end on the caller's runtime (serve's and a worker's runs).

use std::collections::HashMap;
use std::sync::Arc;

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::budget::BudgetLimits;
use capfleet_engine::journal::{JournalSpec, ReplicaHook};
use capfleet_engine::run::calls::CallLog;
use capfleet_engine::run::{
    Resume, RunReport, RunSpec, RunTelemetry, Stop, WorkspacePhase, run_fleet_stoppable,
};
use capfleet_wire::events::{Published, RunOutcome, Signal, urn};
use tokio::sync::mpsc;

use crate::fleet::{Fleet, OnError, RunDir};
use crate::workspaces;

/// Exit codes (documented in `--help`).
pub const EXIT_SESSION_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub(crate) const EXIT_BUDGET: u8 = 3;
pub const EXIT_INTERRUPTED: u8 = 130;

/// What a run gets beside its fleet and directory.
pub struct Launch {
    /// Who answers what the policy leaves open (none: answered fail-safe).
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub telemetry: RunTelemetry,
    pub workspace: WorkspacePhase,
    pub resume: Option<Resume>,
}

/// The engine's spec of `fleet` run in `run`.
pub fn run_spec(fleet: &Fleet, run: &RunDir, launch: Launch) -> RunSpec {
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
            replica: None,
        }),
        human: launch.human,
        research: fleet.research.clone(),
        abort_on_error: fleet.on_error == OnError::Abort,
        telemetry: launch.telemetry,
        workspace: Some(launch.workspace),
        resume: launch.resume,
        chaos: fleet.chaos.clone(),
        calls: None,
    }
}

/// The exit code: by outcome; a run a signal stopped exits 128 + its number (130
/// for `SIGINT`, 143 `SIGTERM`, 129 `SIGHUP`), a cancelled one 130.
/// A completed run whose `--commit` could not make a commit it owed exits 1.
pub fn exit_code(r: &RunReport) -> u8 {
    if r.outcome == RunOutcome::Completed && r.workspaces.iter().any(|w| w.commit_failed) {
        return EXIT_SESSION_FAILED;
    }
    code_of(r.outcome, r.signal)
}

/// The exit code of a run that ended with `outcome`, stopped by `signal` if one did
/// (what a journal's `run_ended` says is read back as this).
pub(crate) fn code_of(outcome: RunOutcome, signal: Option<Signal>) -> u8 {
    match outcome {
        RunOutcome::Completed => 0,
        RunOutcome::SessionFailed | RunOutcome::DiskFailed | RunOutcome::TreeFailed => {
            EXIT_SESSION_FAILED
        }
        RunOutcome::BudgetExceeded => EXIT_BUDGET,
        RunOutcome::Interrupted => signal.map_or(EXIT_INTERRUPTED, Signal::exit_code),
    }
}

/// What a run driven in process gets beside its fleet and directory.
pub struct InProcess {
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub telemetry: RunTelemetry,
    /// A run continued from its journal.
    pub resume: Option<Resume>,
    /// The workspaces the run provisioned here before are reused as they are
    /// (a resume on the same host); otherwise they are provisioned.
    pub reuse_workspaces: bool,
    /// Subscribers to every event of the run.
    pub taps: Vec<mpsc::Sender<Published>>,
    pub stops: mpsc::Receiver<Stop>,
    /// A copy of the journal kept elsewhere (a worker's, in NATS), told of each flush.
    pub replica: Option<ReplicaHook>,
    /// Given the log of the tool calls made on the run from outside (MCP clients').
    pub calls: Option<tokio::sync::oneshot::Sender<CallLog>>,
}

/// How a run driven in process ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The engine's outcome; none when the run failed before its router ran.
    pub outcome: Option<RunOutcome>,
    pub code: u8,
    /// The fleet's spend (the budget actor's sum).
    pub spent_usd: Option<f64>,
    /// Why it failed before or outside the engine (a workspace not made).
    pub error: Option<String>,
}

/// Provision the workspaces of `fleet` in `run` (or reuse them), then run it
/// to its end or a stop. A run that fails before its router runs has its journal
/// ended here (`run_ended`, exit code 1), so that every run's journal ends.
pub async fn in_process(fleet: &mut Fleet, run: &RunDir, with: InProcess) -> Ended {
    let prepared = if with.reuse_workspaces {
        workspaces::reuse(fleet, run, false)
    } else {
        workspaces::prepare(fleet, run, false).await
    };
    let workspace = match prepared {
        Ok(w) => w,
        Err(e) => return failed(run, format!("cannot provision the workspaces: {e}")),
    };
    let mut spec = run_spec(
        fleet,
        run,
        Launch {
            human: with.human,
            telemetry: with.telemetry,
            workspace,
            resume: with.resume,
        },
    );
    if let Some(journal) = spec.journal.as_mut() {
        journal.replica = with.replica;
    }
    spec.calls = with.calls;
    match run_fleet_stoppable(spec, with.taps, with.stops).await {
        Ok(r) => Ended {
            outcome: Some(r.outcome),
            code: exit_code(&r),
            spent_usd: Some(r.budget.total.cost_usd),
            error: None,
        },
        Err(e) => failed(run, e.to_string()),
    }
}

/// A run that failed outside the engine: said, and its journal ended.
fn failed(run: &RunDir, reason: String) -> Ended {
    tracing::error!(run = %run.id, "{reason}");
    if let Err(e) = run.record_end(EXIT_SESSION_FAILED) {
        tracing::error!(run = %run.id, "{e}");
    }
    Ended {
        outcome: None,
        code: EXIT_SESSION_FAILED,
        spent_usd: None,
        error: Some(reason),
    }
}
