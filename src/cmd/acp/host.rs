//! The sessions `capfleet acp` hosts: each ACP session is one capfleet session of the
//! agent under the process's supervision tree, its events forwarded to the client as
//! `session/update`s in order (bounded by the [`Backlog`]), its turns run by
//! `session/prompt`, its record saved after each turn for a later `session/load`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, UntypedMessage};
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{CancelScope, CapEvent, PermissionMode};
use capfleet_engine::root::Spawner;
use capfleet_engine::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY, UsageTotals};
use capfleet_wire::sync::lock;
use ractor::ActorRef;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::store::{Record, Role, Store, StoreError};
use super::updates::{Updates, replayed};
use super::wire::Backlog;
use capfleet_app::agents::{SessionRequest, session_spec};

/// How long a turn's reply waits for its `turn_ended` event to be forwarded.
const CATCH_UP: Duration = Duration::from_secs(2);

/// What every hosted session is started with.
pub(super) struct Launch {
    /// The agent as `--agent` named it (recorded for `session/load`).
    pub agent: String,
    pub manifest: Arc<Manifest>,
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub script: Option<PathBuf>,
}

/// Why a session cannot be opened or prompted (JSON-RPC `invalid_params` or an
/// internal error, with this text).
#[derive(Debug, thiserror::Error)]
pub(super) enum HostError {
    #[error("cwd {0:?} is not an absolute path of an existing directory")]
    BadCwd(PathBuf),
    #[error("no session {0:?} in this process (session/new or session/load it first)")]
    NoSession(String),
    #[error(
        "session {id:?} was an ACP session of agent {recorded:?}; this process serves {serving:?}"
    )]
    OtherAgent {
        id: String,
        recorded: String,
        serving: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the session could not start: {0}")]
    Spawn(String),
    #[error(transparent)]
    Turn(SessionError),
}

impl HostError {
    /// The client's fault (bad params), or ours.
    pub(super) fn is_invalid_params(&self) -> bool {
        matches!(
            self,
            HostError::BadCwd(_)
                | HostError::NoSession(_)
                | HostError::OtherAgent { .. }
                | HostError::Store(StoreError::BadId(_) | StoreError::Unknown { .. })
        )
    }
}

/// One hosted session.
struct Hosted {
    session: ActorRef<SessionMsg>,
    /// Turns whose `turn_ended` the forwarder has sent on.
    forwarded: watch::Receiver<u64>,
    record: Mutex<Record>,
}

/// A turn's end, as `session/prompt` answers it.
pub(super) enum Ended {
    Session {
        result: Result<TurnResult, SessionError>,
        /// The turn's last `cap.error`, for a failed turn's message.
        last_error: Option<String>,
    },
    /// A fleet's run ([`super::fleet`]).
    Fleet(Box<capfleet_app::one_fleet::FleetEnd>),
}

impl Ended {
    pub(super) fn usage(&self) -> Option<&UsageTotals> {
        match self {
            Ended::Session { result, .. } => result.as_ref().ok().map(|r| &r.usage),
            Ended::Fleet(end) => Some(&end.usage),
        }
    }
}

/// The sessions of this process.
pub(super) struct Host {
    spawner: Spawner,
    launch: Launch,
    store: Store,
    backlog: Arc<Backlog>,
    sessions: Mutex<HashMap<String, Arc<Hosted>>>,
    /// Session URN -> ACP session id, for the permissions the tree asks about.
    by_urn: Mutex<HashMap<String, String>>,
    /// Sessions opened (their names in the tree), and ids given.
    opened: AtomicU64,
    ids: AtomicU64,
}

impl Host {
    pub(super) fn new(
        spawner: Spawner,
        launch: Launch,
        store: Store,
        backlog: Arc<Backlog>,
    ) -> Self {
        Host {
            spawner,
            launch,
            store,
            backlog,
            sessions: Mutex::new(HashMap::new()),
            by_urn: Mutex::new(HashMap::new()),
            opened: AtomicU64::new(0),
            ids: AtomicU64::new(0),
        }
    }

    /// The ACP session a capfleet session URN belongs to.
    pub(super) fn session_of(&self, urn: &str) -> Option<String> {
        lock(&self.by_urn).get(urn).cloned()
    }

    /// `session/new`: a fresh session in `cwd`.
    pub(super) async fn open_new(
        &self,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<String, HostError> {
        let n = self.ids.fetch_add(1, Ordering::Relaxed) + 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!("capfleet-acp-{:x}-{nanos:x}-{n}", std::process::id());
        let record = Record::new(id.clone(), self.launch.agent.clone(), cwd.to_path_buf());
        self.open(record, cx).await?;
        Ok(id)
    }

    /// The record of session `id`, refused when it was another agent's.
    pub(super) async fn recorded(&self, id: &str) -> Result<Record, HostError> {
        recorded(&self.store, id, &self.launch.agent).await
    }

    /// `session/load` of a `record` (its cwd the client's): its conversation replayed
    /// to the client first, the inner agent resumed natively where its binding can.
    pub(super) async fn reopen(
        &self,
        record: Record,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), HostError> {
        replay(cx, &self.backlog, &record).await;
        self.open(record, cx).await
    }

    async fn open(&self, record: Record, cx: &ConnectionTo<Client>) -> Result<(), HostError> {
        if !record.cwd.is_absolute() || !record.cwd.is_dir() {
            return Err(HostError::BadCwd(record.cwd));
        }
        let n = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        let mut spec = session_spec(SessionRequest {
            fleet: "acp",
            name: format!("{}-{n}", self.launch.manifest.agent.name),
            manifest: self.launch.manifest.clone(),
            cwd: &record.cwd,
            model: self.launch.model.clone(),
            system_prompt: None,
            permission_mode: self.launch.permission_mode,
            argv: None,
            env: Vec::new(),
            script: self.launch.script.as_deref(),
        });
        if let Some(id) = &record.resume_id {
            spec.launch.config = spec.launch.config.clone().with_resume(id.clone());
        }
        let urn = spec.launch.urn.clone();
        let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let session = self
            .spawner
            .spawn(spec, vec![events_tx])
            .await
            .map_err(|e| HostError::Spawn(e.to_string()))?;
        let (forwarded_tx, forwarded) = watch::channel(0);
        let id = record.session_id.clone();
        tokio::spawn(forward(
            cx.clone(),
            id.clone(),
            events,
            forwarded_tx,
            self.backlog.clone(),
        ));
        lock(&self.by_urn).insert(urn, id.clone());
        let hosted = Arc::new(Hosted {
            session,
            forwarded,
            record: Mutex::new(record),
        });
        lock(&self.sessions).insert(id, hosted);
        Ok(())
    }

    fn hosted(&self, id: &str) -> Result<Arc<Hosted>, HostError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| HostError::NoSession(id.to_owned()))
    }

    /// One turn of session `id`, its updates all sent before this returns.
    pub(super) async fn prompt(&self, id: &str, prompt: String) -> Result<Ended, HostError> {
        let h = self.hosted(id)?;
        let before = *h.forwarded.borrow();
        let asked = h
            .session
            .call(
                |reply| SessionMsg::Ask {
                    prompt: prompt.clone(),
                    traceparent: None,
                    reply,
                },
                None,
            )
            .await;
        let result = match asked {
            Ok(ractor::rpc::CallResult::Success(r)) => r,
            Ok(_) | Err(_) => Err(SessionError::Closed),
        };
        if let Err(e @ (SessionError::Busy | SessionError::Closed)) = result {
            return Err(HostError::Turn(e));
        }
        if result.is_ok() {
            let mut forwarded = h.forwarded.clone();
            let caught_up = forwarded.wait_for(|n| *n > before);
            if tokio::time::timeout(CATCH_UP, caught_up).await.is_err() {
                tracing::warn!(
                    session = id,
                    "the turn's end was not forwarded in {CATCH_UP:?}"
                );
            }
        }
        let last_error = result.as_ref().ok().and_then(|r| {
            r.events.iter().rev().find_map(|e| match e {
                CapEvent::Error(e) => Some(e.message.clone()),
                _ => None,
            })
        });
        let answer = result.as_ref().map(|r| r.text.clone()).unwrap_or_default();
        self.remember(&h, prompt, answer).await;
        Ok(Ended::Session { result, last_error })
    }

    /// The turn in the record (and the inner agent's conversation id, once known),
    /// saved; a failed save is said, and the session goes on.
    async fn remember(&self, h: &Hosted, prompt: String, answer: String) {
        let resume_id = ractor::call!(h.session, SessionMsg::Snapshot)
            .ok()
            .and_then(|s| s.resume_id);
        let record = {
            let mut r = lock(&h.record);
            r.push(Role::User, prompt);
            r.push(Role::Agent, answer);
            if resume_id.is_some() {
                r.resume_id = resume_id;
            }
            r.clone()
        };
        save(&self.store, record).await;
    }

    /// `session/cancel`: the current turn ends `cancelled`.
    pub(super) fn cancel(&self, id: &str) {
        match self.hosted(id) {
            Ok(h) => {
                let _gone = h.session.cast(SessionMsg::Cancel {
                    scope: CancelScope::CurrentTurn,
                    reason: "session/cancel from the client".into(),
                });
            }
            Err(e) => tracing::warn!("session/cancel: {e}"),
        }
    }
}

/// The record of session `id`, refused when it was another agent's than `serving`'s.
pub(super) async fn recorded(store: &Store, id: &str, serving: &str) -> Result<Record, HostError> {
    let store = store.clone();
    let owned = id.to_owned();
    let record = tokio::task::spawn_blocking(move || store.load(&owned))
        .await
        .map_err(|e| HostError::Spawn(e.to_string()))??;
    if record.agent != serving {
        return Err(HostError::OtherAgent {
            id: id.to_owned(),
            recorded: record.agent,
            serving: serving.to_owned(),
        });
    }
    Ok(record)
}

/// Save `record` off the runtime; a failed save is said, and the session goes on.
pub(super) async fn save(store: &Store, record: Record) {
    let store = store.clone();
    match tokio::task::spawn_blocking(move || store.save(&record)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!("session/load will not find this turn: {e}"),
        Err(e) => tracing::error!("saving the session record: {e}"),
    }
}

/// A loaded session's conversation to the client, one `session/update` a message.
pub(super) async fn replay(cx: &ConnectionTo<Client>, backlog: &Backlog, record: &Record) {
    for m in &record.history {
        let update = replayed(m.role, &m.text);
        send_update(cx, backlog, &record.session_id, update).await;
    }
}

/// One `session/update` to the client, once the backlog has room.
pub(super) async fn send_update(
    cx: &ConnectionTo<Client>,
    backlog: &Backlog,
    id: &str,
    update: Value,
) {
    backlog.reserve().await;
    let params = json!({"sessionId": id, "update": update});
    let sent = UntypedMessage::new("session/update", params).and_then(|n| cx.send_notification(n));
    if let Err(e) = sent {
        tracing::debug!("session/update not sent (the client is gone?): {e}");
    }
}

/// The session's events as updates, in order; each turn's end counted once its
/// updates are on their way.
async fn forward(
    cx: ConnectionTo<Client>,
    id: String,
    mut events: mpsc::Receiver<Published>,
    forwarded: watch::Sender<u64>,
    backlog: Arc<Backlog>,
) {
    let mut updates = Updates::default();
    while let Some(event) = events.recv().await {
        updates.on_event(&event);
        while !updates.turn_ended {
            match events.try_recv() {
                Ok(event) => updates.on_event(&event),
                Err(_) => break,
            }
        }
        for update in updates.take() {
            send_update(&cx, &backlog, &id, update).await;
        }
        if std::mem::take(&mut updates.turn_ended) {
            forwarded.send_modify(|n| *n += 1);
        }
    }
}
