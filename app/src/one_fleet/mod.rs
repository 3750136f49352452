//! What `speak --fleet` and `acp --fleet` share: a whole fleet answering as one agent.
//! Each user message is one run of the fleet, with the message as its task, on the
//! engine `run` and `serve` use (`cmd::run::launch`, `run_fleet_stoppable`), in a run
//! directory under the working directory (`capfleet log` reads it like any run's).
//! The answer is the final text of the `[fleet].answer_from` session (default: the
//! first start session); the usage is the run's aggregate.
//!
//! The runs of one conversation are named after the first one: `<id>`, `<id>.2`,
//! `<id>.3`, …; `<id>` is the conversation's id (`system/init`'s `session_id`, the ACP
//! session id). Each later run resumes every inner session's own conversation natively
//! (the resume ids the run before learned; read back from its journal after a restart).
//!
//! [`watch`]: what a run's events say (the answer, failures, resume ids, worktrees),
//! and which of them the consumer sees; [`cut`]: a run of the conversation cut short
//! by a kill, finished before the next.

mod cut;
mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::run::{
    Resume, RunSpec, RunTelemetry, Stop, WorkspacePhase, run_fleet_stoppable,
};
use capfleet_wire::events::{Published, RunOutcome, SUBSCRIBER_CAPACITY, Signal, UsageTotals};
use tokio::sync::{mpsc, oneshot};

pub use watch::Worktree;

use crate::fleet::{self, RunDir};
use crate::launch::{self, Launch};
use crate::workspaces;

/// A fleet answering as one agent: the runs of one conversation.
pub struct FleetAgent {
    /// The fleet file.
    path: PathBuf,
    /// Where the runs' directories go (the working directory).
    base: PathBuf,
    /// Who answers what the fleet's policy leaves open (none: fail-safe).
    human: Option<mpsc::Sender<HumanQuestion>>,
    /// The trace the runs continue.
    traceparent: Option<String>,
    /// Put before the first run's task (`--append-system-prompt`).
    preface: Option<String>,
    /// The conversation's id: its first run's.
    conversation: Option<String>,
    /// Runs so far.
    runs: u32,
    /// Inner session name -> its agent's own conversation id.
    resume_ids: HashMap<String, String>,
    /// The first run's directory, made before its run (the conversation's id known).
    reserved: Option<RunDir>,
    /// The conversation's last run, cut short by a kill: finished before the next.
    cut: Option<RunDir>,
}

/// How a [`FleetAgent`] is set up.
pub struct FleetSetup {
    pub path: PathBuf,
    pub base: PathBuf,
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub traceparent: Option<String>,
    pub preface: Option<String>,
}

/// A run in progress.
pub struct FleetTurn {
    pub run_id: String,
    pub stopper: Stopper,
    /// The run's end, once every event before it was passed on.
    pub ended: oneshot::Receiver<FleetEnd>,
}

/// How a run ended, as the consumer answers it.
#[derive(Debug)]
pub struct FleetEnd {
    pub run_id: String,
    pub journal: PathBuf,
    /// `None`: the run could not run at all (said in `error`).
    pub outcome: Option<RunOutcome>,
    /// The answering session's final text.
    pub text: String,
    /// The whole fleet's usage in this run.
    pub usage: UsageTotals,
    /// Why the run failed or stopped.
    pub error: Option<String>,
    /// The coding sessions' worktrees, with what they changed.
    pub worktrees: Vec<Worktree>,
    /// Inner session name -> resume id, as learned in the run.
    resume_ids: HashMap<String, String>,
}

impl FleetEnd {
    /// A run that could not start, for `why`.
    pub fn failed(why: String) -> Self {
        FleetEnd {
            run_id: String::new(),
            journal: PathBuf::new(),
            outcome: None,
            text: String::new(),
            usage: UsageTotals::default(),
            error: Some(why),
            worktrees: Vec::new(),
            resume_ids: HashMap::new(),
        }
    }

    /// The run's reference for whoever drives this agent (`_meta."capfleet.run"`).
    pub fn meta(&self) -> serde_json::Value {
        let outcome = self
            .outcome
            .and_then(|o| serde_json::to_value(o).ok())
            .unwrap_or(serde_json::Value::Null);
        serde_json::json!({
            "id": self.run_id,
            "journal": self.journal.display().to_string(),
            "outcome": outcome,
        })
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    #[error("cannot make the run directory: {0}")]
    RunDir(String),
    #[error("cannot provision the workspaces: {0}")]
    Workspaces(String),
    #[error("no conversation to go on with: {0}")]
    Unknown(String),
    #[error("the run cut short cannot go on: {0}")]
    Cut(String),
    #[error("the working directory: {0}")]
    Cwd(std::io::Error),
}

impl FleetAgent {
    pub fn new(setup: FleetSetup) -> Self {
        FleetAgent {
            path: setup.path,
            base: setup.base,
            human: setup.human,
            traceparent: setup.traceparent,
            preface: setup.preface,
            conversation: None,
            runs: 0,
            resume_ids: HashMap::new(),
            reserved: None,
            cut: None,
        }
    }

    /// Name the conversation before its first run (an ACP `session/new`): its first
    /// run's directory is made now.
    pub fn reserve(&mut self) -> Result<&str, FleetError> {
        if self.conversation.is_none() {
            let run = RunDir::create(&self.base).map_err(|e| FleetError::RunDir(e.to_string()))?;
            self.conversation = Some(run.id.clone());
            self.reserved = Some(run);
        }
        Ok(self.conversation.as_deref().unwrap_or_default())
    }

    /// The fleet file loads and validates (every finding said), before anything runs
    /// (its `task` may be left out: the messages are the tasks).
    pub async fn check(path: &Path) -> Result<(), FleetError> {
        let here = std::env::current_dir().map_err(FleetError::Cwd)?;
        load(path, Some("(each message is the task)"), &here)
            .await
            .map(|_| ())
    }

    /// The conversation's id (its first run's), once a run started.
    pub fn conversation(&self) -> Option<&str> {
        self.conversation.as_deref()
    }

    /// Go on with conversation `id` (`--resume`, `session/load`): its runs' inner
    /// conversation ids are read back from their journals.
    pub fn resume(&mut self, id: &str) -> Result<(), FleetError> {
        let runs = self.base.join(fleet::run_dir::RUNS_DIR);
        let mut last =
            RunDir::find(&self.base, id).map_err(|e| FleetError::Unknown(e.to_string()))?;
        let mut n = 1;
        loop {
            let next = format!("{id}.{}", n + 1);
            let path = runs.join(&next);
            if !path.is_dir() {
                break;
            }
            n += 1;
            last = RunDir { id: next, path };
        }
        let journal = last.journal();
        self.resume_ids = watch::resume_ids_in(&journal);
        if !watch::ended(&journal) {
            tracing::warn!(
                "run {} of this conversation was cut short: it is finished before the next",
                last.id
            );
            self.cut = Some(last);
        }
        self.conversation = Some(id.to_owned());
        self.runs = n;
        Ok(())
    }

    /// Start a run with `task`; its events (the answering session's, artifacts,
    /// restarts) go to `events` as they come. The run's span is a child of `parent`
    /// (the W3C `traceparent` the message came with), else of the process's trace.
    pub async fn start(
        &mut self,
        task: &str,
        parent: Option<&str>,
        events: mpsc::Sender<Published>,
    ) -> Result<FleetTurn, FleetError> {
        // A run of the conversation cut short goes first (on the run's task, so a
        // stop reaches it too).
        let cut = match self.cut.take() {
            Some(run) => match cut::prepare(self, run).await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::error!("a run cut short could not be finished: {e}");
                    None
                }
            },
            None => None,
        };
        let task = match self.preface.take() {
            Some(preface) => format!("{preface}\n\n{task}"),
            None => task.to_owned(),
        };
        let mut fleet = load(&self.path, Some(&task), &self.base).await?;
        let run = self.run_dir()?;
        self.runs += 1;
        fleet.bind_run_dir(&run);
        for s in &mut fleet.sessions {
            if let Some(id) = self.resume_ids.get(&s.spec.name) {
                s.spec.launch.config = s.spec.launch.config.clone().with_resume(id.clone());
            }
        }
        let lock = run
            .lock(&self.path)
            .map_err(|e| FleetError::RunDir(e.to_string()))?;
        // A run cut short (this process killed) is finished by `capfleet run --resume`.
        crate::resume::remember(&run, &self.path, Some(task.clone()), false, None)
            .map_err(|e| FleetError::RunDir(e.to_string()))?;
        let workspace = match workspaces::prepare(&mut fleet, &run, false).await {
            Ok(w) => w,
            Err(e) => {
                if let Err(e) = run.record_end(crate::launch::EXIT_SESSION_FAILED) {
                    tracing::error!("{e}");
                }
                return Err(FleetError::Workspaces(e.to_string()));
            }
        };
        let spec = self.spec(&fleet, &run, workspace, None, parent);
        let (stops, stops_rx) = mpsc::channel(4);
        let (ended_tx, ended) = oneshot::channel();
        let answerer = capfleet_wire::events::urn(&fleet.name, &fleet.answer_from);
        let turn = FleetTurn {
            run_id: run.id.clone(),
            stopper: Stopper(stops),
            ended,
        };
        tokio::spawn(async move {
            let mut stops_rx = stops_rx;
            if let Some(cut) = cut
                && let Some(stop) = cut.finish(&mut stops_rx).await
            {
                let _caller_gone = ended_tx.send(cut::stopped_before(&run, &stop));
                return;
            }
            let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
            let watching = watch::forward(rx, answerer, events);
            let (report, seen) =
                tokio::join!(run_fleet_stoppable(spec, vec![tx], stops_rx), watching);
            let end = seen.end(&run, report);
            // The run's journal is complete: its lock goes before its end is told.
            drop(lock);
            let _caller_gone = ended_tx.send(end);
        });
        Ok(turn)
    }

    /// The engine's spec of `fleet` run in `run`: what the fleet's policy leaves open
    /// goes to the human upstream, unless the fleet's own `auto_answer` answers it.
    /// Its trace continues `parent`, else the process's.
    pub(super) fn spec(
        &self,
        fleet: &fleet::Fleet,
        run: &RunDir,
        workspace: WorkspacePhase,
        resume: Option<Resume>,
        parent: Option<&str>,
    ) -> RunSpec {
        let human = (!fleet.auto_answer).then(|| self.human.clone()).flatten();
        launch::run_spec(
            fleet,
            run,
            Launch {
                human,
                telemetry: RunTelemetry {
                    metrics: None,
                    traceparent: parent
                        .map(str::to_owned)
                        .or_else(|| self.traceparent.clone()),
                },
                workspace,
                resume,
            },
        )
    }

    /// What the run learned for the next one.
    pub fn learn(&mut self, end: &FleetEnd) {
        self.resume_ids.extend(end.resume_ids.clone());
    }

    /// The next run's directory: the conversation's first, or `<first>.<n>`.
    fn run_dir(&mut self) -> Result<RunDir, FleetError> {
        let err = FleetError::RunDir;
        if let Some(run) = self.reserved.take() {
            return Ok(run);
        }
        match &self.conversation {
            None => {
                let run = RunDir::create(&self.base).map_err(|e| err(e.to_string()))?;
                self.conversation = Some(run.id.clone());
                Ok(run)
            }
            Some(id) => {
                let id = format!("{id}.{}", self.runs + 1);
                let path = self.base.join(fleet::run_dir::RUNS_DIR).join(&id);
                std::fs::create_dir(&path).map_err(|e| err(format!("{}: {e}", path.display())))?;
                Ok(RunDir { id, path })
            }
        }
    }
}

/// What stops a run from outside.
#[derive(Debug, Clone)]
pub struct Stopper(mpsc::Sender<Stop>);

impl Stopper {
    /// Cancel every inner session's turn: the run stops, answered as interrupted.
    pub fn cancel(&self, why: &str) {
        if self.0.try_send(Stop::Cancel(why.to_owned())).is_err() {
            tracing::debug!("the run has ended or is stopping already");
        }
    }

    /// Resolves once the run has ended (its tree is down, its agents gone).
    pub async fn stopped(&self) {
        self.0.closed().await;
    }

    /// A signal to the run (`SIGTERM`: every inner agent's group killed at once).
    pub fn signal(&self, signal: Signal) {
        if self.0.try_send(Stop::Signal(signal)).is_err() {
            tracing::debug!("the run has ended or is stopping already");
        }
    }
}

/// Load and validate the fleet with `task`, its sessions in `cwd` unless it says
/// otherwise; every finding said, as `run` says them.
async fn load(path: &Path, task: Option<&str>, cwd: &Path) -> Result<fleet::Fleet, FleetError> {
    match fleet::load_in(path, task, Some(cwd)).await {
        Ok(l) => {
            for w in &l.warnings {
                tracing::warn!("{w}");
            }
            let missing: Vec<String> = l
                .fleet
                .specs()
                .filter_map(|s| crate::agents::missing_agent(s, "set the session's `argv`"))
                .collect();
            if missing.is_empty() {
                Ok(l.fleet)
            } else {
                Err(FleetError::Invalid(missing))
            }
        }
        Err(errors) => Err(FleetError::Invalid(
            errors.errors.iter().map(ToString::to_string).collect(),
        )),
    }
}
