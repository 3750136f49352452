//! A2A expose (spec §11.2): `capfleet serve --expose AGENT` publishes an agent, and
//! `--expose-fleet FLEET.toml` a whole fleet, as A2A peers under `/a2a/<name>/`:
//!
//! - [`card`]: `GET /a2a/<name>/.well-known/agent-card.json`, synthesised from the
//!   manifest (or the fleet) with the `cap-protocol/v1` extension and the server's
//!   auth scheme; public, as A2A discovery expects;
//! - [`rpc`]: `POST /a2a/<name>/`, JSON-RPC in A2A 1.0's and 0.3's spellings;
//! - [`agent`]: an exposed agent — one session per A2A context, one turn per task; a
//!   message to a working task (its `taskId`, no question waiting) joins its turn where
//!   the agent takes text mid-turn (a steer: `SessionSpec::steers`), else is refused;
//! - [`fleet`]: an exposed fleet — one run per task, on the server's admission;
//! - [`task`]: a task's state, bounded history and live updates;
//! - [`feed`]: session events as A2A updates (§11.3); [`input`]: questions as
//!   `input-required` and the client's answers; [`gate`]: a question held until the
//!   events before it have reached the task.
//!
//! The wire types are the engine's (`capfleet_wire::bindings::a2a`), shared with
//! the A2A driver and the simulator.
//!
//! A2A expose (spec §11.2) publishes agents and fleets as A2A peers under
//! `/a2a/<name>/`, on the A2A wire types the driver and the simulator use
//! (`capfleet_wire::bindings::a2a`: `spelling.rs` names both spellings' methods and the server tells
//! them apart by name, `outbound.rs` builds the frames and the card, `datapart.rs` the
//! marked CAP parts). One file per concept:
//!
//! | file | what it does |
//! |---|---|
//! | this module | the exposed agents and fleets by name, their routes (merged beside the API's, their own auth), the bounded task table (256 per name, ended ones evicted first), answers to `input-required` |
//! | `card.rs` | the card from the manifest (or fleet), the extension (required unless `--a2a-plain`), both interfaces, the bearer scheme; public; also at the root `/.well-known/agent-card.json` when one agent or fleet is exposed; its URLs from `--public-url`'s origin, else the listening address (never a `Host` header's name) |
//! | `envelope.rs` | what every request passes before it runs: the JSON-RPC envelope (`jsonrpc` "2.0", a `method`, a scalar `id`: else -32600), object `params` (-32602), a client message's `messageId`, user `role` and parts, a non-negative `historyLength`, `returnImmediately` (0.3: `blocking: false`; absent, a send waits, as v1.0 says); push-config methods -32003, `GetExtendedAgentCard` -32004 |
//! | `list.rs` | `ListTasks` / `tasks/list`: filters by context, status and status time, pages of 1–100 (50) newest first behind a cursor token, `totalSize`, artifacts only when asked, `historyLength` as `GetTask` |
//! | `rpc.rs` | JSON-RPC dispatch in either spelling; a request that does not activate the `cap-protocol/v1` extension refused with -32008 (spec §13.5) unless `--a2a-plain`; roles by method (`read` get/resubscribe, `run` send/cancel and a message to a working task, `approve` answer), SSE streams (the task first, then its updates until it ends or waits) |
//! | `task.rs` | a task: state, bounded history (chunks of a message joined) and artifacts, its queued questions, a bounded broadcast of spelling-free updates rendered per stream (a stream that lags is ended; its client resubscribes); its end counted in `capfleet_server_a2a_tasks_total` |
//! | `feed.rs` | session events to updates (§11.3): text as status-update messages, tool calls / plans / thoughts / errors as marked data parts (only to clients that activated the extension), artifacts, usage summed onto the terminal state |
//! | `input.rs` | a `HumanQuestion` as `input-required` (text and marked part), the client's answer (marked part or text) as an `Answer` with rule `a2a:<token>` (a plain client's text read as the terminal's is, `app/src/human/reply.rs`: only a clear yes allows) |
//! | `gate.rs` | the gate that holds a question until its request's event (published before it, on the other road) has reached the task, so no stream ends at `input-required` before the events that preceded it |
//! | `agent.rs` | an exposed agent: one tree (`one_session::tree`, the answerer's human channel = the clients) for the server's life, one session per context spawned under an `a2a.context` span that adopts the inbound `traceparent` (`Spawner::spawn_in`), each message's turn under its own request's `traceparent` (`SessionMsg::Ask`), a forwarder per context to its current task; a turn's end reported once the journal has it on disk (`Durable::sync`), a failed journal write failing the turn and every later message (a failed write is a failed turn); idle contexts closed after 15 min, at most `--max-sessions`; the drain stops new messages, waits for turns in flight with the runs, cancels them past `--drain-timeout`, and closes the tree |
//! | `fleet.rs` | an exposed fleet: each task a run through the server's admission and `driver.rs` (`Pending.hooks`: extra subscribers, the human channel; `Pending.traceparent`, which `serve.run` adopts, as for a submitted run), followed to its end; the answer the start sessions' last turn text |

mod agent;
mod card;
mod envelope;
mod feed;
mod fleet;
mod gate;
mod input;
mod list;
mod rpc;
mod task;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::{get, post};
use capfleet_wire::bindings::a2a::Part as WirePart;
use capfleet_wire::sync::lock;
use serde_json::Value;

use super::auth::Caller;
use super::state::Server;
use agent::{AgentHost, AgentLaunch};
pub(crate) use card::Base;
use fleet::FleetHost;
use rpc::RpcError;
use task::{Subscription, Task};

/// Tasks remembered per exposed agent or fleet (the oldest ended ones go first).
const TASKS: usize = 256;

/// The exposed agents and fleets, by name.
pub(crate) struct Exposed {
    server: Arc<Server>,
    hosts: HashMap<String, Host>,
    /// Serve clients that do not activate the `cap-protocol/v1` extension, as plain
    /// A2A (`--a2a-plain`); by default they are refused (spec §13.5).
    plain: bool,
    /// Where the cards say the server is.
    base: Base,
}

/// An exposed agent or fleet.
#[derive(Clone)]
enum Host {
    Agent(Arc<AgentHost>),
    Fleet(Arc<FleetHost>),
}

impl Host {
    fn tasks(&self) -> &Tasks {
        match self {
            Host::Agent(a) => &a.tasks,
            Host::Fleet(f) => &f.tasks,
        }
    }

    async fn send(
        &self,
        message: &Value,
        caller: &Caller,
        traceparent: Option<&str>,
    ) -> Result<(Arc<Task>, Subscription), RpcError> {
        match self {
            Host::Agent(a) => a.send(message, traceparent).await,
            Host::Fleet(f) => f.send(message, caller, traceparent).await,
        }
    }

    /// Task `task_id`, which takes a message: one that has not ended.
    fn open_task(&self, task_id: &str) -> Result<Arc<Task>, RpcError> {
        let task = self
            .tasks()
            .get(task_id)
            .ok_or_else(|| RpcError::no_task(task_id))?;
        if task.is_done() {
            return Err(RpcError::unsupported(format!(
                "task {task_id} has ended: it takes no more messages; a new turn is a \
                 message without taskId in its context"
            )));
        }
        Ok(task)
    }

    /// A message to `task` while it works (no question waits): an exposed agent's
    /// joins the turn the task runs where the agent takes text mid-turn (a steer).
    async fn steer(
        &self,
        task: Arc<Task>,
        message: &Value,
    ) -> Result<(Arc<Task>, Subscription), RpcError> {
        match self {
            Host::Agent(a) => a.steer(&task, message).await.map(|sub| (task, sub)),
            Host::Fleet(_) => Err(RpcError::unsupported(format!(
                "task {} is {} and waits for no input: a fleet's run takes no message \
                 mid-run",
                task.id,
                task.state()
                    .spelled(capfleet_wire::bindings::a2a::Spelling::V03)
            ))),
        }
    }

    /// A message to `task`: the answer to its question.
    fn answer(
        &self,
        task: Arc<Task>,
        message: &Value,
        caller: &Caller,
    ) -> Result<(Arc<Task>, Subscription), RpcError> {
        let task_id = &task.id;
        let Some(q) = task.take_question() else {
            return Err(RpcError::invalid_request(format!(
                "task {task_id} is {} and waits for no input; a new turn is a message \
                 without taskId in its context",
                task.state()
                    .spelled(capfleet_wire::bindings::a2a::Spelling::V03)
            )));
        };
        let reply = input::answer(&q.request, message, &caller.name);
        tracing::info!(task = %task.id, request = q.request.id(), by = %caller.name, "answered over A2A");
        let sub = task.subscribe();
        let _session_gone = q.session.cast(reply);
        task.ask_next(|q| input::question(q, unique_id(&format!("{}-ask", task.id))));
        Ok((task, sub))
    }

    fn cancel(&self, task: &Task, caller: &Caller) {
        match self {
            Host::Agent(a) => a.cancel(task),
            Host::Fleet(f) => f.cancel(task, caller),
        }
    }
}

/// The tasks of one exposed agent or fleet, bounded.
struct Tasks {
    by_id: Mutex<TaskTable>,
    /// Where their ends are counted.
    ends: task::Ends,
}

#[derive(Default)]
struct TaskTable {
    map: HashMap<String, Arc<Task>>,
    /// Ids, oldest first.
    order: VecDeque<String>,
}

impl Tasks {
    /// The tasks of `name`, their ends counted in `server`'s metrics.
    fn of(name: &str, server: &Server) -> Tasks {
        Tasks {
            by_id: Mutex::default(),
            ends: Some((server.metrics.a2a_tasks.clone(), name.to_owned())),
        }
    }

    /// A new task (not yet in the table).
    fn task(&self, id: String, context: String) -> Arc<Task> {
        Task::new(id, context, self.ends.clone())
    }

    fn insert(&self, task: Arc<Task>) {
        let mut t = lock(&self.by_id);
        let TaskTable { map, order } = &mut *t;
        if map.len() >= TASKS
            && let Some(i) = order
                .iter()
                .position(|id| map.get(id).is_none_or(|t| t.is_done()))
            && let Some(old) = order.remove(i)
        {
            map.remove(&old);
        }
        order.push_back(task.id.clone());
        map.insert(task.id.clone(), task);
    }

    fn get(&self, id: &str) -> Option<Arc<Task>> {
        lock(&self.by_id).map.get(id).cloned()
    }

    /// Every task remembered.
    fn all(&self) -> Vec<Arc<Task>> {
        lock(&self.by_id).map.values().cloned().collect()
    }
}

static IDS: AtomicU64 = AtomicU64::new(0);

/// A fresh id: `prefix`, the process, the time and a counter.
fn unique_id(prefix: &str) -> String {
    let n = IDS.fetch_add(1, Ordering::Relaxed) + 1;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{:x}-{nanos:x}-{n}", std::process::id())
}

/// The prompt a message carries: its text parts, joined.
fn prompt_of(message: &Value) -> Result<String, RpcError> {
    let text: Vec<&str> = message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| match WirePart::read(p) {
            WirePart::Text(t) => Some(t),
            _ => None,
        })
        .collect();
    let prompt = text.join("\n");
    if prompt.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "the message has no text part to act on",
        ));
    }
    Ok(prompt)
}

/// Why an agent or fleet cannot be exposed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExposeError {
    #[error("--expose {agent}: {reason}")]
    Agent { agent: String, reason: String },
    #[error("--expose-fleet {}: {reason}", path.display())]
    Fleet { path: PathBuf, reason: String },
    #[error("`{0}` is exposed twice (an agent's or fleet's name is its path under /a2a/)")]
    Twice(String),
    #[error("the A2A data dir: {0}")]
    DataDir(std::io::Error),
}

/// Start what `agents` and `fleets` name under `server`.
pub(crate) async fn expose(
    server: Arc<Server>,
    agents: &[String],
    fleets: &[PathBuf],
    plain: bool,
    base: Base,
    data_dir: &Path,
    traceparent: Option<String>,
) -> Result<Arc<Exposed>, ExposeError> {
    let mut hosts = HashMap::new();
    let cwd = std::env::current_dir().map_err(ExposeError::DataDir)?;
    for agent in agents {
        let bad = |reason: String| ExposeError::Agent {
            agent: agent.clone(),
            reason,
        };
        let manifest = capfleet_app::agents::registry()
            .resolve(agent)
            .await
            .map_err(|e| bad(e.to_string()))?
            .manifest;
        let name = manifest.agent.name.clone();
        let dir = data_dir.join("a2a");
        std::fs::create_dir_all(&dir).map_err(ExposeError::DataDir)?;
        let journal = dir.join(format!("{name}-{}.jsonl", unique_id("journal")));
        let host = AgentHost::start(AgentLaunch {
            tasks: Tasks::of(&name, &server),
            name: name.clone(),
            manifest: Arc::new(manifest),
            cwd: cwd.clone(),
            journal,
            max_contexts: server.limits.max_sessions,
            traceparent: traceparent.clone(),
        })
        .await
        .map_err(|_| bad("its supervision tree did not start".into()))?;
        if hosts.insert(name.clone(), Host::Agent(host)).is_some() {
            return Err(ExposeError::Twice(name));
        }
    }
    for path in fleets {
        let host = FleetHost::load(server.clone(), path).await?;
        let name = host.name.clone();
        if hosts.insert(name.clone(), Host::Fleet(host)).is_some() {
            return Err(ExposeError::Twice(name));
        }
    }
    for name in hosts.keys() {
        eprintln!(
            "capfleet: A2A agent `{name}` at /a2a/{name}/ (card: /a2a/{name}/.well-known/agent-card.json)"
        );
    }
    if let [name] = hosts.keys().collect::<Vec<_>>()[..] {
        eprintln!("capfleet: A2A agent `{name}`'s card is also at /.well-known/agent-card.json");
    }
    Ok(Arc::new(Exposed {
        server,
        hosts,
        plain,
        base,
    }))
}

impl Exposed {
    /// The A2A routes (their own auth: the card is public, the RPC by method).
    pub(crate) fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/a2a/{name}/.well-known/agent-card.json", get(card::serve))
            .route("/a2a/{name}/.well-known/agent.json", get(card::serve))
            .route("/.well-known/agent-card.json", get(card::serve_root))
            .route("/.well-known/agent.json", get(card::serve_root))
            .route("/a2a/{name}/", post(rpc::handle))
            .route("/a2a/{name}", post(rpc::handle))
            .with_state(self.clone())
    }

    /// Take no new message (the drain has begun; a fleet's runs are refused by the
    /// server's admission already).
    pub(crate) fn close(&self) {
        for host in self.hosts.values() {
            if let Host::Agent(a) = host {
                a.close();
            }
        }
    }

    /// Resolves once no exposed agent has a turn in flight (checked every 50 ms: only
    /// the drain waits on it).
    pub(crate) async fn idle(&self) {
        let busy = || {
            self.hosts
                .values()
                .any(|h| matches!(h, Host::Agent(a) if a.busy()))
        };
        while busy() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Cancel every exposed agent's turn in flight.
    pub(crate) fn cancel_all(&self) {
        for host in self.hosts.values() {
            if let Host::Agent(a) = host {
                a.cancel_all();
            }
        }
    }

    /// Close every exposed agent's sessions and stop their trees (the fleets' runs are
    /// the server's, drained with the others).
    pub(crate) async fn shutdown(&self) {
        for host in self.hosts.values() {
            if let Host::Agent(a) = host {
                a.shutdown().await;
            }
        }
    }
}
