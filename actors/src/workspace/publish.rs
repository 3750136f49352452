//! The workspace records' own stream: artifacts and vetting warnings published
//! under `cap://<fleet>/workspace` (numbered like a session's events), each naming
//! its session in `_meta."capfleet.session"`, to the journal and the run's watchers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use crate::clock::now_ms;
use crate::protocol::CapEvent;
use crate::session::{EventBody, Published, SessionEvent};

/// The last URN segment of the workspace stream.
pub const WORKSPACE_URN_SEGMENT: &str = "workspace";

/// A cheap handle on the workspace stream (clones share the numbering).
#[derive(Clone)]
pub struct Publisher {
    urn: Arc<str>,
    seq: Arc<AtomicU64>,
    sinks: Vec<mpsc::Sender<Published>>,
}

impl Publisher {
    pub fn new(fleet: &str, sinks: Vec<mpsc::Sender<Published>>) -> Publisher {
        Publisher {
            urn: Arc::from(crate::fleet::urn(fleet, WORKSPACE_URN_SEGMENT)),
            seq: Arc::new(AtomicU64::new(0)),
            sinks,
        }
    }

    pub fn urn(&self) -> &str {
        &self.urn
    }

    /// Publish one CAP event to every sink (a sink that is gone is skipped).
    pub async fn publish(&self, event: CapEvent) {
        let event = Arc::new(SessionEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            urn: self.urn.clone(),
            turn: None,
            ts_ms: now_ms(),
            body: EventBody::Cap { event },
        });
        for sink in &self.sinks {
            let _sink_gone = sink.send(event.clone()).await;
        }
    }
}
