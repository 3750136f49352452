//! An agent exposed over A2A (`--expose AGENT`): one supervision tree for the
//! server's life (the answerer's human channel is the A2A clients), one session of
//! the agent per A2A context. A message in a new context starts the session (its span
//! a child of the message's `traceparent`); each message is a task, the session's
//! next turn; its events reach the task through the context's forwarder
//! ([`super::feed`]). A context with no turn for [`IDLE`] is closed (its agent with
//! it), and so is the least recently used idle one when a new context would exceed
//! the bound; the server's drain closes them all.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capfleet_engine::answerer::{HumanQuestion, Policy};
use capfleet_engine::fault::DiskFault;
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::CancelScope;
use capfleet_engine::root::{Orchestrator, Spawner};
use capfleet_engine::session::{SessionError, SessionMsg};
use capfleet_wire::bindings::a2a::TaskState;
use capfleet_wire::events::Durable;
use capfleet_wire::events::{EventBody, Published, SUBSCRIBER_CAPACITY, trace};
use capfleet_wire::sync::lock;
use ractor::ActorRef;
use serde_json::Value;
use tokio::sync::mpsc;

use super::feed::Feed;
use super::gate::Gate;
use super::input;
use super::rpc::RpcError;
use super::task::{Subscription, Task, Update};
use super::{Tasks, prompt_of, unique_id};
use capfleet_app::agents::{SessionRequest, session_spec};
use capfleet_app::one_session::refuse;

/// A context without a turn this long is closed.
pub(super) const IDLE: Duration = Duration::from_secs(15 * 60);

/// One A2A context: a session of the agent.
struct Context {
    id: String,
    /// Its session's URN.
    urn: String,
    session: ActorRef<SessionMsg>,
    /// The task its turns' events go to (the last one).
    current: Mutex<Option<Arc<Task>>>,
    last_used: Mutex<Instant>,
    /// The context's span: its session's parent, continuing the client's trace.
    span: tracing::Span,
    /// The questions of its session, to its forwarder (which asks them in order).
    questions: mpsc::Sender<HumanQuestion>,
}

impl Context {
    fn busy(&self) -> bool {
        lock(&self.current).as_ref().is_some_and(|t| !t.is_done())
    }

    fn close(&self) {
        let _gone = self.session.cast(SessionMsg::Close);
        trace::end(&self.span);
    }

    /// Ask `q` of the client through the current task (refused when none is open).
    fn ask(&self, q: HumanQuestion) {
        let task = lock(&self.current).clone().filter(|t| !t.is_done());
        match task {
            Some(task) => {
                let message = input::question(&q, unique_id(&format!("{}-ask", task.id)));
                task.ask(q, message);
            }
            None => refuse(q, "no A2A task of the session is open"),
        }
    }
}

/// An exposed agent.
pub(super) struct AgentHost {
    pub name: String,
    pub manifest: Arc<Manifest>,
    cwd: PathBuf,
    spawner: Spawner,
    orchestrator: tokio::sync::Mutex<Option<Orchestrator>>,
    contexts: Mutex<HashMap<String, Arc<Context>>>,
    /// Session URN -> context id, for the questions the tree asks.
    by_urn: Mutex<HashMap<String, String>>,
    pub tasks: Tasks,
    max_contexts: usize,
    opened: AtomicU64,
    closing: AtomicBool,
    /// Whether its journal keeps up.
    health: Arc<Health>,
}

/// Whether an exposed agent's journal keeps up: a turn's end is reported once the
/// journal has it on disk, and a failed write fails the turn (and every later
/// message) saying why — a failed write is a failed turn.
struct Health {
    durable: Option<Durable>,
    faults: Mutex<mpsc::Receiver<DiskFault>>,
    failed: Mutex<Option<String>>,
}

impl Health {
    /// Why the agent stopped, if a write failed.
    fn failed(&self) -> Option<String> {
        if let Some(why) = lock(&self.failed).clone() {
            return Some(why);
        }
        let fault = lock(&self.faults).try_recv().ok()?;
        let why = format!("its journal failed: {fault}");
        tracing::error!("an exposed agent stops: {why}");
        *lock(&self.failed) = Some(why.clone());
        Some(why)
    }

    /// Once what was published so far is on disk: why the agent stopped, if it did.
    async fn settled(&self) -> Option<String> {
        if let Some(d) = &self.durable {
            d.sync().await;
        }
        self.failed()
    }
}

/// What starting an exposed agent needs.
pub(super) struct AgentLaunch {
    pub name: String,
    pub tasks: Tasks,
    pub manifest: Arc<Manifest>,
    pub cwd: PathBuf,
    pub journal: PathBuf,
    pub max_contexts: usize,
    /// The trace the agent's workflow continues.
    pub traceparent: Option<String>,
}

impl AgentHost {
    /// Start the agent's tree (no session yet) and the task that puts its questions
    /// to the clients; `Err` once said on stderr.
    pub(super) async fn start(
        launch: AgentLaunch,
    ) -> Result<Arc<AgentHost>, std::process::ExitCode> {
        let (human, questions) = mpsc::channel(16);
        let setup = capfleet_app::one_session::Setup {
            verb: "a2a",
            agent_type: &launch.name,
            journal: Some(launch.journal),
            policy: Policy::default(),
            human: Some(human),
            traceparent: launch.traceparent,
        };
        let err = capfleet_app::style::Style::for_stderr(capfleet_app::style::ColorChoice::Never);
        let (orchestrator, faults) = capfleet_app::one_session::tree(setup, err).await?;
        let durable = orchestrator.journal_durable().await.map_err(|e| {
            eprintln!("{} {e}", err.err("error:"));
            std::process::ExitCode::FAILURE
        })?;
        let health = Arc::new(Health {
            durable,
            faults: Mutex::new(faults),
            failed: Mutex::new(None),
        });
        let host = Arc::new(AgentHost {
            name: launch.name,
            manifest: launch.manifest,
            cwd: launch.cwd,
            spawner: orchestrator.spawner(),
            orchestrator: tokio::sync::Mutex::new(Some(orchestrator)),
            contexts: Mutex::default(),
            by_urn: Mutex::default(),
            tasks: launch.tasks,
            max_contexts: launch.max_contexts,
            opened: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            health,
        });
        tokio::spawn(ask_clients(Arc::downgrade(&host), questions));
        tokio::spawn(sweep(Arc::downgrade(&host)));
        Ok(host)
    }

    /// A message without a task: the next turn of its context (a new context starts a
    /// session). The subscription is taken before the turn starts.
    pub(super) async fn send(
        &self,
        message: &Value,
        traceparent: Option<&str>,
    ) -> Result<(Arc<Task>, Subscription), RpcError> {
        if let Some(why) = self.health.failed() {
            return Err(RpcError::internal(format!(
                "the exposed agent {} stopped: {why}",
                self.name
            )));
        }
        if self.closing.load(Ordering::Relaxed) {
            return Err(RpcError::draining());
        }
        let prompt = prompt_of(message)?;
        let context_id = message.get("contextId").and_then(Value::as_str);
        let context = match context_id.and_then(|c| lock(&self.contexts).get(c).cloned()) {
            Some(c) => c,
            None => {
                let id = context_id.map_or_else(|| unique_id("ctx"), str::to_owned);
                self.open(id, traceparent).await?
            }
        };
        let task = self.tasks.task(unique_id("task"), context.id.clone());
        {
            let mut current = lock(&context.current);
            if current.as_ref().is_some_and(|t| !t.is_done()) {
                return Err(RpcError::invalid_request(format!(
                    "context {} has a task still running: answer or cancel it first",
                    context.id
                )));
            }
            *current = Some(task.clone());
        }
        *lock(&context.last_used) = Instant::now();
        self.tasks.insert(task.clone());
        let sub = task.subscribe();
        let traceparent = traceparent.map(str::to_owned);
        tokio::spawn(turn(
            context.session.clone(),
            prompt,
            traceparent,
            task.clone(),
        ));
        Ok((task, sub))
    }

    /// A message to `task` while it works: its text joins the turn the task runs (a
    /// steer: `cap.user_input.inject`, a Codex app-server's `turn/steer`) where the
    /// agent takes text mid-turn; refused otherwise (a new turn is a message without
    /// `taskId` once the task ends).
    pub(super) async fn steer(
        &self,
        task: &Task,
        message: &Value,
    ) -> Result<Subscription, RpcError> {
        let prompt = prompt_of(message)?;
        let session = lock(&self.contexts)
            .get(&task.context)
            .map(|c| c.session.clone())
            .ok_or_else(|| RpcError::no_task(&task.id))?;
        let sub = task.subscribe();
        let steered = session
            .call(
                |reply| SessionMsg::Steer {
                    text: prompt,
                    reply,
                },
                None,
            )
            .await;
        let e = match steered {
            Ok(ractor::rpc::CallResult::Success(Ok(()))) => {
                tracing::info!(task = %task.id, "a message steered into the task's turn");
                return Ok(sub);
            }
            Ok(ractor::rpc::CallResult::Success(Err(e))) => e,
            Ok(_) | Err(_) => SessionError::Closed,
        };
        Err(RpcError::unsupported(format!(
            "task {} is working and waits for no input, and the message cannot join its \
             turn ({e}); a new turn is a message without taskId in its context once the \
             task ends",
            task.id
        )))
    }

    async fn open(&self, id: String, traceparent: Option<&str>) -> Result<Arc<Context>, RpcError> {
        self.make_room()?;
        let n = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
        let spec = session_spec(SessionRequest {
            fleet: "a2a",
            name: format!("{}-{n}", self.name),
            manifest: self.manifest.clone(),
            cwd: &self.cwd,
            model: None,
            system_prompt: None,
            permission_mode: None,
            argv: None,
            env: Vec::new(),
            script: None,
        });
        let urn = spec.launch.urn.clone();
        let span = tracing::info_span!(
            parent: None,
            "a2a.context",
            otel.name = %format!("a2a context {}", self.name),
            a2a.context.id = %id,
            cap.agent.type = %self.name,
        );
        if let Some(tp) = traceparent {
            trace::adopt_parent(&span, tp);
        }
        let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let session = self
            .spawner
            .spawn_in(spec, vec![events_tx], Some(span.clone()))
            .await
            .map_err(|e| RpcError::internal(format!("the agent's session could not start: {e}")))?;
        let (questions_tx, questions) = mpsc::channel(16);
        let context = Arc::new(Context {
            id: id.clone(),
            urn: urn.clone(),
            session,
            current: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            span,
            questions: questions_tx,
        });
        tokio::spawn(forward(
            context.clone(),
            events,
            questions,
            self.health.clone(),
        ));
        lock(&self.by_urn).insert(urn, id.clone());
        lock(&self.contexts).insert(id, context.clone());
        Ok(context)
    }

    /// Below the bound of contexts: the least recently used idle one is closed when
    /// needed; refused when every one is busy.
    fn make_room(&self) -> Result<(), RpcError> {
        let mut contexts = lock(&self.contexts);
        if contexts.len() < self.max_contexts {
            return Ok(());
        }
        let oldest = contexts
            .values()
            .filter(|c| !c.busy())
            .min_by_key(|c| *lock(&c.last_used))
            .map(|c| c.id.clone());
        let Some(id) = oldest else {
            return Err(RpcError::busy(format!(
                "{} conversations are running (--max-sessions); retry later",
                contexts.len()
            )));
        };
        let closed = contexts.remove(&id);
        drop(contexts);
        if let Some(c) = closed {
            self.forget(&c);
        }
        Ok(())
    }

    /// Close context `c`, already out of the table.
    fn forget(&self, c: &Context) {
        lock(&self.by_urn).remove(&c.urn);
        c.close();
    }

    /// Cancel task `task`'s turn: its open questions are answered fail-safe first.
    pub(super) fn cancel(&self, task: &Task) {
        for q in task.drain_questions() {
            refuse(q, "the A2A client cancelled the task");
        }
        if let Some(c) = lock(&self.contexts).get(&task.context) {
            let _gone = c.session.cast(SessionMsg::Cancel {
                scope: CancelScope::CurrentTurn,
                reason: "CancelTask from the A2A client".into(),
            });
        }
    }

    /// Take no new message.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Some context has a turn in flight.
    pub(super) fn busy(&self) -> bool {
        lock(&self.contexts).values().any(|c| c.busy())
    }

    /// Cancel every turn in flight.
    pub(super) fn cancel_all(&self) {
        let open: Vec<Arc<Task>> = lock(&self.contexts)
            .values()
            .filter_map(|c| lock(&c.current).clone())
            .filter(|t| !t.is_done())
            .collect();
        for t in open {
            self.cancel(&t);
        }
    }

    /// Stop taking messages, close every context and stop the tree; a task still
    /// open then is cancelled.
    pub(super) async fn shutdown(&self) {
        self.closing.store(true, Ordering::Relaxed);
        let contexts: Vec<Arc<Context>> = lock(&self.contexts).drain().map(|(_, c)| c).collect();
        lock(&self.by_urn).clear();
        for c in &contexts {
            if let Some(t) = lock(&c.current).clone() {
                for q in t.drain_questions() {
                    refuse(q, "the server is shutting down");
                }
            }
        }
        let orchestrator = self.orchestrator.lock().await.take();
        if let Some(o) = orchestrator {
            let kept = o.finish().await;
            if kept.lost > 0 {
                tracing::error!(agent = %self.name, "the exposed agent's journal lost {} records", kept.lost);
            }
        }
        for c in contexts {
            trace::end(&c.span);
            if let Some(t) = lock(&c.current).clone() {
                t.publish(Feed::default().end(
                    &t,
                    TaskState::Canceled,
                    Some("the server shut down".into()),
                ));
            }
        }
    }
}

/// One turn of `session` for `task`, a child of the message's `traceparent` when it
/// has one (else of the context's session); a turn that could not run fails the task
/// (one that ran ends it through its `turn_ended` event).
async fn turn(
    session: ActorRef<SessionMsg>,
    prompt: String,
    traceparent: Option<String>,
    task: Arc<Task>,
) {
    let asked = session
        .call(
            |reply| SessionMsg::Ask {
                prompt,
                traceparent,
                reply,
            },
            None,
        )
        .await;
    let why = match asked {
        Ok(ractor::rpc::CallResult::Success(Ok(_))) => return,
        Ok(ractor::rpc::CallResult::Success(Err(e))) => e.to_string(),
        Ok(_) | Err(_) => SessionError::Closed.to_string(),
    };
    if !task.is_done() {
        task.publish(Feed::default().end(&task, TaskState::Failed, Some(why)));
    }
}

/// The context's events to its current task, each task with a feed of its own, and
/// its session's questions, each asked once the events before it are forwarded.
async fn forward(
    context: Arc<Context>,
    mut events: mpsc::Receiver<Published>,
    mut questions: mpsc::Receiver<HumanQuestion>,
    health: Arc<Health>,
) {
    let mut feed: Option<(String, Feed)> = None;
    let mut gate = Gate::default();
    let mut asking = true;
    loop {
        let due = gate.due();
        tokio::select! {
            e = events.recv() => {
                let Some(e) = e else { break };
                let current = lock(&context.current).clone();
                if let Some(task) = current {
                    if feed.as_ref().is_none_or(|(id, _)| *id != task.id) {
                        feed = Some((task.id.clone(), Feed::default()));
                    }
                    if let Some((_, f)) = feed.as_mut() {
                        let update = if matches!(e.body, EventBody::TurnStarted { .. }) {
                            Some(Update::Status { state: TaskState::Working, message: None })
                        } else {
                            f.agent_event(&task, &e)
                        };
                        if let Some(mut u) = update {
                            if u.is_terminal()
                                && let Some(why) = health.settled().await
                            {
                                let why = format!("the exposed agent stopped: {why}");
                                u = Feed::default().end(&task, TaskState::Failed, Some(why));
                            }
                            task.publish(u);
                        }
                    }
                }
                if let EventBody::Cap { event } = &e.body {
                    for q in gate.on_event(event) {
                        context.ask(q);
                    }
                }
            }
            q = questions.recv(), if asking => match q {
                Some(q) => {
                    if let Some(q) = gate.on_question(q) {
                        context.ask(q);
                    }
                }
                None => asking = false,
            },
            () = sleep_until(due), if due.is_some() => {
                for q in gate.overdue() {
                    context.ask(q);
                }
            }
        }
    }
    for q in gate.drain() {
        refuse(q, "the session ended");
    }
}

/// `at`, or never.
pub(super) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The questions the tree leaves open go to their session's context.
async fn ask_clients(
    host: std::sync::Weak<AgentHost>,
    mut questions: mpsc::Receiver<HumanQuestion>,
) {
    while let Some(q) = questions.recv().await {
        let Some(host) = host.upgrade() else {
            refuse(q, "the exposed agent is gone");
            continue;
        };
        let id = lock(&host.by_urn).get(&*q.urn).cloned();
        let context = id.and_then(|id| lock(&host.contexts).get(&id).cloned());
        let Some(context) = context else {
            refuse(q, "no A2A context holds the session");
            continue;
        };
        if let Err(e) = context.questions.try_send(q) {
            refuse(e.into_inner(), "too many questions wait on the context");
        }
    }
}

/// Close the contexts idle for [`IDLE`], every minute.
async fn sweep(host: std::sync::Weak<AgentHost>) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tick.tick().await;
        let Some(host) = host.upgrade() else { return };
        let idle: Vec<Arc<Context>> = {
            let mut contexts = lock(&host.contexts);
            let ids: Vec<String> = contexts
                .values()
                .filter(|c| !c.busy() && lock(&c.last_used).elapsed() >= IDLE)
                .map(|c| c.id.clone())
                .collect();
            ids.iter().filter_map(|id| contexts.remove(id)).collect()
        };
        for c in idle {
            host.forget(&c);
        }
    }
}
