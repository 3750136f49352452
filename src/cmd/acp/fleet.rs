//! The sessions `capfleet acp --fleet` hosts: each ACP session is one conversation
//! with the fleet ([`capfleet_app::one_fleet`], shared with `speak --fleet`), its id
//! the conversation's first run id; each `session/prompt` one run of the fleet in
//! the client's cwd, its answering session's events sent as `session/update`s while
//! it runs, the coding sessions' final diff offered as ACP `diff` content (one
//! completed `edit` tool call per worktree), the permissions its policy leaves open
//! asked of the client. After each run the session's record (the conversation's
//! text) is saved for a later `session/load`, which goes on with the same runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::session::SessionError;
use capfleet_wire::events::{SUBSCRIBER_CAPACITY, Signal};
use capfleet_wire::sync::lock;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::host::{Ended, HostError, recorded, replay, save, send_update};
use super::store::{Record, Role, Store};
use super::updates::Updates;
use super::wire::Backlog;
use capfleet_app::one_fleet::{FleetAgent, FleetEnd, FleetSetup, Stopper, Worktree};

/// How long the runs stopped by a signal may take to end their agents.
const RUN_STOP: Duration = Duration::from_secs(10);

/// One hosted conversation.
struct Hosted {
    /// Taken out for the length of a turn (none: a turn runs).
    agent: Mutex<Option<FleetAgent>>,
    /// The running turn's stopper.
    running: Mutex<Option<Stopper>>,
    record: Mutex<Record>,
    /// The client's connection (one a process: ACP runs on stdio).
    cx: ConnectionTo<Client>,
}

/// The fleet conversations of this process.
pub(super) struct FleetHost {
    /// The fleet file (absolute).
    path: PathBuf,
    /// How the records name the fleet (`fleet:<path>`).
    agent: String,
    traceparent: Option<String>,
    store: Store,
    backlog: Arc<Backlog>,
    sessions: Mutex<HashMap<String, Arc<Hosted>>>,
}

impl FleetHost {
    pub(super) fn new(
        path: PathBuf,
        traceparent: Option<String>,
        store: Store,
        backlog: Arc<Backlog>,
    ) -> Self {
        FleetHost {
            agent: format!("fleet:{}", path.display()),
            path,
            traceparent,
            store,
            backlog,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// A conversation in `cwd` whose open permissions go to the client as asked in
    /// session `id` (known once the agent is made).
    fn agent(
        &self,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<(FleetAgent, mpsc::Sender<String>), HostError> {
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(HostError::BadCwd(cwd.to_path_buf()));
        }
        let (human, questions) = mpsc::channel(16);
        let (id_tx, id_rx) = mpsc::channel(1);
        tokio::spawn(ask_client(cx.clone(), id_rx, questions));
        let agent = FleetAgent::new(FleetSetup {
            path: self.path.clone(),
            base: cwd.to_path_buf(),
            human: Some(human),
            traceparent: self.traceparent.clone(),
            preface: None,
        });
        Ok((agent, id_tx))
    }

    /// `session/new`: a conversation whose id is its first run's.
    pub(super) async fn open_new(
        &self,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<String, HostError> {
        let (mut agent, id_tx) = self.agent(cwd, cx)?;
        let id = agent
            .reserve()
            .map_err(|e| HostError::Spawn(e.to_string()))?
            .to_owned();
        let _asker_gone = id_tx.send(id.clone()).await;
        let record = Record::new(id.clone(), self.agent.clone(), cwd.to_path_buf());
        self.host(agent, record, cx);
        Ok(id)
    }

    /// The record of conversation `id`, refused when it was not this fleet's.
    pub(super) async fn recorded(&self, id: &str) -> Result<Record, HostError> {
        recorded(&self.store, id, &self.agent).await
    }

    /// `session/load` of a `record` (its cwd the client's): the conversation replayed
    /// to the client, then gone on with.
    pub(super) async fn reopen(
        &self,
        record: Record,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), HostError> {
        let (mut agent, id_tx) = self.agent(&record.cwd, cx)?;
        let id = record.session_id.clone();
        agent
            .resume(&id)
            .map_err(|e| HostError::Spawn(e.to_string()))?;
        let _asker_gone = id_tx.send(id).await;
        replay(cx, &self.backlog, &record).await;
        self.host(agent, record, cx);
        Ok(())
    }

    fn host(&self, agent: FleetAgent, record: Record, cx: &ConnectionTo<Client>) {
        let id = record.session_id.clone();
        let hosted = Arc::new(Hosted {
            agent: Mutex::new(Some(agent)),
            running: Mutex::new(None),
            record: Mutex::new(record),
            cx: cx.clone(),
        });
        lock(&self.sessions).insert(id, hosted);
    }

    /// One run of the fleet with `prompt`, its updates all sent before this returns.
    pub(super) async fn prompt(&self, id: &str, prompt: String) -> Result<Ended, HostError> {
        let h = lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| HostError::NoSession(id.to_owned()))?;
        let Some(mut agent) = lock(&h.agent).take() else {
            return Err(HostError::Turn(SessionError::Busy));
        };
        let (tx, mut events) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let end = match agent.start(&prompt, None, tx).await {
            Err(e) => FleetEnd::failed(e.to_string()),
            Ok(mut turn) => {
                *lock(&h.running) = Some(turn.stopper.clone());
                let mut updates = Updates::default();
                let mut ended = None;
                // The run's events until it drops its sender, which it does once it
                // has ended (every event passed on first).
                loop {
                    tokio::select! {
                        event = events.recv() => match event {
                            Some(event) => {
                                updates.on_event(&event);
                                for update in updates.take() {
                                    send_update(&h.cx, &self.backlog, id, update).await;
                                }
                            }
                            None => break,
                        },
                        end = &mut turn.ended, if ended.is_none() => ended = Some(end),
                    }
                }
                lock(&h.running).take();
                let end = match ended {
                    Some(end) => end,
                    None => (&mut turn.ended).await,
                };
                end.unwrap_or_else(|_| {
                    FleetEnd::failed("the run's task ended without a report".into())
                })
            }
        };
        agent.learn(&end);
        for update in diff_updates(&end.run_id, &end.worktrees) {
            send_update(&h.cx, &self.backlog, id, update).await;
        }
        *lock(&h.agent) = Some(agent);
        self.remember(&h, prompt, end.text.clone()).await;
        Ok(Ended::Fleet(Box::new(end)))
    }

    /// The turn in the record, saved; a failed save is said, and the session goes on.
    async fn remember(&self, h: &Hosted, prompt: String, answer: String) {
        let record = {
            let mut r = lock(&h.record);
            r.push(Role::User, prompt);
            r.push(Role::Agent, answer);
            r.clone()
        };
        save(&self.store, record).await;
    }

    /// `session/cancel`: every inner session's turn is cancelled; the prompt ends
    /// `cancelled`.
    pub(super) fn cancel(&self, id: &str) {
        let stopper = lock(&self.sessions)
            .get(id)
            .and_then(|h| lock(&h.running).clone());
        match stopper {
            Some(s) => s.cancel("session/cancel from the client"),
            None => tracing::warn!("session/cancel: no turn of session {id:?} runs"),
        }
    }
}

impl FleetHost {
    /// A signal: every running run is stopped by it, and waited for (at most
    /// [`RUN_STOP`]), so no inner agent outlives the process.
    pub(super) async fn stop_all(&self, signal: Signal) {
        let running: Vec<Stopper> = lock(&self.sessions)
            .values()
            .filter_map(|h| lock(&h.running).clone())
            .collect();
        for s in &running {
            s.signal(signal);
        }
        let all = futures::future::join_all(running.iter().map(Stopper::stopped));
        if tokio::time::timeout(RUN_STOP, all).await.is_err() {
            tracing::error!("a run did not end in {RUN_STOP:?}");
        }
    }
}

/// Put the conversation's open permissions to the client, as asked in the session
/// whose id comes first on `id`.
async fn ask_client(
    cx: ConnectionTo<Client>,
    mut id: mpsc::Receiver<String>,
    mut questions: mpsc::Receiver<HumanQuestion>,
) {
    let Some(id) = id.recv().await else { return };
    while let Some(q) = questions.recv().await {
        super::server::put_to_client(&cx, &id, q);
    }
}

/// The run's final diff: per worktree that changed, one completed `edit` tool call
/// whose content is one ACP `diff` per changed text file (old and new text whole).
fn diff_updates(run_id: &str, worktrees: &[Worktree]) -> Vec<Value> {
    let mut out = Vec::new();
    for w in worktrees.iter().filter(|w| w.files > 0) {
        let Some(base) = &w.base else { continue };
        let files = match capfleet_engine::workspace::diff::file_versions(&w.path, base) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(session = %w.session, "the worktree's diff could not be read: {e}");
                continue;
            }
        };
        let content: Vec<Value> = files
            .iter()
            .map(|f| {
                json!({
                    "type": "diff",
                    "path": w.path.join(&f.path).display().to_string(),
                    "oldText": f.old,
                    "newText": f.new.clone().unwrap_or_default(),
                })
            })
            .collect();
        let locations: Vec<Value> = files
            .iter()
            .map(|f| json!({"path": w.path.join(&f.path).display().to_string()}))
            .collect();
        out.push(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": format!("{run_id}/diff/{}", w.session),
            "title": format!("Changes by {} (worktree {})", w.session, w.path.display()),
            "kind": "edit",
            "status": "completed",
            "content": content,
            "locations": locations,
            "rawOutput": {"diff": w.diff.as_ref().map(|d| d.display().to_string())},
        }));
    }
    out
}
