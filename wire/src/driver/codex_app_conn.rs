//! The JSON-RPC connection of one `codex app-server` process: our requests and their
//! answers, the server's approval requests held until the answerer decides, and the
//! control loop that opens the thread and runs its turns.
//!
//! Three parts run in the wire's output task and end with it: the line pump (the
//! app-server's output, mapped by [`AppMapper`]), the writer (one bounded queue of
//! lines into its stdin: the control loop and the approval answers write through it)
//! and the control loop (`initialize`, `initialized`, `thread/start` or
//! `thread/resume`, then the session's prompts and interrupts). A request answered
//! `-32001 Server overloaded` is retried with backoff ([`OVERLOAD_RETRIES`]), each
//! retry said as a `cap.error` `server_overloaded` (journaled and counted).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::pump::Learned;
use super::{DriverOutput, OutputSink};
use crate::bindings::codex_app::frames::{
    ClientInfo, InitializeParams, OutNotification, OutRequest, OutResponse, RequestId, RpcError,
    SERVER_OVERLOADED, SERVER_OVERLOADED_CODE, TextInput, ThreadParams, ThreadResponse,
    TurnInterruptParams, TurnResponse, TurnStartParams, TurnSteerParams,
};
use crate::bindings::codex_app::{AppMapper, ApprovalKind, Output};
use crate::protocol::{CapEvent, Decision, ErrorKind};
use crate::sync::lock;

/// Lines queued for the app-server's stdin.
const OUT_QUEUE: usize = 64;
/// Retries of a request the server answers `-32001`.
pub(super) const OVERLOAD_RETRIES: u32 = 6;
/// The first retry's wait; doubled each retry.
const OVERLOAD_BACKOFF: Duration = Duration::from_millis(100);

/// What the actor asks of the control loop.
#[derive(Debug)]
pub(super) enum Cmd {
    /// Start a turn (`turn/start`).
    Prompt(String),
    /// Add to the running turn (`turn/steer`); dropped if the turn has ended. The
    /// sender hears `true` once the server took it (dropped: it did not).
    Steer(String, oneshot::Sender<bool>),
    Interrupt,
}

/// Why a request got no result.
#[derive(Debug, thiserror::Error)]
pub(super) enum CallError {
    #[error("the app-server is gone")]
    Gone,
    #[error("{method} refused: {} ({})", .error.message, .error.code)]
    Refused { method: String, error: RpcError },
    #[error("{method} answered unexpectedly: {message}")]
    Shape { method: String, message: String },
}

/// The connection state the actor, the pump and the control loop share.
pub(super) struct Shared {
    pub sink: OutputSink,
    out: mpsc::Sender<Vec<u8>>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, RpcError>>>>,
    approvals: Mutex<Approvals>,
    seq: AtomicU64,
    /// Turn ends seen (the control loop learns from it that no turn runs).
    ends: watch::Sender<u64>,
}

/// The open approvals: by CAP request id, and the CAP id of each server request.
#[derive(Default)]
struct Approvals {
    by_req: HashMap<String, (RequestId, ApprovalKind)>,
    by_rpc: HashMap<RequestId, String>,
}

impl Shared {
    pub(super) fn new(sink: OutputSink) -> (Arc<Self>, mpsc::Receiver<Vec<u8>>) {
        let (out, rx) = mpsc::channel(OUT_QUEUE);
        let shared = Shared {
            sink,
            out,
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            approvals: Mutex::new(Approvals::default()),
            seq: AtomicU64::new(1),
            ends: watch::Sender::new(0),
        };
        (Arc::new(shared), rx)
    }

    async fn write(&self, msg: &impl Serialize) -> bool {
        match serde_json::to_vec(msg) {
            Ok(mut line) => {
                line.push(b'\n');
                self.out.send(line).await.is_ok()
            }
            Err(e) => {
                tracing::warn!("codex app-server message not serialized: {e}");
                false
            }
        }
    }

    /// Send `method` once and wait for its answer.
    async fn call_once(&self, method: &str, params: &impl Serialize) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(RequestId::Num(id), tx);
        let sent = self.write(&OutRequest { id, method, params }).await;
        if !sent {
            lock(&self.pending).remove(&RequestId::Num(id));
            return Err(CallError::Gone);
        }
        match rx.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(error)) => Err(CallError::Refused {
                method: method.to_owned(),
                error,
            }),
            Err(_) => Err(CallError::Gone),
        }
    }

    /// Send `method`, retrying an overloaded server with backoff, and read its result.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<T, CallError> {
        let mut wait = OVERLOAD_BACKOFF;
        let mut attempt = 0;
        let value = loop {
            match self.call_once(method, params).await {
                Err(CallError::Refused { error, .. })
                    if error.code == SERVER_OVERLOADED && attempt < OVERLOAD_RETRIES =>
                {
                    attempt += 1;
                    let mut event = CapEvent::error(
                        ErrorKind::Other(SERVER_OVERLOADED_CODE.into()),
                        format!(
                            "codex app-server overloaded ({}); {method} retried in {wait:?}",
                            error.message
                        ),
                        true,
                    );
                    if let CapEvent::Error(e) = &mut event {
                        e.details = Some(json!({
                            "method": method, "attempt": attempt, "retry_in_ms": wait.as_millis(),
                        }))
                        .into();
                    }
                    self.sink.send_one(DriverOutput::Event(event)).await;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => break other?,
            }
        };
        serde_json::from_value(value).map_err(|e| CallError::Shape {
            method: method.to_owned(),
            message: e.to_string(),
        })
    }

    /// Answer the open approval `req_id` (`None`: withdrawn); false if not open.
    pub(super) async fn answer(&self, req_id: &str, decision: Option<Decision>) -> bool {
        let open = {
            let mut a = lock(&self.approvals);
            let open = a.by_req.remove(req_id);
            if let Some((id, _)) = &open {
                a.by_rpc.remove(id);
            }
            open
        };
        let Some((id, kind)) = open else {
            return false;
        };
        let result = kind.response(decision);
        self.write(&OutResponse {
            id: &id,
            result: Some(result),
            error: None,
        })
        .await
    }

    /// Withdraw every open approval: answered `cancel`, the session told.
    pub(super) async fn withdraw_all(&self) {
        let open: Vec<String> = lock(&self.approvals).by_req.keys().cloned().collect();
        let mut withdrawn = Vec::with_capacity(open.len());
        for req_id in open {
            if self.answer(&req_id, None).await {
                withdrawn.push(DriverOutput::Withdrawn { req_id });
            }
        }
        self.sink.send(withdrawn).await;
    }

    /// One mapped line's outputs into the batch (the pump's side: no waiting).
    pub(super) fn route(
        &self,
        outputs: &mut Vec<Output>,
        batch: &mut Vec<DriverOutput>,
        learned: &mut Learned,
    ) {
        for out in outputs.drain(..) {
            match out {
                Output::Event(e) => batch.push(DriverOutput::Event(e)),
                Output::TurnEnd(end) => {
                    learned.turn_end(end, batch);
                    self.ends.send_modify(|n| *n += 1);
                }
                Output::Response { id, result } => match lock(&self.pending).remove(&id) {
                    Some(tx) => {
                        let _caller_gone = tx.send(result);
                    }
                    None => batch.push(DriverOutput::Event(stray(&id))),
                },
                Output::Approval(a) => {
                    let req_id = format!("codex-app-{}", self.seq.fetch_add(1, Ordering::Relaxed));
                    {
                        let mut open = lock(&self.approvals);
                        open.by_rpc.insert(a.id.clone(), req_id.clone());
                        open.by_req.insert(req_id.clone(), (a.id, a.kind));
                    }
                    let event =
                        CapEvent::permission_request(&req_id, a.tool, Some(a.intent), a.risk);
                    batch.push(DriverOutput::Event(event));
                }
                Output::Refused { id, refusal } => {
                    tracing::info!(%id, "codex app-server request refused: {refusal}");
                    let error = RpcError {
                        code: refusal.code(),
                        message: refusal.to_string(),
                        data: None,
                    };
                    let line = serde_json::to_vec(&OutResponse {
                        id: &id,
                        result: None,
                        error: Some(error),
                    });
                    if let Ok(mut line) = line
                        && {
                            line.push(b'\n');
                            self.out.try_send(line).is_err()
                        }
                    {
                        tracing::warn!(%id, "refusal not sent: the app-server's input is full");
                    }
                }
                Output::Resolved(id) => {
                    let mut open = lock(&self.approvals);
                    if let Some(req_id) = open.by_rpc.remove(&id) {
                        open.by_req.remove(&req_id);
                        batch.push(DriverOutput::Withdrawn { req_id });
                    }
                }
            }
        }
    }
}

/// A `stray_frame` error: an answer to no request of ours.
fn stray(id: &RequestId) -> CapEvent {
    let kind = ErrorKind::Other(crate::bindings::STRAY_FRAME.into());
    CapEvent::error(
        kind,
        format!("codex app-server answered no request of ours (id {id})"),
        false,
    )
}

/// Write the queued lines into the app-server's stdin until the queue closes.
pub(super) async fn writer(mut rx: mpsc::Receiver<Vec<u8>>, mut stdin: impl AsyncWrite + Unpin) {
    while let Some(line) = rx.recv().await {
        if let Err(e) = stdin.write_all(&line).await {
            tracing::debug!("codex app-server input closed: {e}");
            break;
        }
        if rx.is_empty()
            && let Err(e) = stdin.flush().await
        {
            tracing::debug!("codex app-server input flush failed: {e}");
            break;
        }
    }
}

/// What the control loop starts with.
pub(super) struct Control {
    pub shared: Arc<Shared>,
    pub cmds: mpsc::Receiver<Cmd>,
    pub cwd: String,
    pub model: Option<String>,
    pub approval_policy: Option<&'static str>,
    pub sandbox: Option<&'static str>,
    pub resume_id: Option<String>,
    pub version: String,
}

/// Open the thread, then serve the session's commands until they close.
pub(super) async fn control(c: Control) -> Result<(), CallError> {
    let Control {
        shared,
        mut cmds,
        cwd,
        model,
        approval_policy,
        sandbox,
        resume_id,
        version,
    } = c;
    let init = InitializeParams {
        client_info: ClientInfo {
            name: "capfleet".into(),
            title: Some("capfleet".into()),
            version,
        },
        capabilities: None,
    };
    let _info: Value = shared.call("initialize", &init).await?;
    shared
        .write(&OutNotification {
            method: "initialized",
        })
        .await;
    let params = |thread_id: Option<String>| ThreadParams {
        thread_id,
        model: model.clone(),
        cwd: cwd.clone(),
        approval_policy,
        sandbox,
    };
    let resumed = match resume_id {
        Some(id) => match shared
            .call::<ThreadResponse>("thread/resume", &params(Some(id.clone())))
            .await
        {
            Ok(r) => Some(r.thread.id),
            Err(e @ CallError::Gone) => return Err(e),
            Err(e) => {
                tracing::warn!(thread = %id, "thread/resume refused ({e}); a new thread instead");
                None
            }
        },
        None => None,
    };
    let (thread, was_resumed) = match resumed {
        Some(id) => (id, true),
        None => (
            shared
                .call::<ThreadResponse>("thread/start", &params(None))
                .await?
                .thread
                .id,
            false,
        ),
    };
    tracing::info!(%thread, resumed = was_resumed, "codex app-server thread open");
    shared
        .sink
        .send_one(DriverOutput::Ready {
            resume_id: Some(thread.clone()),
            resumed: was_resumed,
            meta: None,
        })
        .await;
    let mut ends = shared.ends.subscribe();
    let mut active: Option<String> = None;
    loop {
        // A turn's end before any command: a command that came right after the end
        // (a steer, an interrupt) must not be taken for one of the ended turn.
        let cmd = tokio::select! {
            biased;
            changed = ends.changed() => {
                if changed.is_err() { break; }
                active = None;
                continue;
            }
            c = cmds.recv() => c,
        };
        match cmd {
            None => break,
            Some(Cmd::Prompt(text)) => {
                let before = *ends.borrow_and_update();
                let p = TurnStartParams {
                    thread_id: thread.clone(),
                    input: vec![TextInput::new(text)],
                };
                match shared.call::<TurnResponse>("turn/start", &p).await {
                    Ok(r) => {
                        // The turn may have ended before its answer was read.
                        let ended = *ends.borrow_and_update() != before;
                        active = (!ended).then_some(r.turn.id);
                    }
                    Err(CallError::Gone) => return Err(CallError::Gone),
                    Err(e) => turn_refused(&shared, &e).await,
                }
            }
            Some(Cmd::Steer(text, taken)) => match &active {
                Some(turn) => {
                    let p = TurnSteerParams {
                        thread_id: thread.clone(),
                        input: vec![TextInput::new(text)],
                        expected_turn_id: turn.clone(),
                    };
                    match shared.call::<Value>("turn/steer", &p).await {
                        Ok(_) => {
                            let _asker_gone = taken.send(true);
                        }
                        Err(e) => tracing::warn!("turn/steer failed: {e}"),
                    }
                }
                None => tracing::info!("steer after the turn's end: dropped"),
            },
            Some(Cmd::Interrupt) => {
                if let Some(turn) = &active {
                    let p = TurnInterruptParams {
                        thread_id: thread.clone(),
                        turn_id: turn.clone(),
                    };
                    if let Err(e) = shared.call::<Value>("turn/interrupt", &p).await {
                        tracing::warn!("turn/interrupt failed: {e}");
                    }
                }
            }
        }
    }
    Ok(())
}

/// A `turn/start` the server refused: the turn fails with its error.
async fn turn_refused(shared: &Shared, e: &CallError) {
    let message = e.to_string();
    let (kind, retryable) = crate::bindings::error_text::classify(&message);
    let event = CapEvent::error(kind, message.clone(), retryable);
    let end = super::TurnEnd {
        stop_reason: crate::protocol::StopReason::Error,
        is_error: true,
        result_text: Some(message),
    };
    shared
        .sink
        .send(vec![DriverOutput::Event(event), DriverOutput::TurnEnd(end)])
        .await;
}

/// The mapper's outputs for one line, routed (the pump's closure).
pub(super) fn on_line(
    shared: &Shared,
    mapper: &mut AppMapper,
    scratch: &mut Vec<Output>,
    line: &[u8],
    batch: &mut Vec<DriverOutput>,
    learned: &mut Learned,
) {
    mapper.on_line(line, scratch);
    shared.route(scratch, batch, learned);
}
