//! A fleet exposed over A2A (`--expose-fleet FLEET.toml`): each task is a run of the
//! fleet whose task is the message's text, admitted, queued, drained and listed like
//! any run the server takes (`GET /v1/runs`), on the engine `run` and `serve` share
//! (`super::super::driver`, `run_fleet_stoppable`); the message's `traceparent`
//! parents the run's span. The run's sessions' events stream as marked data parts
//! (each with `_meta."capfleet.session"`), what its policy leaves open is the task's
//! `input-required`, and its end is the task's: the answer is the start session's
//! final text (its last turn's), the usage the fleet's.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::protocol::{CapEvent, Channel};
use capfleet_wire::bindings::a2a::TaskState;
use capfleet_wire::events::{EventBody, Published, SUBSCRIBER_CAPACITY};
use serde_json::Value;
use tokio::sync::mpsc;

use super::feed::Feed;
use super::gate::Gate;
use super::rpc::RpcError;
use super::task::{Msg, Part, Subscription, Task, Update};
use super::{ExposeError, Tasks, input, prompt_of, unique_id};
use crate::auth::Caller;
use crate::driver::{self, RunHooks};
use crate::state::{Admission, Pending, RunEntry, RunState, Server};
use capfleet_app::fleet::RunDir;
use capfleet_app::one_session::refuse;

/// The answer's text kept at most.
const MAX_ANSWER: usize = 256 * 1024;

/// An exposed fleet.
pub(super) struct FleetHost {
    pub name: String,
    file: PathBuf,
    /// Its sessions: (name, agent).
    pub sessions: Vec<(String, String)>,
    server: Arc<Server>,
    /// Its tasks, each named by its run's id.
    pub tasks: Tasks,
}

impl FleetHost {
    /// Read and validate the fleet (as `run --dry-run` does); its findings refuse it.
    pub(super) async fn load(
        server: Arc<Server>,
        path: &Path,
    ) -> Result<Arc<FleetHost>, ExposeError> {
        let bad = |reason: String| ExposeError::Fleet {
            path: path.to_owned(),
            reason,
        };
        let file = std::fs::canonicalize(path).map_err(|e| bad(e.to_string()))?;
        let loaded = capfleet_app::fleet::load(&file, None)
            .await
            .map_err(|e| bad(e.to_string()))?;
        let fleet = loaded.fleet;
        Ok(Arc::new(FleetHost {
            tasks: super::Tasks::of(&fleet.name, &server),
            name: fleet.name.clone(),
            file,
            sessions: fleet
                .sessions
                .iter()
                .map(|s| (s.spec.name.clone(), s.agent.clone()))
                .collect(),
            server,
        }))
    }

    /// A message: a run of the fleet with the message as its task.
    pub(super) async fn send(
        &self,
        message: &Value,
        caller: &Caller,
        traceparent: Option<&str>,
    ) -> Result<(Arc<Task>, Subscription), RpcError> {
        if self.server.draining() {
            return Err(RpcError::draining());
        }
        let prompt = prompt_of(message)?;
        let loaded = capfleet_app::fleet::load(&self.file, Some(&prompt))
            .await
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        let fleet = loaded.fleet;
        let (sessions, max) = (fleet.sessions.len(), self.server.limits.max_sessions);
        if sessions > max {
            return Err(RpcError::invalid_params(format!(
                "the fleet has {sessions} sessions; this server runs at most {max} (--max-sessions)"
            )));
        }
        let run = RunDir::create_in(&self.server.runs_dir)
            .map_err(|e| RpcError::internal(format!("cannot make the run directory: {e}")))?;
        let run_lock = run
            .lock(&self.file)
            .map_err(|e| RpcError::internal(e.to_string()))?;
        let starts: HashSet<String> = fleet
            .routing
            .start
            .iter()
            .map(|s| capfleet_wire::events::urn(&fleet.name, s))
            .collect();
        let (entry, stops) = Server::entry(&fleet, &run, &caller.name);
        let context = message
            .get("contextId")
            .and_then(Value::as_str)
            .map_or_else(|| unique_id("ctx"), str::to_owned);
        let task = self.tasks.task(run.id.clone(), context);
        let sub = task.subscribe();
        let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let (human, questions) = mpsc::channel(16);
        let pending = Pending {
            entry: entry.clone(),
            fleet,
            run: run.clone(),
            lock: run_lock,
            stops,
            hooks: RunHooks {
                subscribers: vec![events_tx],
                human: Some(human),
            },
            traceparent: traceparent.map(str::to_owned),
        };
        let started = match self.server.admit(pending) {
            Admission::Now(p) => {
                self.server.metrics.submitted("admitted");
                driver::spawn(self.server.clone(), *p);
                true
            }
            Admission::Queued(position) => {
                self.server.metrics.submitted("queued");
                task.publish(Update::Status {
                    state: TaskState::Submitted,
                    message: Some(Msg {
                        id: format!("{}-queued", task.id),
                        parts: vec![Part::Text(format!("queued: position {position}"))],
                    }),
                });
                false
            }
            Admission::Full { running, queued } => {
                discard(&run);
                return Err(RpcError::busy(format!(
                    "the server is full ({running} runs, {queued} queued); retry later"
                )));
            }
            Admission::Draining => {
                discard(&run);
                return Err(RpcError::draining());
            }
        };
        tracing::info!(run = %run.id, fleet = %self.name, by = %caller.name, "A2A task started a run");
        if started {
            task.publish(Update::Status {
                state: TaskState::Working,
                message: None,
            });
        }
        self.tasks.insert(task.clone());
        tokio::spawn(follow(task.clone(), entry, events, questions, starts));
        Ok((task, sub))
    }

    /// Cancel the task's run (its open questions answered fail-safe first).
    pub(super) fn cancel(&self, task: &Task, caller: &Caller) {
        for q in task.drain_questions() {
            refuse(q, "the A2A client cancelled the task");
        }
        let _said = self
            .server
            .cancel(&task.id, &format!("a2a:{}", caller.name));
    }
}

/// A refused run leaves no directory behind.
fn discard(run: &RunDir) {
    if let Err(e) = std::fs::remove_dir_all(&run.path) {
        tracing::error!(run = %run.id, "removing a refused run's directory: {e}");
    }
}

/// The run's events and questions to its task, then its end.
async fn follow(
    task: Arc<Task>,
    entry: Arc<RunEntry>,
    mut events: mpsc::Receiver<Published>,
    mut questions: mpsc::Receiver<HumanQuestion>,
    starts: HashSet<String>,
) {
    let mut feed = Feed::default();
    let mut answer = String::new();
    let mut asking = true;
    let mut gate = Gate::default();
    let ask = |q: HumanQuestion| {
        let message = input::question(&q, unique_id(&format!("{}-ask", task.id)));
        task.ask(q, message);
    };
    loop {
        let due = gate.due();
        tokio::select! {
            e = events.recv() => {
                let Some(e) = e else { break };
                if task.state() == TaskState::Submitted {
                    task.publish(Update::Status { state: TaskState::Working, message: None });
                }
                let start = starts.contains(&*e.urn);
                match &e.body {
                    EventBody::TurnStarted { .. } if start => answer.clear(),
                    EventBody::Cap { event: CapEvent::TextChunk(t) }
                        if start
                            && t.channel.is_none_or(|c| c == Channel::Assistant)
                            && answer.len() + t.text.len() <= MAX_ANSWER =>
                    {
                        answer.push_str(&t.text);
                    }
                    // Text is the answer's, not the stream's.
                    EventBody::Cap { event: CapEvent::TextChunk(_) } => {}
                    EventBody::Cap { event } => {
                        let session = e.urn.rsplit('/').next().unwrap_or("");
                        if let Some(u) = feed.cap(&task, event, Some(session)) {
                            task.publish(u);
                        }
                        gate.on_event(event).into_iter().for_each(ask);
                    }
                    _ => {}
                }
            }
            q = questions.recv(), if asking => match q {
                Some(q) => gate.on_question(q).into_iter().for_each(ask),
                None => asking = false,
            },
            () = super::agent::sleep_until(due), if due.is_some() => {
                gate.overdue().into_iter().for_each(ask);
            }
        }
    }
    for q in gate.drain().into_iter().chain(task.drain_questions()) {
        refuse(q, "the run ended");
    }
    let mut state = entry.watch();
    let _ended = state.wait_for(|s| s.ended()).await;
    let progress = entry.progress();
    let update = match progress.state {
        RunState::Completed => feed.end(&task, TaskState::Completed, Some(answer)),
        RunState::Interrupted => {
            let by = progress.cancelled_by.unwrap_or_else(|| "a signal".into());
            feed.end(
                &task,
                TaskState::Canceled,
                Some(format!("the run was cancelled by {by}")),
            )
        }
        RunState::Failed | RunState::Queued | RunState::Running => {
            let why = progress
                .error
                .or(progress.outcome)
                .or(feed.last_error.clone())
                .unwrap_or_else(|| "the run failed".into());
            feed.end(
                &task,
                TaskState::Failed,
                Some(format!("the run failed: {why}")),
            )
        }
    };
    task.publish(update);
}
