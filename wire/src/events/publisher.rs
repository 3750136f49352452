//! The one publisher every producer uses (a session, the router, the workspace
//! collection): it stamps each event with its stream's URN, the next number of the
//! stream's sequence (from 1, without gaps) and the time, and hands it to every sink.
//!
//! Every sink gets a stream's events in the order of their numbers, whichever clone
//! published them: a publish first waits for room in every sink (a permit each), then
//! numbers the event and enqueues it in one step under the stream's lock, which is
//! never held across an await. (Numbering, then awaiting room, let a clone whose send
//! waited enqueue its event after a later number: a journal with `seq 3, 5, 4`.)

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::{EventBody, Published, SessionEvent};
use crate::clock::now_ms;

/// `cap://<fleet>/<name>`: the URN of a session (or of the fleet's router and
/// workspace streams), stable for the life of the orchestrator.
pub fn urn(fleet: &str, name: &str) -> String {
    format!("cap://{fleet}/{name}")
}

/// The last URN segment of the router's stream (its records): named on the bus, below
/// the router, as the resume reads the router's records back.
pub const ROUTER_URN_SEGMENT: &str = "router";

/// The last URN segment of the stream of tool calls made on a run from outside (an
/// MCP client's): `mcp_call` records, which no resume replays.
pub const MCP_URN_SEGMENT: &str = "mcp";

/// A stream of events: its URN, its sequence and its sinks. Clones publish into the
/// same stream (they share the numbering, in order), each through its own copy of the
/// sinks.
#[derive(Clone)]
pub struct Publisher {
    urn: Arc<str>,
    /// The last number given; locked while an event is numbered and enqueued.
    seq: Arc<Mutex<u64>>,
    sinks: Vec<mpsc::Sender<Published>>,
}

impl Publisher {
    pub fn new(urn: impl Into<Arc<str>>, sinks: Vec<mpsc::Sender<Published>>) -> Publisher {
        Publisher {
            urn: urn.into(),
            seq: Arc::new(Mutex::new(0)),
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
        *p.seq.lock().unwrap_or_else(PoisonError::into_inner) = after;
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
        let mut permits = Vec::with_capacity(self.sinks.len());
        let mut gone = Vec::new();
        for (i, sink) in self.sinks.iter().enumerate() {
            match sink.reserve().await {
                Ok(permit) => permits.push(permit),
                Err(_) => gone.push(i),
            }
        }
        {
            let mut seq = self.seq.lock().unwrap_or_else(PoisonError::into_inner);
            *seq += 1;
            let event = Arc::new(SessionEvent {
                seq: *seq,
                urn: self.urn.clone(),
                turn,
                ts_ms: now_ms(),
                body,
            });
            for permit in permits {
                permit.send(event.clone());
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

    /// Six clones on six threads (more than most machines' cores, so the system may
    /// preempt one mid-publish), through sinks of one slot that make every send wait:
    /// each sink still gets the stream in the order of its numbers, without a gap.
    #[tokio::test(flavor = "multi_thread", worker_threads = 6)]
    async fn clones_publishing_at_once_deliver_in_the_order_of_their_numbers() {
        const EACH: u64 = 5000;
        const CLONES: u64 = 6;
        let (tx1, rx1) = mpsc::channel(1);
        let (tx2, rx2) = mpsc::channel(1);
        let a = Publisher::new(urn("f", "workspace"), vec![tx1, tx2]);
        let publishers: Vec<_> = (0..CLONES)
            .map(|_| {
                let mut p = a.clone();
                tokio::spawn(async move {
                    for _ in 0..EACH {
                        p.publish(
                            None,
                            EventBody::RunEnded {
                                outcome: RunOutcome::Completed,
                                signal: None,
                            },
                        )
                        .await;
                    }
                })
            })
            .collect();
        drop(a);
        let read = |mut rx: mpsc::Receiver<Published>| {
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                while let Some(e) = rx.recv().await {
                    seqs.push(e.seq);
                    if seqs.len() % 7 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                seqs
            })
        };
        let (r1, r2) = (read(rx1), read(rx2));
        for p in publishers {
            p.await.expect("a publisher");
        }
        let want: Vec<u64> = (1..=CLONES * EACH).collect();
        assert_eq!(r1.await.expect("reader 1"), want);
        assert_eq!(r2.await.expect("reader 2"), want);
    }
}
