//! The server's state: its runs (each a [`RunEntry`]: where it stands, what its
//! sessions did so far, how to stop it) and admission — at most `max_runs` running
//! and `max_sessions` sessions live, the next runs waiting in a FIFO queue of at most
//! `queue`, beyond it refused. Every change happens under one lock, held for no await.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use capfleet_engine::run::Stop;
use capfleet_engine::telemetry::metrics::Metrics;
use capfleet_wire::clock::now_ms;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use utoipa::ToSchema;

use super::auth::{Failures, Role, Tokens};
use super::metrics::ServerMetrics;
use capfleet_app::fleet::Fleet;
use capfleet_app::fleet::run_dir::{RunDir, RunLock};
use capfleet_app::sandboxing::{Confinement, SandboxRule};
use capfleet_app::tally::Seen;

/// Admission limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_runs: usize,
    pub max_sessions: usize,
    pub queue: usize,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunState {
    Queued,
    Running,
    Completed,
    /// A session failed, the budget was exceeded, the disk failed.
    Failed,
    /// Cancelled (by a client or the shutdown) or stopped by a signal.
    Interrupted,
}

impl RunState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Interrupted => "interrupted",
        }
    }

    pub(crate) fn ended(self) -> bool {
        !matches!(self, RunState::Queued | RunState::Running)
    }
}

/// What a run has come to so far.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub state: RunState,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    /// The engine's outcome (`completed`, `session_failed`, …) once ended.
    pub outcome: Option<String>,
    pub exit_code: Option<u8>,
    /// Why it failed before any agent started (a workspace that could not be made).
    pub error: Option<String>,
    /// Who cancelled it (a token's name, or `shutdown`).
    pub cancelled_by: Option<String>,
    /// Every event its sessions published, counted.
    pub seen: Seen,
    /// The fleet's spend at the end (the budget actor's sum).
    pub spent_usd: Option<f64>,
}

/// One run of this server.
pub(crate) struct RunEntry {
    pub id: String,
    pub fleet: String,
    /// The sessions' names and URNs, in the fleet's order.
    pub sessions: Vec<(String, Arc<str>)>,
    pub budget_usd: Option<f64>,
    pub created_ms: u64,
    /// The token that submitted it.
    pub submitted_by: String,
    pub dir: PathBuf,
    /// What its sessions wait for an answer to.
    pub asks: Arc<super::asks::Asks>,
    /// Its fleet's sessions and routes.
    pub graph: super::graph::FleetGraph,
    /// The trace its spans are in, once it started (when traces are exported).
    pub trace_id: std::sync::OnceLock<String>,
    /// Where the MCP tool calls on it are journaled.
    pub calls: capfleet_mcp::CallSlot,
    progress: Mutex<Progress>,
    /// Stops the run (a queued run's stop waits in the channel until it starts).
    stop: mpsc::Sender<Stop>,
    /// Bumped at each change of state; the event streams end once it is ended.
    changed: watch::Sender<RunState>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RunEntry {
    pub(crate) fn progress(&self) -> Progress {
        lock(&self.progress).clone()
    }

    /// Change the progress under its lock (no await inside `f`).
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Progress) -> R) -> R {
        let mut p = lock(&self.progress);
        let r = f(&mut p);
        let state = p.state;
        drop(p);
        self.changed.send_if_modified(|s| {
            let new = *s != state;
            *s = state;
            new
        });
        r
    }

    /// Watch its state.
    pub(crate) fn watch(&self) -> watch::Receiver<RunState> {
        self.changed.subscribe()
    }

    pub(crate) fn journal(&self) -> PathBuf {
        self.dir.join(capfleet_app::fleet::run_dir::JOURNAL_FILE)
    }
}

/// What a queued run starts with.
pub(crate) struct Pending {
    pub entry: Arc<RunEntry>,
    pub fleet: Fleet,
    pub run: RunDir,
    pub lock: RunLock,
    pub stops: mpsc::Receiver<Stop>,
    pub hooks: super::driver::RunHooks,
    /// The submitter's W3C trace context, which the run's span continues.
    pub traceparent: Option<String>,
}

/// What became of a submission.
pub(crate) enum Admission {
    /// Starts now.
    Now(Box<Pending>),
    /// Waits; its position in the queue (1 = next).
    Queued(usize),
    Full {
        running: usize,
        queued: usize,
    },
    Draining,
}

/// What a cancel did.
pub(crate) enum Cancelled {
    /// It was queued: it never starts.
    Dequeued,
    /// It runs: the stop was sent.
    Stopping,
    Ended(RunState),
    NotFound,
}

#[derive(Default)]
struct Table {
    runs: BTreeMap<String, Arc<RunEntry>>,
    queue: VecDeque<Pending>,
    running: usize,
    live_sessions: usize,
    draining: bool,
}

pub(crate) struct Server {
    pub runs_dir: PathBuf,
    pub tokens: Tokens,
    pub failures: Failures,
    pub limits: Limits,
    /// How long a question waits for a client before its fail-safe answer (unless
    /// the fleet says its own `ask_timeout`).
    pub ask_timeout: std::time::Duration,
    /// Where a submission's `cwd` may be (canonical).
    pub allow_roots: Vec<PathBuf>,
    /// `--allow-unsandboxed`: an admin token's fleet may say `sandbox = "none"`.
    pub allow_unsandboxed: bool,
    /// The server's own files, hidden from every sandbox it gives.
    pub hidden: Vec<PathBuf>,
    /// The hosts and origins the server answers ([`super::origin`]).
    pub origins: Arc<super::origin::Origins>,
    /// The server's webhook (`--notify`), for every run.
    pub notifier: capfleet_app::notify::Notifier,
    /// The Jaeger UI runs link their traces to (`--trace-ui`, no trailing `/`).
    pub trace_ui: Option<String>,
    pub fleet_metrics: Metrics,
    pub metrics: ServerMetrics,
    /// With `--nats`: where submissions are queued (and the streams' replicas).
    pub queue: Option<(capfleet_app::nats::Nats, usize)>,
    table: Mutex<Table>,
    /// The number of runs running or queued, for the drain to wait on.
    busy: watch::Sender<usize>,
}

impl Server {
    pub(crate) fn new(
        runs_dir: PathBuf,
        tokens: Tokens,
        limits: Limits,
        fleet_metrics: Metrics,
    ) -> Server {
        Server {
            runs_dir,
            tokens,
            failures: Failures::default(),
            limits,
            ask_timeout: std::time::Duration::from_secs(600),
            allow_roots: Vec::new(),
            allow_unsandboxed: false,
            hidden: Vec::new(),
            origins: Arc::default(),
            notifier: capfleet_app::notify::Notifier::default(),
            trace_ui: None,
            fleet_metrics,
            metrics: ServerMetrics::new(),
            queue: None,
            table: Mutex::new(Table::default()),
            busy: watch::Sender::new(0),
        }
    }

    /// What a submission by a token of `role` may say of its sandbox (none: a
    /// token this server no longer knows): `"none"` only for `admin` on a server
    /// started with `--allow-unsandboxed`; the server's files hidden either way.
    pub(crate) fn confinement(&self, role: Option<Role>) -> Confinement {
        let rule = if self.allow_unsandboxed && role == Some(Role::Admin) {
            SandboxRule::NoneAllowed
        } else {
            SandboxRule::Workspace
        };
        Confinement {
            rule,
            hidden: self.hidden.clone(),
        }
    }

    /// A new entry for a validated fleet about to be admitted, and its stop channel.
    pub(crate) fn entry(
        fleet: &Fleet,
        run: &RunDir,
        submitted_by: &str,
    ) -> (Arc<RunEntry>, mpsc::Receiver<Stop>) {
        Server::entry_created(fleet, run, submitted_by, now_ms())
    }

    /// [`Server::entry`] for a run submitted at `created_ms` (a queued run taken up
    /// again after a restart).
    pub(crate) fn entry_created(
        fleet: &Fleet,
        run: &RunDir,
        submitted_by: &str,
        created_ms: u64,
    ) -> (Arc<RunEntry>, mpsc::Receiver<Stop>) {
        let (stop, stops) = mpsc::channel(4);
        let sessions = fleet
            .sessions
            .iter()
            .map(|s| (s.spec.name.clone(), Arc::from(s.spec.urn())))
            .collect();
        let entry = RunEntry {
            id: run.id.clone(),
            fleet: fleet.name.clone(),
            sessions,
            budget_usd: fleet.budgets.total_usd,
            created_ms,
            submitted_by: submitted_by.to_owned(),
            dir: run.path.clone(),
            asks: Arc::default(),
            graph: super::graph::FleetGraph::of(fleet),
            trace_id: std::sync::OnceLock::new(),
            calls: capfleet_mcp::CallSlot::default(),
            progress: Mutex::new(Progress {
                state: RunState::Queued,
                started_ms: None,
                ended_ms: None,
                outcome: None,
                exit_code: None,
                error: None,
                cancelled_by: None,
                seen: Seen::default(),
                spent_usd: None,
            }),
            stop,
            changed: watch::Sender::new(RunState::Queued),
        };
        (Arc::new(entry), stops)
    }

    /// Admit `pending` now, queue it, or refuse it.
    pub(crate) fn admit(&self, pending: Pending) -> Admission {
        self.admission(pending, self.limits.queue)
    }

    /// Admit a run queued before a restart: now, or queued whatever the queue's
    /// length (it was answered `queued` once).
    pub(crate) fn readmit(&self, pending: Pending) -> Admission {
        self.admission(pending, usize::MAX)
    }

    fn admission(&self, pending: Pending, queue: usize) -> Admission {
        let mut t = lock(&self.table);
        if t.draining {
            return Admission::Draining;
        }
        let sessions = pending.entry.sessions.len();
        let fits = t.queue.is_empty() && self.fits(&t, sessions);
        let admission = if fits {
            t.running += 1;
            t.live_sessions += sessions;
            t.runs
                .insert(pending.entry.id.clone(), pending.entry.clone());
            pending.entry.update(|p| {
                p.state = RunState::Running;
                p.started_ms = Some(now_ms());
            });
            Admission::Now(Box::new(pending))
        } else if t.queue.len() < queue {
            t.runs
                .insert(pending.entry.id.clone(), pending.entry.clone());
            t.queue.push_back(pending);
            Admission::Queued(t.queue.len())
        } else {
            return Admission::Full {
                running: t.running,
                queued: t.queue.len(),
            };
        };
        self.counted(&t);
        admission
    }

    fn fits(&self, t: &Table, sessions: usize) -> bool {
        t.running < self.limits.max_runs && t.live_sessions + sessions <= self.limits.max_sessions
    }

    /// A run has ended: free its share, and take the queued runs that fit now, in order.
    pub(crate) fn finished(&self, entry: &RunEntry) -> Vec<Pending> {
        let mut t = lock(&self.table);
        t.running = t.running.saturating_sub(1);
        t.live_sessions = t.live_sessions.saturating_sub(entry.sessions.len());
        let mut start = Vec::new();
        while let Some(next) = t.queue.front() {
            let sessions = next.entry.sessions.len();
            if t.draining || !self.fits(&t, sessions) {
                break;
            }
            t.running += 1;
            t.live_sessions += sessions;
            if let Some(p) = t.queue.pop_front() {
                p.entry.update(|p| {
                    p.state = RunState::Running;
                    p.started_ms = Some(now_ms());
                });
                start.push(p);
            }
        }
        self.counted(&t);
        start
    }

    fn counted(&self, t: &Table) {
        let (running, queued) = (t.running, t.queue.len());
        self.metrics
            .running
            .set(i64::try_from(running).unwrap_or(i64::MAX));
        self.metrics
            .queued
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
        self.busy.send_replace(running + queued);
    }

    /// The position of a queued run (1 = next).
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        let t = lock(&self.table);
        t.queue.iter().position(|p| p.entry.id == id).map(|i| i + 1)
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<RunEntry>> {
        lock(&self.table).runs.get(id).cloned()
    }

    /// Every run of this server, by id (oldest first).
    pub(crate) fn all(&self) -> Vec<Arc<RunEntry>> {
        lock(&self.table).runs.values().cloned().collect()
    }

    /// Cancel run `id` on behalf of `by`.
    pub(crate) fn cancel(&self, id: &str, by: &str) -> Cancelled {
        let mut t = lock(&self.table);
        let Some(entry) = t.runs.get(id).cloned() else {
            return Cancelled::NotFound;
        };
        if let Some(i) = t.queue.iter().position(|p| p.entry.id == id) {
            if let Some(p) = t.queue.remove(i) {
                dequeued(&p.run, &p.entry, by);
            }
            self.counted(&t);
            return Cancelled::Dequeued;
        }
        drop(t);
        let state = entry.progress().state;
        if state == RunState::Queued {
            // Kept on disk for the next start (the server drains): it never starts.
            let run = RunDir {
                id: entry.id.clone(),
                path: entry.dir.clone(),
            };
            dequeued(&run, &entry, by);
            return Cancelled::Dequeued;
        }
        if state.ended() {
            return Cancelled::Ended(state);
        }
        entry.update(|p| p.cancelled_by.get_or_insert_with(|| by.to_owned()).clone());
        let _full_or_ended = entry
            .stop
            .try_send(Stop::Cancel(format!("cancelled by {by}")));
        Cancelled::Stopping
    }

    /// Stop taking runs. The queued ones start no more here: a submission's stays
    /// queued on disk for the next start (`super::queued`); one started for an A2A
    /// client (whose task ends with this server) never starts, said in its journal.
    pub(crate) fn drain(&self) {
        let mut t = lock(&self.table);
        t.draining = true;
        for p in std::mem::take(&mut t.queue) {
            if p.run.is_queued() {
                tracing::info!(run = %p.entry.id, "stays queued for the next start");
            } else {
                dequeued(&p.run, &p.entry, "shutdown");
            }
        }
        self.counted(&t);
    }

    pub(crate) fn draining(&self) -> bool {
        lock(&self.table).draining
    }

    /// Cancel every run still running, on behalf of `by` (a queued one stays queued
    /// for the next start).
    pub(crate) fn cancel_all(&self, by: &str) {
        for e in self.all() {
            if e.progress().state == RunState::Running {
                let _said = self.cancel(&e.id, by);
            }
        }
    }

    /// Resolves once no run runs or waits.
    pub(crate) async fn idle(&self) {
        let mut busy = self.busy.subscribe();
        let _closed = busy.wait_for(|n| *n == 0).await;
    }
}

/// A run id names a directory of the runs directory, nothing else.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// A queued run that will never start: ended in its journal as interrupted, by `by`
/// (as a restarted server reads it back), its queued marker gone.
fn dequeued(run: &RunDir, entry: &RunEntry, by: &str) {
    let code = capfleet_app::launch::EXIT_INTERRUPTED;
    let record = serde_json::json!({
        "type": "run_ended",
        "run_id": run.id,
        "exit_code": code,
        "outcome": RunState::Interrupted.as_str(),
        "reason": format!("cancelled by {by} before it started"),
    });
    if let Err(e) = run.append(record) {
        tracing::error!(run = %entry.id, "ending a dequeued run's journal: {e}");
    }
    super::queued::started(run);
    capfleet_mcp::append_later(entry.id.clone(), entry.dir.clone(), entry.calls.close());
    entry.update(|pr| {
        pr.state = RunState::Interrupted;
        pr.ended_ms = Some(now_ms());
        pr.exit_code = Some(code);
        pr.outcome = Some(RunState::Interrupted.as_str().to_owned());
        pr.cancelled_by = Some(by.to_owned());
    });
}
