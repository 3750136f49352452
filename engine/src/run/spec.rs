//! What a run takes and what it gives back: the validated spec (sessions, routing,
//! budget, journal, workspaces, a resume, chaos), what stops it from outside, and the
//! report when it has ended.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::answerer::research::ResearchSpec;
use crate::answerer::{HumanQuestion, Policy};
use crate::budget::{BudgetLimits, BudgetSnapshot};
use crate::death::ChildDeath;
use crate::fault::DiskFault;
use crate::journal::{JournalSpec, JournalTally};
use crate::resume::Recovered;
use crate::router::RoutingSpec;
use crate::session::SessionSpec;
use crate::telemetry::Counters;
use crate::telemetry::metrics::Metrics;
use crate::workspace::collect::SessionReport;
use crate::workspace::{ArtifactStore, Workspace};
use capfleet_wire::events::{RunOutcome, Signal};

/// Everything a run needs, validated.
pub struct RunSpec {
    pub fleet: String,
    pub sessions: Vec<SessionSpec>,
    pub routing: RoutingSpec,
    pub policy: Policy,
    pub budget: BudgetLimits,
    pub journal: Option<JournalSpec>,
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    /// The research answerer (`[answerer]`), if the fleet has one.
    pub research: Option<ResearchSpec>,
    pub abort_on_error: bool,
    pub telemetry: RunTelemetry,
    /// Artifacts and the coding sessions' workspaces (provisioned before the run).
    pub workspace: Option<WorkspacePhase>,
    /// A run resumed from its journal (`capfleet run --resume`): what it goes on from.
    pub resume: Option<Resume>,
    /// A chaos run's faults (`[chaos]`, `--chaos`).
    pub chaos: Option<Arc<crate::chaos::spec::ChaosSpec>>,
    /// Given the log of the calls made on the run from outside (an MCP client's),
    /// once the run's journal is up ([`super::calls`]).
    pub calls: Option<tokio::sync::oneshot::Sender<super::calls::CallLog>>,
}

/// What a resumed run goes on from: its journal read back, and the change of its
/// fleet accepted with `--force` (journaled in the `resumed` record).
pub struct Resume {
    pub recovered: Recovered,
    pub fleet_changed: Option<String>,
}

/// What a run does with artifacts and workspaces.
pub struct WorkspacePhase {
    pub run_id: String,
    pub store: Arc<ArtifactStore>,
    pub workspaces: Vec<Workspace>,
    /// Commit each worktree's work on its branch at the end (`--commit`).
    pub commit: bool,
    /// How long a session's test command may run.
    pub test_timeout: Duration,
}

/// What a run reports to besides its watchers.
#[derive(Debug, Clone, Default)]
pub struct RunTelemetry {
    /// The run's metrics (served by the application), fed by a tap.
    pub metrics: Option<Metrics>,
    /// A W3C `traceparent` the run's root span continues (the caller's trace).
    pub traceparent: Option<String>,
}

/// How the run went.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub outcome: RunOutcome,
    pub budget: BudgetSnapshot,
    pub counters: Counters,
    /// What the journal kept (and cut, and lost).
    pub journal: JournalTally,
    /// Writes of the run's record that failed (the run failed with the first).
    pub faults: Vec<DiskFault>,
    /// Children of the tree that died (a fatal one failed the run).
    pub deaths: Vec<ChildDeath>,
    /// Each workspace after the run (diff, vetting, commit, tests).
    pub workspaces: Vec<SessionReport>,
    /// The stored final master plan.
    pub plan_doc: Option<PathBuf>,
    /// The signal that stopped the run, if one did (the first one).
    pub signal: Option<Signal>,
    /// The races the router decided (winner, the candidates it cancelled).
    pub races: Vec<crate::router::RaceWon>,
    /// The confined sessions' sandboxes, as journaled.
    pub sandboxes: super::Sandboxes,
}

/// What stops a run from outside: a signal the application received, or a cancel of
/// this run alone (a server's client, a server's shutdown) with the reason journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    Signal(Signal),
    /// Stop cooperatively, as `SIGINT` does, but touch no other run's agents: the
    /// process-wide urgency ([`capfleet_wire::process::halt`]) is left as it is.
    Cancel(String),
}

impl From<Signal> for Stop {
    fn from(signal: Signal) -> Self {
        Stop::Signal(signal)
    }
}
