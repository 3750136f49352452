//! The session side of the reverse RPC for the ACP driver ([`Host`]): events and
//! audit records go out through the driver's credit-bounded sink; asks (`cap.user_io.input`, ACP
//! form elicitations) become `cap.ask_user` answered by the session
//! (`DriverMsg::Answer`: a value, or `None` declined), or withdrawn on cancel,
//! agent death or stop, or when the agent cancels its request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use super::acp_perms::Open;
use super::{DriverOutput, OutputSink};
use crate::protocol::CapEvent;
use crate::rpc::host::{BoxFuture, Reply};
use crate::rpc::{Audited, Host};
use crate::sync::lock;

pub struct SessionHost {
    sink: OutputSink,
    seq: AtomicU64,
    asks: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
}

impl SessionHost {
    pub fn new(sink: OutputSink) -> Arc<Self> {
        Arc::new(SessionHost {
            sink,
            seq: AtomicU64::new(1),
            asks: Mutex::new(HashMap::new()),
        })
    }

    /// Deliver an answer (`None`: declined); false if the ask is unknown (answered
    /// or withdrawn).
    pub fn answer(&self, ask_id: &str, value: Option<Value>) -> bool {
        match lock(&self.asks).remove(ask_id) {
            Some(tx) => tx
                .send(value.map_or(Reply::Declined, Reply::Answered))
                .is_ok(),
            None => false,
        }
    }

    /// Withdraw every open ask; the session is told each was withdrawn.
    pub async fn cancel_all(&self) {
        let open: Vec<_> = lock(&self.asks).drain().collect();
        let withdrawn = open
            .into_iter()
            .map(|(req_id, tx)| {
                let _gone = tx.send(Reply::Withdrawn);
                DriverOutput::Withdrawn { req_id }
            })
            .collect();
        self.sink.send(withdrawn).await;
    }
}

impl Host for Arc<SessionHost> {
    fn publish(&self, event: CapEvent) -> BoxFuture<bool> {
        let sink = self.sink.clone();
        Box::pin(async move { sink.send_one(DriverOutput::Event(event)).await })
    }

    fn audit(&self, record: Audited) -> BoxFuture<bool> {
        let sink = self.sink.clone();
        Box::pin(async move { sink.send_one(DriverOutput::Audit(record)).await })
    }

    fn ask(&self, prompt: String, form: Option<Value>) -> BoxFuture<Reply> {
        let me = self.clone();
        Box::pin(async move {
            let ask_id = format!("acp-ask-{}", me.seq.fetch_add(1, Ordering::Relaxed));
            let (tx, rx) = oneshot::channel();
            lock(&me.asks).insert(ask_id.clone(), tx);
            let _open = Open::new(&me.asks, &me.sink, ask_id.clone());
            let event = CapEvent::ask_user(&ask_id, prompt, form);
            if !me.sink.send_one(DriverOutput::Event(event)).await {
                lock(&me.asks).remove(&ask_id);
                return Reply::Withdrawn;
            }
            rx.await.unwrap_or(Reply::Withdrawn)
        })
    }
}
