//! A tool call journaled in the run it touches, without the caller waiting for the
//! disk: a run live here takes it on its `…/mcp` stream (the engine's
//! [`CallLog`]: batched and synced with the run's other records); a run that is not
//! running anywhere gets it appended to its journal by a blocking task after the
//! call has been answered; a run another capfleet is running is left alone (its
//! journal has one writer), said at debug level.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use capfleet_app::fleet::run_dir::{Orchestrator, RunDir};
use capfleet_engine::run::calls::{CallLog, OutsideCall};
use serde_json::json;

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

/// Append `calls` to the journal of the run in `dir` once nothing runs it, on a
/// blocking task (each append is synced): never on a caller's path.
pub fn append_later(id: String, dir: PathBuf, calls: Vec<OutsideCall>) {
    if calls.is_empty() {
        return;
    }
    tokio::task::spawn_blocking(move || {
        let run = RunDir { id, path: dir };
        if matches!(run.orchestrator(), Orchestrator::Running) {
            tracing::debug!(run = %run.id, "tool calls not journaled: another capfleet runs it");
            return;
        }
        for c in calls {
            let record = json!({
                "type": "mcp_call",
                "by": c.by,
                "tool": c.tool,
                "args_bytes": c.args_bytes,
                "ok": c.error.is_none(),
                "error": c.error,
            });
            if let Err(e) = run.append(record) {
                tracing::warn!(run = %run.id, "journaling a tool call: {e}");
                return;
            }
        }
    });
}
