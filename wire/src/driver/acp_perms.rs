//! Open ACP permission requests of one driver: each waits on a oneshot for the CAP
//! decision (or `None`: cancelled). `allow_always` is remembered per session and
//! tool. Also the [`Approver`] of vetted terminal commands (coding §7.2), which asks
//! through the same path. A waiter that goes away unanswered (the agent cancelled
//! its request with `$/cancel_request`) takes its request off the table through
//! [`Open`], and the session is told it was withdrawn.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::oneshot;

use super::{DriverOutput, OutputSink};
use crate::protocol::{CapEvent, Decision, RiskLevel};
use crate::rpc::{Approver, CommandApproval};
use crate::sync::lock;

/// The tool name CAP shows for vetted terminal commands.
pub(super) const TERMINAL_TOOL: &str = "terminal.create";

pub(super) struct Perms {
    sink: OutputSink,
    seq: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Option<Decision>>>>,
    always: Mutex<HashSet<String>>,
}

impl Perms {
    pub(super) fn new(sink: OutputSink) -> Arc<Self> {
        Arc::new(Perms {
            sink,
            seq: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            always: Mutex::new(HashSet::new()),
        })
    }

    pub(super) fn sink(&self) -> &OutputSink {
        &self.sink
    }

    /// Was `allow_always` given for this tool in this session?
    pub(super) fn always_allowed(&self, tool: &str) -> bool {
        lock(&self.always).contains(tool)
    }

    /// Emit a `cap.permission.request` and wait for its answer (`None`: cancelled).
    pub(super) async fn ask(
        &self,
        tool: &str,
        intent: serde_json::Value,
        risk: RiskLevel,
    ) -> Option<Decision> {
        let req_id = format!("acp-perm-{}", self.seq.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(req_id.clone(), tx);
        let open = Open::new(&self.pending, &self.sink, req_id.clone());
        let event = CapEvent::permission_request(&req_id, tool, Some(intent), risk);
        if !self.sink.send_one(DriverOutput::Event(event)).await {
            lock(&self.pending).remove(&req_id);
            return None;
        }
        let decision = rx.await.ok().flatten();
        drop(open);
        if decision == Some(Decision::AllowAlways) {
            lock(&self.always).insert(tool.to_owned());
        }
        decision
    }

    /// Deliver a decision; false if the request is unknown (already answered/cancelled).
    pub(super) fn answer(&self, req_id: &str, decision: Decision) -> bool {
        match lock(&self.pending).remove(req_id) {
            Some(tx) => tx.send(Some(decision)).is_ok(),
            None => false,
        }
    }

    /// Answer every open request `cancelled` (ACP requires it on `session/cancel`);
    /// the session is told each was withdrawn.
    pub(super) async fn cancel_all(&self) {
        let open: Vec<_> = lock(&self.pending).drain().collect();
        let mut withdrawn = Vec::with_capacity(open.len());
        for (req_id, tx) in open {
            let _gone = tx.send(None);
            withdrawn.push(DriverOutput::Withdrawn { req_id });
        }
        self.sink.send(withdrawn).await;
    }
}

/// An open request (a permission, an ask) in `table` while its waiter waits: should
/// the waiter be dropped with the request still there, the request is taken off and
/// the session told it was withdrawn (from a task: a drop cannot wait on the sink).
pub(super) struct Open<'a, T> {
    table: &'a Mutex<HashMap<String, oneshot::Sender<T>>>,
    sink: &'a OutputSink,
    id: String,
}

impl<'a, T> Open<'a, T> {
    pub(super) fn new(
        table: &'a Mutex<HashMap<String, oneshot::Sender<T>>>,
        sink: &'a OutputSink,
        id: String,
    ) -> Self {
        Open { table, sink, id }
    }
}

impl<T> Drop for Open<'_, T> {
    fn drop(&mut self) {
        if lock(self.table).remove(&self.id).is_none() {
            return; // answered or withdrawn already
        }
        let (sink, req_id) = (self.sink.clone(), std::mem::take(&mut self.id));
        tracing::info!(%req_id, "request cancelled by the agent, withdrawn");
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { sink.send_one(DriverOutput::Withdrawn { req_id }).await });
        }
    }
}

/// Terminal vetting asks through the permission path.
pub(super) struct TerminalApprover(pub Arc<Perms>);

impl Approver for TerminalApprover {
    fn approve(&self, req: CommandApproval) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        let perms = self.0.clone();
        Box::pin(async move {
            if perms.always_allowed(TERMINAL_TOOL) {
                return true;
            }
            let intent = json!({ "command": req.command_line, "cwd": req.cwd });
            matches!(
                perms.ask(TERMINAL_TOOL, intent, RiskLevel::High).await,
                Some(Decision::AllowOnce | Decision::AllowAlways)
            )
        })
    }
}
