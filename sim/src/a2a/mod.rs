//! `--mode a2a --listen ADDR`: the sim as a remote A2A agent (issue 14). It prints
//! the bound address on its first stdout line, serves its agent card at
//! `/.well-known/agent-card.json` (with the `cap-protocol/v1` extension unless
//! `--no-cap-extension`; a bearer scheme with `--bearer-token`) and A2A's JSON-RPC
//! binding at `/` in one spelling (`--spelling 1.0|0.3`): a streaming send starts a
//! task that plays the next script turn ([`turn`]) and answers with its SSE stream; a
//! send naming a task waiting for input answers it; resubscribe re-attaches to a
//! task's stream; `GetTask` / `tasks/get` answers what a task said so far (its agent
//! messages as history, its artifacts, its status; kept after it ends); cancel
//! cancels it. A `crash` step ends the whole server (the
//! peer's loss); `hang` keeps the stream open and silent. `--request-log FILE`
//! appends one line per request: its method, `A2A-Version` and `traceparent`.

mod outbox;
mod snapshot;
mod turn;

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use capfleet_wire::bindings::a2a::outbound::{self, Offer, TaskFrames};
use capfleet_wire::bindings::a2a::{Method, Spelling};
use capfleet_wire::sync::lock;
use serde_json::{Value, json};

use super::script::Script;
use super::script::state::{StateDir, TurnPicker};
use outbox::Outbox;
use snapshot::Snapshot;
use turn::{A2aTurn, Out};

/// The A2A mode's options.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub spelling: Spelling,
    pub plain: bool,
    pub bearer: Option<String>,
    pub request_log: Option<PathBuf>,
}

/// A task in flight.
struct Entry {
    outbox: Arc<Outbox>,
    answers: std::sync::mpsc::Sender<Value>,
    cancelled: Arc<AtomicBool>,
}

struct Server {
    script: Script,
    state: StateDir,
    opts: Options,
    base: String,
    picker: Mutex<TurnPicker>,
    tasks: Mutex<HashMap<String, Entry>>,
    /// Every task's snapshot, running or ended.
    snapshots: Mutex<HashMap<String, Arc<Mutex<Snapshot>>>>,
    next: AtomicU64,
}

/// Serves until killed (or a `crash` step).
pub(crate) fn serve(
    addr: SocketAddr,
    script: Script,
    state: StateDir,
    opts: Options,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let mut out = io::stdout().lock();
        writeln!(out, "{local}")?;
        out.flush()?;
        drop(out);
        let picker = Mutex::new(TurnPicker::new(&script.turns).repeating(script.header.repeat));
        let server = Arc::new(Server {
            script,
            state,
            opts,
            base: format!("http://{local}/"),
            picker,
            tasks: Mutex::default(),
            snapshots: Mutex::default(),
            next: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/.well-known/agent-card.json", get(card))
            .route("/", post(rpc))
            .with_state(server);
        axum::serve(listener, app).await
    })
}

async fn card(State(s): State<Arc<Server>>) -> Response {
    let card = outbound::card(&Offer {
        name: "capfleet-sim",
        description: "capfleet's scripted simulator agent over A2A",
        version: env!("CARGO_PKG_VERSION"),
        url: &s.base,
        spellings: &[s.opts.spelling],
        cap_extension: !s.opts.plain,
        cap_required: !s.opts.plain,
        bearer: s.opts.bearer.is_some(),
        skills: vec![(
            "script".into(),
            "scripted turns".into(),
            "plays its script".into(),
        )],
    });
    ([("content-type", "application/json")], card.to_string()).into_response()
}

fn json_response(v: Value) -> Response {
    ([("content-type", "application/json")], v.to_string()).into_response()
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Response {
    json_response(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn log_request(s: &Server, method: &str, headers: &HeaderMap) {
    let Some(path) = &s.opts.request_log else {
        return;
    };
    let h = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    };
    let line = format!(
        "{method} a2a-version={} traceparent={}\n",
        h("a2a-version"),
        h("traceparent")
    );
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        eprintln!("capfleet sim: request log {}: {e}", path.display());
    }
}

async fn rpc(State(s): State<Arc<Server>>, headers: HeaderMap, body: String) -> Response {
    let Ok(req) = serde_json::from_str::<Value>(&body) else {
        return rpc_error(&Value::Null, -32700, "parse error");
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req.get("method").and_then(Value::as_str).unwrap_or("");
    log_request(&s, method, &headers);
    if let Some(token) = &s.opts.bearer {
        let expected = format!("Bearer {token}");
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
        }
    }
    let sp = s.opts.spelling;
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let task_of = |p: &Value| p.get("id").and_then(Value::as_str).map(str::to_owned);
    if method == sp.method(Method::Stream) {
        return send(&s, id, &params);
    }
    if method == sp.method(Method::Resubscribe) {
        let reader =
            task_of(&params).and_then(|t| lock(&s.tasks).get(&t).map(|e| e.outbox.attach()));
        return match reader {
            Some(reader) => sse(id, reader),
            None => rpc_error(&id, -32001, "task not found"),
        };
    }
    if method == sp.method(Method::Get) {
        let snapshot = task_of(&params).and_then(|t| lock(&s.snapshots).get(&t).cloned());
        return match snapshot {
            Some(snap) => {
                let task = lock(&snap).task();
                json_response(json!({"jsonrpc": "2.0", "id": id, "result": task}))
            }
            None => rpc_error(&id, -32001, "task not found"),
        };
    }
    if method == sp.method(Method::Cancel) {
        let Some(task) = task_of(&params) else {
            return rpc_error(&id, -32602, "no task id");
        };
        let Some(entry) = lock(&s.tasks).remove(&task) else {
            return rpc_error(&id, -32001, "task not found");
        };
        entry.cancelled.store(true, Ordering::Relaxed);
        let context = String::new();
        let t = TaskFrames {
            spelling: sp,
            id: task,
            context,
        };
        let state = capfleet_wire::bindings::a2a::TaskState::Canceled;
        let result = t.task_obj(state, None, Vec::new(), Vec::new());
        return json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    rpc_error(&id, -32601, &format!("method not found: {method}"))
}

/// A streaming send: an answer to a waiting task, or a new task playing the next turn.
fn send(s: &Arc<Server>, id: Value, params: &Value) -> Response {
    let Some(message) = params.get("message").cloned() else {
        return rpc_error(&id, -32602, "no message");
    };
    if let Some(task) = message.get("taskId").and_then(Value::as_str) {
        let tasks = lock(&s.tasks);
        let Some(entry) = tasks.get(task) else {
            return rpc_error(&id, -32001, "task not found");
        };
        // Attached before the answer is passed on: what the task says next is this
        // response's, never the asking one's.
        let reader = entry.outbox.attach();
        if entry.answers.send(message.clone()).is_err() {
            return rpc_error(&id, -32002, "task is not waiting for input");
        }
        drop(tasks);
        return sse(id, reader);
    }
    let n = s.next.fetch_add(1, Ordering::Relaxed);
    let task = TaskFrames {
        spelling: s.opts.spelling,
        id: format!("task-{}-{n}", std::process::id()),
        context: message
            .get("contextId")
            .and_then(Value::as_str)
            .map_or_else(|| format!("ctx-{}-{n}", std::process::id()), str::to_owned),
    };
    let prompt: String = message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    let (outbox, out, drops) = Outbox::new();
    let reader = outbox.attach();
    let (answer_tx, answers) = std::sync::mpsc::channel();
    let cancelled = Arc::new(AtomicBool::new(false));
    let entry = Entry {
        outbox,
        answers: answer_tx,
        cancelled: cancelled.clone(),
    };
    lock(&s.tasks).insert(task.id.clone(), entry);
    let snapshot = Arc::new(Mutex::new(Snapshot::new(&task)));
    lock(&s.snapshots).insert(task.id.clone(), snapshot.clone());
    let server = s.clone();
    std::thread::spawn(move || {
        let task_id = task.id.clone();
        let mut fe = A2aTurn {
            task,
            snapshot,
            out,
            drops,
            answers,
            cancelled,
            usage: Default::default(),
            said: 0,
        };
        let picked = lock(&server.picker)
            .pick(&server.script.turns, &prompt)
            .map(|(i, _)| i);
        let turn = picked.and_then(|i| server.script.turns.get(i).map(|t| (i, t)));
        let played = super::script::steps::run_turn(
            &mut fe,
            &server.script.header,
            turn,
            &prompt,
            &server.state,
        );
        if let Err(e) = played
            && e.kind() != io::ErrorKind::BrokenPipe
        {
            eprintln!("capfleet sim: task {task_id}: {e}");
        }
        lock(&server.tasks).remove(&task_id);
    });
    sse(id, reader)
}

/// An SSE response reading the task's outbox until its end, its drop or a newer
/// reader ([`outbox`]).
fn sse(id: Value, reader: outbox::Reader) -> Response {
    let stream = futures::stream::unfold((reader, id), |(mut reader, id)| async move {
        let event = match reader.next().await? {
            Out::Frame(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
            Out::Raw(line) => line,
            Out::Drop(_) | Out::End => return None,
        };
        Some((
            Ok::<_, Infallible>(Event::default().data(event)),
            (reader, id),
        ))
    });
    // A comment now and then: a reader gone (its client killed) is noticed by the
    // failed write, and its stream dropped before it takes a frame another reads.
    let alive = KeepAlive::new().interval(std::time::Duration::from_millis(100));
    Sse::new(stream).keep_alive(alive).into_response()
}
