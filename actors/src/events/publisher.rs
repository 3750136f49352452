//! The one publisher every producer uses (a session, the router, the workspace
//! collection): it stamps each event with its stream's URN, the next number of the
//! stream's sequence (from 1, without gaps) and the time, and hands it to every sink.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::{EventBody, Published, SessionEvent};
use crate::clock::now_ms;

/// `cap://<fleet>/<name>`: the URN of a session (or of the fleet's router and
/// workspace streams), stable for the life of the orchestrator.
pub fn urn(fleet: &str, name: &str) -> String {
    format!("cap://{fleet}/{name}")
}

/// A stream of events: its URN, its sequence and its sinks. Clones publish into the
/// same stream (they share the numbering), each through its own copy of the sinks.
#[derive(Clone)]
pub struct Publisher {
    urn: Arc<str>,
    seq: Arc<AtomicU64>,
    sinks: Vec<mpsc::Sender<Published>>,
}

impl Publisher {
    pub fn new(urn: impl Into<Arc<str>>, sinks: Vec<mpsc::Sender<Published>>) -> Publisher {
        Publisher {
            urn: urn.into(),
            seq: Arc::new(AtomicU64::new(0)),
            sinks,
        }
    }

    /// A stream that goes on after `after` events (a resumed run's, from its journal).
    pub fn continuing(
        urn: impl Into<Arc<str>>,
        sinks: Vec<mpsc::Sender<Published>>,
        after: u64,
    ) -> Publisher {
        let p = Publisher::new(urn, sinks);
        p.seq.store(after, Ordering::Relaxed);
        p
    }

    /// The stream's URN.
    pub fn urn(&self) -> &Arc<str> {
        &self.urn
    }

    /// Publish `body` (of turn `turn`, if any) to every sink. The sinks are bounded
    /// channels: a slow one slows the publisher (and so a session's agent) down. A sink
    /// whose reader is gone is dropped.
    pub async fn publish(&mut self, turn: Option<u32>, body: EventBody) {
        let event = Arc::new(SessionEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            urn: self.urn.clone(),
            turn,
            ts_ms: now_ms(),
            body,
        });
        let mut gone = Vec::new();
        for (i, sink) in self.sinks.iter().enumerate() {
            if sink.send(event.clone()).await.is_err() {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            self.sinks.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunOutcome;

    #[tokio::test]
    async fn clones_share_one_gapless_sequence_and_gone_sinks_are_dropped() {
        let (tx, mut rx) = mpsc::channel(8);
        let (gone, _) = mpsc::channel(8);
        let mut a = Publisher::new(urn("f", "router"), vec![tx, gone]);
        let mut b = a.clone();
        let body = || EventBody::RunEnded {
            outcome: RunOutcome::Completed,
            signal: None,
        };
        a.publish(None, body()).await;
        b.publish(Some(2), body()).await;
        a.publish(None, body()).await;
        assert_eq!(a.sinks.len(), 1);
        let mut seen = Vec::new();
        while let Ok(e) = rx.try_recv() {
            assert_eq!(&*e.urn, "cap://f/router");
            seen.push((e.seq, e.turn));
        }
        assert_eq!(seen, [(1, None), (2, Some(2)), (3, None)]);
    }
}
