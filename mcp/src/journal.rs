//! A tool call journaled in the run it touches, without the caller waiting for the
//! disk: a run live here takes it on its `…/mcp` stream (the engine's
//! [`CallLog`]: batched and synced with the run's other records); a run that is not
//! running anywhere gets it appended to its journal after the call has been
//! answered, by the process's one writer of such calls, a group commit
//! ([`append_later`]); a run another capfleet is running is left alone (its journal
//! has one writer), said at debug level.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use capfleet_app::fleet::run_dir::{Orchestrator, RunDir};
use capfleet_engine::run::calls::{CallLog, OutsideCall};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;

/// Calls held for a run whose journal is not up yet (queued, provisioning), at most.
const WAITING_MAX: usize = 64;

enum Slot {
    /// The run's journal is not up yet: its calls wait.
    Waiting(Vec<OutsideCall>),
    Live(CallLog),
    /// The run has ended here.
    Closed,
}

/// Where the calls on one run of this process go.
pub struct CallSlot(Mutex<Slot>);

impl Default for CallSlot {
    fn default() -> Self {
        CallSlot(Mutex::new(Slot::Waiting(Vec::new())))
    }
}

impl CallSlot {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Journal `call`; false once the run has ended here (then append it).
    pub fn record(&self, call: OutsideCall) -> bool {
        match &mut *self.lock() {
            Slot::Waiting(calls) => {
                if calls.len() < WAITING_MAX {
                    calls.push(call);
                } else {
                    tracing::warn!(tool = %call.tool, "a tool call not journaled: the run's journal is not up and {WAITING_MAX} wait");
                }
                true
            }
            Slot::Live(log) => {
                if !log.record(call) {
                    tracing::warn!(
                        "a tool call not journaled: the run's call log is full or ended"
                    );
                }
                true
            }
            Slot::Closed => false,
        }
    }

    /// The run's journal is up: the calls that waited go to it first.
    pub fn live(&self, log: CallLog) {
        let mut slot = self.lock();
        if let Slot::Waiting(calls) = &mut *slot {
            for call in calls.drain(..) {
                let _full = log.record(call);
            }
            *slot = Slot::Live(log);
        }
    }

    /// The run has ended: what still waited (its journal never came up), to append.
    pub fn close(&self) -> Vec<OutsideCall> {
        match std::mem::replace(&mut *self.lock(), Slot::Closed) {
            Slot::Waiting(calls) => calls,
            Slot::Live(_) | Slot::Closed => Vec::new(),
        }
    }
}

/// Batches of late calls waiting for the writer, at most: the writer takes them all
/// at once; a batch that finds the queue full waits for room (never dropped).
const LATE_MAX: usize = 1024;

/// Calls to append to the journal of a run that is not live here.
struct Late {
    run: RunDir,
    calls: Vec<OutsideCall>,
}

/// The process's one writer of late calls: one, so that no two appends to a journal
/// from here ever overlap; started on first use in the runtime of its caller (again
/// if that runtime has gone).
static WRITER: Mutex<Option<Writer>> = Mutex::new(None);

struct Writer {
    tx: mpsc::Sender<Late>,
    task: JoinHandle<()>,
}

fn writer() -> MutexGuard<'static, Option<Writer>> {
    WRITER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Append `calls` to the journal of the run in `dir` once nothing runs it, never on
/// a caller's path. Durability: a group commit. The writer takes every batch that
/// came while it wrote the last group and appends each run's share in one write and
/// one sync, so that a record is on disk about one sync after the call was answered,
/// not before. That is enough for these records: the calls that reach a run not live
/// here read it (`run_status`, `wait_run`, `session_diff`) or are refused; nothing
/// the client was told rests on the record, and the state-changing calls go to live
/// runs, whose `…/mcp` stream the engine's journal batches and syncs. A failed write
/// is warned with the run and the number of records lost, never dropped unsaid.
pub fn append_later(id: String, dir: PathBuf, calls: Vec<OutsideCall>) {
    if calls.is_empty() {
        return;
    }
    let late = Late {
        run: RunDir { id, path: dir },
        calls,
    };
    let tx = {
        let mut writer = writer();
        match &*writer {
            Some(w) if !w.tx.is_closed() => w.tx.clone(),
            _ => {
                let (tx, rx) = mpsc::channel(LATE_MAX);
                let task = tokio::spawn(write_late(rx));
                *writer = Some(Writer {
                    tx: tx.clone(),
                    task,
                });
                tx
            }
        }
    };
    match tx.try_send(late) {
        Ok(()) => {}
        // The writer is behind by a whole group: these calls wait for room rather
        // than be lost (they may land one group after calls made later).
        Err(TrySendError::Full(late)) => {
            tracing::debug!(run = %late.run.id, "tool calls wait: {LATE_MAX} batches came during one write to the disk");
            tokio::spawn(async move {
                if let Err(mpsc::error::SendError(late)) = tx.send(late).await {
                    warn_lost(&late);
                }
            });
        }
        Err(TrySendError::Closed(late)) => warn_lost(&late),
    }
}

fn warn_lost(late: &Late) {
    tracing::warn!(run = %late.run.id, lost = late.calls.len(), "tool calls not journaled: the writer has ended");
}

/// Wait until every call given to [`append_later`] so far is written (a server's
/// last step: the runtime's end would drop what still waits).
pub async fn late_calls_written() {
    let Some(Writer { tx, task }) = writer().take() else {
        return;
    };
    // The writer ends once the calls queued before this are written.
    drop(tx);
    if let Err(e) = task.await {
        tracing::warn!("journaling tool calls: the writer failed: {e}");
    }
}

/// The writer: each group of batches, one blocking write per run.
async fn write_late(mut rx: mpsc::Receiver<Late>) {
    let mut group = Vec::with_capacity(LATE_MAX);
    while rx.recv_many(&mut group, LATE_MAX).await > 0 {
        let taken = std::mem::take(&mut group);
        if let Err(e) = tokio::task::spawn_blocking(move || append_group(taken)).await {
            tracing::warn!("journaling tool calls: the writer failed: {e}");
        }
    }
}

/// Each run's calls of `group`, in the order they came, appended in one write.
fn append_group(group: Vec<Late>) {
    let mut runs: Vec<(RunDir, Vec<OutsideCall>)> = Vec::new();
    for late in group {
        match runs.iter_mut().find(|(run, _)| *run == late.run) {
            Some((_, calls)) => calls.extend(late.calls),
            None => runs.push((late.run, late.calls)),
        }
    }
    for (run, calls) in runs {
        if matches!(run.orchestrator(), Orchestrator::Running) {
            tracing::debug!(run = %run.id, "tool calls not journaled: another capfleet runs it");
            continue;
        }
        let lost = calls.len();
        let records = calls.into_iter().map(|c| {
            json!({
                "type": "mcp_call",
                "by": c.by,
                "tool": c.tool,
                "args_bytes": c.args_bytes,
                "ok": c.error.is_none(),
                "error": c.error,
            })
        });
        if let Err(e) = run.append_all(records) {
            tracing::warn!(run = %run.id, lost, "journaling tool calls: {e}");
        }
    }
}
