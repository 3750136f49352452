//! A2A's JSON-RPC binding at `/a2a/<name>/`, both spellings on one URL (the method
//! name says which: `SendStreamingMessage` or `message/stream`, ...), every answer in
//! the spelling of its request. Streams are Server-Sent Events whose first frame is
//! the task as it stands, then its updates until it ends or waits for the client.
//!
//! Auth: the server's bearer tokens, by method — `GetTask` / `SubscribeToTask` need
//! `read`, sending and cancelling `run`, and a message answering an `input-required`
//! `approve` (as answering an ask over the HTTP API does).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use capfleet_wire::bindings::a2a::{CAP_EXTENSION, Method, Spelling};
use serde_json::{Value, json};

use super::envelope::{self, Op};
use super::list;
use super::task::{Subscription, Task, Update};
use super::{Exposed, Host};
use crate::auth::{Caller, Role};
use crate::error::ApiError;

/// How long `CancelTask` waits for the turn to end before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// A JSON-RPC error (A2A's codes), and the HTTP status it goes with.
#[derive(Debug)]
pub(super) struct RpcError {
    pub code: i64,
    message: String,
    http: StatusCode,
}

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            http: StatusCode::OK,
        }
    }
    pub(super) fn invalid_params(m: impl Into<String>) -> Self {
        Self::new(-32602, m)
    }
    pub(super) fn invalid_request(m: impl Into<String>) -> Self {
        Self::new(-32600, m)
    }
    pub(super) fn internal(m: impl Into<String>) -> Self {
        Self::new(-32603, m)
    }
    pub(super) fn no_task(id: &str) -> Self {
        Self::new(-32001, format!("task not found: {id}"))
    }
    /// A2A's `UnsupportedOperationError`.
    pub(super) fn unsupported(m: impl Into<String>) -> Self {
        Self::new(-32004, m)
    }
    pub(super) fn busy(m: impl Into<String>) -> Self {
        RpcError {
            http: StatusCode::TOO_MANY_REQUESTS,
            ..Self::new(-32603, m)
        }
    }
    pub(super) fn draining() -> Self {
        RpcError {
            http: StatusCode::SERVICE_UNAVAILABLE,
            ..Self::new(-32603, "the server is shutting down")
        }
    }
    fn forbidden(needed: Role) -> Self {
        RpcError {
            http: StatusCode::FORBIDDEN,
            ..Self::new(
                -32600,
                format!("this needs a token of role `{}`", needed.as_str()),
            )
        }
    }

    fn body(&self, id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": self.code, "message": self.message}})
    }

    fn response(&self, id: &Value) -> Response {
        (
            self.http,
            [("content-type", "application/json")],
            self.body(id).to_string(),
        )
            .into_response()
    }

    /// The error as a streaming method's client reads it: one SSE event (A2A §9.4.2;
    /// an SSE client reads no `application/json` body).
    fn sse(&self, id: &Value) -> Response {
        let event = Ok::<_, Infallible>(Event::default().data(self.body(id).to_string()));
        let mut r = Sse::new(futures::stream::iter([event])).into_response();
        *r.status_mut() = self.http;
        r
    }
}

/// What a request asks for, read once.
struct Call {
    id: Value,
    spelling: Spelling,
    op: Op,
    params: Value,
    /// The client activated the CAP extension.
    cap: bool,
    caller: Caller,
}

impl Call {
    /// A streaming method: its answer, errors too, is an SSE stream.
    fn streams(&self) -> bool {
        matches!(self.op, Op::Core(Method::Stream | Method::Resubscribe))
    }

    fn require(&self, role: Role) -> Result<(), RpcError> {
        if self.caller.role < role {
            return Err(RpcError::forbidden(role));
        }
        Ok(())
    }

    fn result(&self, result: Value) -> Response {
        let body = json!({"jsonrpc": "2.0", "id": self.id, "result": result});
        let mut r = ([("content-type", "application/json")], body.to_string()).into_response();
        self.echo_extension(r.headers_mut());
        r
    }

    fn echo_extension(&self, headers: &mut HeaderMap) {
        if self.cap
            && let Ok(v) = CAP_EXTENSION.parse()
        {
            headers.insert(self.spelling.extensions_header(), v);
        }
    }
}

/// `POST /a2a/{name}/`.
pub(super) async fn handle(
    State(exposed): State<Arc<Exposed>>,
    Path(name): Path<String>,
    peer: ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(host) = exposed.hosts.get(&name).cloned() else {
        return ApiError::NoRoute.into_response();
    };
    let caller = match crate::routes::identify(&exposed.server, &headers, Some(peer)).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let req = match envelope::read(&body) {
        Ok(r) => r,
        Err((e, id)) => return e.response(&id),
    };
    let activated = |h: &str| {
        headers
            .get_all(h)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|e| e.trim() == CAP_EXTENSION)
    };
    let call = Call {
        id: req.id,
        spelling: req.spelling,
        op: req.op,
        params: req.params,
        cap: activated("a2a-extensions") || activated("x-a2a-extensions"),
        caller,
    };
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let answer = if !call.cap && !exposed.plain {
        Err(RpcError::new(
            -32008,
            format!(
                "this agent requires the A2A extension {CAP_EXTENSION}: activate it (the A2A-Extensions header), or start the server with --a2a-plain to serve plain A2A"
            ),
        ))
    } else {
        dispatch(&host, &call, traceparent.as_deref()).await
    };
    match answer {
        Ok(r) => r,
        Err(e) if call.streams() && e.http == StatusCode::OK => e.sse(&call.id),
        Err(e) => e.response(&call.id),
    }
}

async fn dispatch(
    host: &Host,
    call: &Call,
    traceparent: Option<&str>,
) -> Result<Response, RpcError> {
    let method = match call.op {
        Op::Core(m) => m,
        Op::List => {
            call.require(Role::Read)?;
            let tasks = host.tasks().all();
            return Ok(call.result(list::list(tasks, &call.params, call.spelling, call.cap)?));
        }
        Op::Push => {
            return Err(RpcError::new(
                -32003,
                "push notifications are not supported (the card declares none)",
            ));
        }
        Op::ExtendedCard => {
            return Err(RpcError::unsupported(
                "this agent has no extended agent card (the card declares none)",
            ));
        }
    };
    match method {
        Method::Send | Method::Stream => {
            let message = envelope::message(&call.params)?;
            let history = envelope::history_length(&call.params)?;
            let answering = message.get("taskId").and_then(Value::as_str);
            let (task, sub) = match answering {
                // An answer to the task's question, else text joining its turn.
                Some(task_id) => {
                    let task = host.open_task(task_id)?;
                    if task.waits_for_input() {
                        call.require(Role::Approve)?;
                        host.answer(task, message, &call.caller)?
                    } else {
                        call.require(Role::Run)?;
                        host.steer(task, message).await?
                    }
                }
                None => {
                    call.require(Role::Run)?;
                    host.send(message, &call.caller, traceparent).await?
                }
            };
            if method == Method::Stream {
                Ok(stream(call, &task, sub))
            } else if envelope::returns_immediately(&call.params, call.spelling) {
                Ok(answer_task(call, &task, history))
            } else {
                Ok(wait(call, &task, sub, history).await)
            }
        }
        Method::Get => {
            call.require(Role::Read)?;
            let history = envelope::history_length(&call.params)?;
            let task = task_of(host, &call.params)?;
            let frames = task.frames(call.spelling);
            Ok(call.result(task.snapshot().render(&frames, call.cap, history)))
        }
        Method::Cancel => {
            call.require(Role::Run)?;
            let task = task_of(host, &call.params)?;
            if task.is_done() {
                return Err(RpcError::new(
                    -32002,
                    format!("task {} has ended: it cannot be cancelled", task.id),
                ));
            }
            let mut sub = task.subscribe();
            host.cancel(&task, &call.caller);
            let ended = async {
                while !task.is_done() {
                    if sub.live.recv().await.is_err() {
                        break;
                    }
                }
            };
            let _late = tokio::time::timeout(CANCEL_WAIT, ended).await;
            let frames = task.frames(call.spelling);
            Ok(call.result(task.snapshot().render(&frames, call.cap, Some(0))))
        }
        Method::Resubscribe => {
            call.require(Role::Read)?;
            let task = task_of(host, &call.params)?;
            let sub = task.subscribe();
            if sub.snapshot.state.is_terminal() {
                return Err(RpcError::unsupported(format!(
                    "task {} has ended: there is nothing to subscribe to",
                    task.id
                )));
            }
            Ok(stream(call, &task, sub))
        }
    }
}

fn task_of(host: &Host, params: &Value) -> Result<Arc<Task>, RpcError> {
    let id = params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("params.id (the task) is missing"))?;
    host.tasks().get(id).ok_or_else(|| RpcError::no_task(id))
}

/// A non-streaming send: the task once it ends or waits for the client.
async fn wait(call: &Call, task: &Task, mut sub: Subscription, history: Option<usize>) -> Response {
    let mut state = sub.snapshot.state;
    while !(state.is_terminal() || state.is_interrupted()) {
        match sub.live.recv().await {
            Ok(u) => {
                if let Update::Status { state: s, .. } = &*u {
                    state = *s;
                }
            }
            Err(_) => state = task.state(),
        }
    }
    answer_task(call, task, history)
}

/// A send's answer: the task as it stands.
fn answer_task(call: &Call, task: &Task, history: Option<usize>) -> Response {
    let frames = task.frames(call.spelling);
    let obj = task.snapshot().render(&frames, call.cap, history);
    call.result(frames.wrap_task(obj))
}

/// The task's stream: the task as it stands, then its updates until it ends or waits.
fn stream(call: &Call, task: &Task, sub: Subscription) -> Response {
    let frames = task.frames(call.spelling);
    let id = call.id.clone();
    let cap = call.cap;
    let frame = move |result: Value| {
        Ok::<_, Infallible>(
            Event::default()
                .data(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()),
        )
    };
    let first = frame(frames.wrap_task(sub.snapshot.render(&frames, cap, Some(0))));
    let over = sub.snapshot.state.is_terminal() || sub.snapshot.state.is_interrupted();
    let rest = futures::stream::unfold((sub.live, over), move |(mut live, over)| {
        let frames = frames.clone();
        let frame = frame.clone();
        async move {
            if over {
                return None;
            }
            loop {
                // A stream that fell behind ends: its client resubscribes.
                let u = live.recv().await.ok()?;
                if let Some(v) = u.render(&frames, cap) {
                    return Some((frame(v), (live, u.ends_stream())));
                }
            }
        }
    });
    let events = futures::StreamExt::chain(futures::stream::iter([first]), rest);
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    call.echo_extension(r.headers_mut());
    r
}
