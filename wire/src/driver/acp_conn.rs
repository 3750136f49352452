//! The ACP connection of one driver generation, on the `agent-client-protocol` crate:
//! `initialize` (advertising the fs/terminal capabilities the manifest lets us
//! serve), `session/new`, or for a resume `session/resume` where the agent
//! advertises it (no replay) else `session/load`, then prompts as turns (each with
//! one `cap.usage` from its usage reports, [`crate::bindings::acp::usage`]), and
//! `session/close` when the session ends deliberately (if the agent offers it).
//! Agent -> client
//! traffic: `session/update` (mapped, in order, credit-bounded), permission
//! requests, and the reverse RPC served by [`crate::rpc`].
//!
//! Request cancellation (`$/cancel_request`) both ways: an agent that cancels its
//! request has it withdrawn (a permission answered `cancelled`, an elicitation
//! `cancel`, a reverse RPC call stopped and answered -32800); capfleet cancels its
//! own `session/close` left unanswered past [`CLOSE_WAIT`] (and the SDK its
//! `session/prompt` when the session ends mid-turn).
//!
//! The agent's output is read through [`super::acp_lines`] (bounded lines, and at
//! most two windows of them queued in the SDK: its markers come back through the
//! notification handler).
//! Handlers run in the SDK's dispatch loop; anything that waits on a human or a
//! process (permissions, terminal waits) is spawned off it so updates keep flowing,
//! at most [`MAX_IN_FLIGHT`] at once (the loop waits for a slot past that).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, CloseSessionRequest, ContentBlock,
    ElicitationCapabilities, ElicitationFormCapabilities, Error as V1Error, FileSystemCapabilities,
    InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    ResumeSessionRequest, SelectedPermissionOutcome, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines, RequestCancellation, UntypedMessage};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, mpsc};

use super::acp_elicit::{self, elicit};
use super::acp_host::SessionHost;
use super::acp_perms::Perms;
use super::{DriverOutput, TurnEnd};
use crate::bindings::acp::{AcpMapper, option_for, risk_of, stop_reason};
use crate::protocol::{CapEvent, ErrorKind, StopReason};
use crate::rpc::{Rpc, RpcError};
use crate::sync::lock;

/// Agent -> client requests (permissions, fs, terminals) served at once; more wait.
pub(super) const MAX_IN_FLIGHT: usize = 32;
/// Longest wait for the answer to `session/close`.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What the actor asks of the connection task.
#[derive(Debug)]
pub(super) enum Cmd {
    Prompt(String),
    Cancel,
}

/// Everything the connection needs.
pub(super) struct Conn {
    pub perms: Arc<Perms>,
    pub host: Arc<SessionHost>,
    pub rpc: Option<Arc<Rpc>>,
    pub cwd: PathBuf,
    pub resume_id: Option<String>,
    /// The longest line read from the agent ([`super::acp_lines`]).
    pub max_line: usize,
}

fn acp_error(e: &RpcError) -> agent_client_protocol::Error {
    match e {
        // ACP's own "Resource not found" (-32002): agents read it as ENOENT (Gemini CLI
        // checks the message before `write_file` creates a file).
        RpcError::PathNotFound => {
            let missing: agent_client_protocol::Error = V1Error::resource_not_found(None).into();
            missing.data(e.data())
        }
        _ => agent_client_protocol::Error::new(e.code(), e.to_string()).data(e.data()),
    }
}

/// Run the connection until the agent's output closes or the actor drops `cmds`.
pub(super) async fn run(
    conn: Conn,
    stdin: impl AsyncWrite + Unpin + Send + 'static,
    stdout: impl AsyncRead + Unpin + Send + 'static,
    cmds: mpsc::Receiver<Cmd>,
) -> Result<(), agent_client_protocol::Error> {
    let mapper = Arc::new(Mutex::new(AcpMapper::new()));
    let (perms, host, rpc) = (conn.perms.clone(), conn.host.clone(), conn.rpc.clone());
    let m2 = mapper.clone();
    let sink = perms.sink().clone();
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let (drained, lines) =
        super::acp_lines::incoming(stdout, conn.max_line, conn.perms.sink().clone());
    // A `session/load` replays the conversation as updates: they are the past, not
    // this turn's output (its text is in the journal already).
    let loading = Arc::new(AtomicBool::new(false));
    let replaying = loading.clone();
    Client
        .v1()
        .name("capfleet")
        .on_receive_notification(
            async move |n: UntypedMessage, _cx| {
                if drained.is_marker(&n.method, &n.params) {
                    return Ok(());
                }
                if n.method != "session/update" {
                    tracing::debug!(method = %n.method, "ignored ACP notification");
                    return Ok(());
                }
                if replaying.load(Ordering::Acquire) {
                    tracing::trace!("an update replayed by session/load, left out");
                    return Ok(());
                }
                let events = m2
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .on_update(&n.params);
                sink.send(events.into_iter().map(DriverOutput::Event).collect())
                    .await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: UntypedMessage,
                        responder: Responder<Value>,
                        cx: ConnectionTo<Agent>| {
                let (perms, host, rpc) = (perms.clone(), host.clone(), rpc.clone());
                // Set when the agent sends `$/cancel_request` for this request.
                let cancel = responder.cancellation();
                // Past the cap, the dispatch loop waits here: the agent's further
                // output stays in its pipe until a request in flight ends.
                let Ok(slot) = in_flight.clone().acquire_owned().await else {
                    return responder
                        .respond_with_error(agent_client_protocol::Error::internal_error());
                };
                cx.spawn(async move {
                    let _slot = slot;
                    if req.method == "session/request_permission" {
                        permission(&perms, req.params, responder, &cancel).await
                    } else if req.method == acp_elicit::METHOD {
                        elicit(&host, req.params, responder, &cancel).await
                    } else {
                        let call = reverse_rpc(rpc.as_deref(), &req.method, req.params);
                        match cancel.run_until_cancelled(call).await {
                            Ok(v) => responder.respond(v),
                            Err(e) => {
                                if cancel.is_cancelled() {
                                    tracing::info!(method = %req.method, "call cancelled by the agent");
                                }
                                responder.respond_with_error(e)
                            }
                        }
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(
            Lines::new(super::acp_lines::outgoing(stdin), lines),
            async move |cx: ConnectionTo<Agent>| main_loop(cx, conn, mapper, cmds, &loading).await,
        )
        .await
}

/// Initialize, open the session, then serve prompts until told to stop.
async fn main_loop(
    cx: ConnectionTo<Agent>,
    conn: Conn,
    mapper: Arc<Mutex<AcpMapper>>,
    mut cmds: mpsc::Receiver<Cmd>,
    loading: &AtomicBool,
) -> Result<(), agent_client_protocol::Error> {
    let caps = conn.rpc.as_ref().map(|r| r.caps().clone());
    let fs = FileSystemCapabilities::new()
        .read_text_file(caps.as_ref().is_some_and(|c| c.fs.read))
        .write_text_file(caps.as_ref().is_some_and(|c| c.fs.write));
    let client_caps = ClientCapabilities::new()
        .elicitation(ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()))
        .fs(fs)
        .terminal(caps.as_ref().is_some_and(|c| c.terminal.enabled));
    let init = cx
        .send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(client_caps))
        .block_task()
        .await?;
    let can_load = init.agent_capabilities.load_session;
    let sessions = &init.agent_capabilities.session_capabilities;
    let (can_resume, can_close) = (sessions.resume.is_some(), sessions.close.is_some());
    let sink = conn.perms.sink().clone();
    let loaded = match conn.resume_id.clone() {
        Some(id) if can_resume => resume(&cx, &conn, id).await,
        Some(id) if can_load => load(&cx, &conn, id, loading).await,
        _ => None,
    };
    let (sid, resumed) = match loaded {
        Some(id) => (id, true),
        None => {
            let r = cx
                .send_request(NewSessionRequest::new(conn.cwd.clone()))
                .block_task()
                .await?;
            (r.session_id.to_string(), false)
        }
    };
    tracing::info!(session = %sid, resumed, can_resume, can_load, "ACP session open");
    sink.send_one(DriverOutput::Ready {
        resume_id: Some(sid.clone()),
        resumed,
        meta: None,
    })
    .await;
    loop {
        let cmd = tokio::select! {
            c = cmds.recv() => c,
            () = cx.incoming_closed() => None,
        };
        match cmd {
            None => break,
            Some(Cmd::Cancel) => {}
            Some(Cmd::Prompt(text)) => {
                lock(&mapper).next_turn();
                if !turn(&cx, &conn, &mapper, &sid, text, &mut cmds).await {
                    break;
                }
            }
        }
    }
    close(&cx, &conn, &sid, can_close).await;
    Ok(())
}

/// `session/load` of `id` (the updates replayed meanwhile left out): `None` when the
/// agent refuses it (a session it no longer has), and a new session is opened instead
/// (the cut turn is then re-issued with its partial text).
async fn load(
    cx: &ConnectionTo<Agent>,
    conn: &Conn,
    id: String,
    loading: &AtomicBool,
) -> Option<String> {
    loading.store(true, Ordering::Release);
    let loaded = cx
        .send_request(LoadSessionRequest::new(id.clone(), conn.cwd.clone()))
        .block_task()
        .await;
    loading.store(false, Ordering::Release);
    match loaded {
        Ok(_) => Some(id),
        Err(e) => {
            tracing::warn!(session = %id, "session/load refused ({e}); a new session instead");
            None
        }
    }
}

/// `session/resume` of `id` (the agent advertises it: nothing is replayed): `None`
/// when the agent refuses it, and a new session is opened instead, as for a load.
async fn resume(cx: &ConnectionTo<Agent>, conn: &Conn, id: String) -> Option<String> {
    let resumed = cx
        .send_request(ResumeSessionRequest::new(id.clone(), conn.cwd.clone()))
        .block_task()
        .await;
    match resumed {
        Ok(_) => Some(id),
        Err(e) => {
            tracing::warn!(session = %id, "session/resume refused ({e}); a new session instead");
            None
        }
    }
}

/// The session is ending deliberately. An agent that offers `session/close` is told
/// (it cancels any work and frees the session: claude-agent-acp 0.23.1 ignores end
/// of input, but exits at once after a close); whatever still waits on a human is
/// cancelled, as for `session/cancel`. Bounded: the driver kills what is left.
async fn close(cx: &ConnectionTo<Agent>, conn: &Conn, sid: &str, can_close: bool) {
    if cx.is_incoming_closed() {
        return; // the agent is gone
    }
    let sent = can_close.then(|| cx.send_request(CloseSessionRequest::new(sid.to_owned())));
    conn.perms.cancel_all().await;
    conn.host.cancel_all().await;
    let Some(sent) = sent else { return };
    let handle = sent.cancellation_handle();
    match tokio::time::timeout(CLOSE_WAIT, sent.block_task()).await {
        Ok(Ok(_)) => tracing::debug!(session = %sid, "ACP session closed"),
        Ok(Err(e)) => tracing::warn!(session = %sid, "session/close failed: {e}"),
        Err(_) => {
            // Told, not just dropped: the agent may stop closing what is gone.
            let told = handle.cancel().is_ok();
            tracing::warn!(session = %sid, cancel_request = told, "session/close unanswered after {CLOSE_WAIT:?}, cancelled");
        }
    }
}

/// One prompt turn, ended by the `session/prompt` response. False: stop serving.
async fn turn(
    cx: &ConnectionTo<Agent>,
    conn: &Conn,
    mapper: &Mutex<AcpMapper>,
    sid: &str,
    text: String,
    cmds: &mut mpsc::Receiver<Cmd>,
) -> bool {
    let (perms, host) = (&conn.perms, &conn.host);
    let req = PromptRequest::new(
        sid.to_owned(),
        vec![ContentBlock::Text(TextContent::new(text))],
    );
    let reply = cx.send_request(req).block_task();
    tokio::pin!(reply);
    let result = loop {
        tokio::select! {
            r = &mut reply => break r,
            c = cmds.recv() => match c {
                None => return false,
                Some(Cmd::Cancel) => {
                    // The cancel goes out first: the agent then sees its pending
                    // permissions answered `cancelled` as part of that cancel.
                    if let Err(e) = cx.send_notification(CancelNotification::new(sid.to_owned())) {
                        tracing::warn!("session/cancel not sent: {e}");
                    }
                    perms.cancel_all().await;
                    host.cancel_all().await;
                }
                Some(Cmd::Prompt(_)) => tracing::warn!("prompt during a turn dropped"),
            },
        }
    };
    let sink = perms.sink();
    let end = match result {
        Ok(r) => {
            let end = TurnEnd::new(stop_reason(&r.stop_reason), false);
            let usage = lock(mapper).end_turn(r.usage.as_ref(), end.stop_reason);
            if let Some(u) = usage {
                sink.send_one(DriverOutput::Event(u)).await;
            }
            end
        }
        Err(e) => {
            // The agent died or refused the prompt: nothing stays open.
            perms.cancel_all().await;
            if cx.is_incoming_closed() {
                return false;
            }
            // A rate limit (Gemini's 429 / RESOURCE_EXHAUSTED) pauses the session.
            let message = e.to_string();
            let code = match crate::bindings::error_text::classify(&message) {
                (ErrorKind::RateLimit, _) => ErrorKind::RateLimit,
                _ => ErrorKind::Other("acp_prompt_failed".into()),
            };
            let ev = CapEvent::error(code, message, true);
            let usage = lock(mapper).end_turn(None, StopReason::Error);
            sink.send(
                usage
                    .into_iter()
                    .chain([ev])
                    .map(DriverOutput::Event)
                    .collect(),
            )
            .await;
            TurnEnd {
                stop_reason: StopReason::Error,
                is_error: true,
                result_text: Some(e.to_string()),
            }
        }
    };
    sink.send_one(DriverOutput::TurnEnd(end)).await
}

/// `session/request_permission` -> `cap.permission.request`, answered back onto the
/// offered options; cancelled when the turn is, or when the agent cancels it.
async fn permission(
    perms: &Perms,
    params: Value,
    responder: Responder<Value>,
    cancel: &RequestCancellation,
) -> Result<(), agent_client_protocol::Error> {
    let req: RequestPermissionRequest = match serde_json::from_value(params) {
        Ok(r) => r,
        Err(e) => {
            return responder.respond_with_error(
                agent_client_protocol::Error::invalid_params().data(json!(e.to_string())),
            );
        }
    };
    let f = &req.tool_call.fields;
    let tool = f
        .name
        .clone()
        .or_else(|| f.title.clone())
        .unwrap_or_else(|| "tool".to_owned());
    let decision = if perms.always_allowed(&tool) {
        Some(crate::protocol::Decision::AllowAlways)
    } else {
        let intent = json!({
            "title": f.title, "kind": f.kind, "input": f.raw_input,
            "tool_call_id": req.tool_call.tool_call_id.to_string(),
        });
        tokio::select! {
            d = perms.ask(&tool, intent, risk_of(f.kind.as_ref())) => d,
            () = cancel.cancelled() => None,
        }
    };
    let outcome = match decision.and_then(|d| option_for(&req.options, d)) {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => RequestPermissionOutcome::Cancelled,
    };
    let resp = serde_json::to_value(RequestPermissionResponse::new(outcome))
        .map_err(|e| agent_client_protocol::Error::internal_error().data(json!(e.to_string())))?;
    responder.respond(resp)
}

/// ACP method -> CAP reverse RPC, and the result back in ACP's shape.
async fn reverse_rpc(
    rpc: Option<&Rpc>,
    method: &str,
    params: Value,
) -> Result<Value, agent_client_protocol::Error> {
    let Some(rpc) = rpc else {
        return Err(acp_error(&RpcError::Unsupported("capabilities.coding")));
    };
    let cap = match method {
        "fs/read_text_file" => "cap.fs.read".to_owned(),
        "fs/write_text_file" => "cap.fs.write".to_owned(),
        "terminal/create" => "cap.terminal.create".to_owned(),
        "terminal/output" => "cap.terminal.output".to_owned(),
        "terminal/wait_for_exit" => "cap.terminal.wait".to_owned(),
        "terminal/kill" => "cap.terminal.kill".to_owned(),
        "terminal/release" => "cap.terminal.release".to_owned(),
        other => match other.strip_prefix("_cap/") {
            Some(rest) => format!("cap.{rest}"),
            None => return Err(acp_error(&RpcError::MethodNotFound(other.to_owned()))),
        },
    };
    match rpc.call(&cap, params).await {
        Ok(v) => Ok(to_acp(method, v)),
        Err(e) => Err(acp_error(&e)),
    }
}

/// CAP results in ACP's field names.
fn to_acp(method: &str, v: Value) -> Value {
    let exit = |v: &Value| json!({ "exitCode": v["exit_code"], "signal": v["signal"] });
    match method {
        "fs/read_text_file" => json!({ "content": v["content"] }),
        "fs/write_text_file" | "terminal/kill" | "terminal/release" => json!({}),
        "terminal/create" => json!({ "terminalId": v["terminal_id"] }),
        "terminal/output" => {
            let mut out = json!({ "output": v["output"], "truncated": v["truncated"] });
            if v.get("exit_code").is_some() {
                out["exitStatus"] = exit(&v);
            }
            out
        }
        "terminal/wait_for_exit" => exit(&v),
        _ => v,
    }
}
