//! A resumed run's replay (`capfleet run --resume`): the router starts the run again
//! and takes its decisions again, but a delivery whose turn ended before the run was
//! cut does not run again — its recorded result ([`crate::resume::Replayed`], rebuilt
//! from the journal) is taken instead, in the order the router took it then, once
//! that delivery comes up (it is "parked" until its turn in that order). The records
//! this re-derives are in the journal already: the first `skip` are not recorded
//! again (the journal's count of them before any stop). A delivery that comes up with
//! no recorded end (cut mid-turn, or new) runs live; its end waits until every
//! recorded one is taken. One that never comes up again (the fleet changed, `--force`)
//! is dropped from the replay with a warning, and the run goes on live. A recorded end
//! of a stop's (its turn completed while the run was stopping) has its `delivered`
//! record on disk among the stop's records: it is taken without writing it again.

use std::collections::{HashMap, HashSet, VecDeque};

use super::{Core, Origin};
use crate::resume::Replayed;
use crate::session::{SessionError, TurnResult};
use capfleet_wire::events::{EventBody, Publisher, RunOutcome, urn};

type Ended = (String, String, Origin, Result<TurnResult, SessionError>);

/// What the router of a resumed run goes on from.
#[derive(Debug)]
pub(crate) struct RouterRecovery {
    /// The recorded ends, in the order the router took them.
    pub replay: Vec<Replayed>,
    /// Router records the replay derives again (not journaled twice).
    pub skip: u64,
    /// The router stream's last sequence number on disk.
    pub seq: u64,
    /// The `resumed` record (first of the resumed run's).
    pub resumed: EventBody,
    /// Steers the session did not take, which became deliveries of their own (their
    /// key has a `routed` record too).
    pub fell_back: HashSet<String>,
}

pub(crate) struct Replay {
    order: VecDeque<String>,
    results: HashMap<String, Result<TurnResult, SessionError>>,
    /// Launched deliveries whose recorded end waits for its place in `order`.
    parked: HashMap<String, (String, Origin)>,
    /// Live turns' ends, held until the replay is done.
    held: Vec<Ended>,
    skip: u64,
    resumed: Option<EventBody>,
    /// Recorded ends whose `delivered` record is on disk past the skipped ones.
    on_disk: HashSet<String>,
    /// Steers that became deliveries of their own.
    fell_back: HashSet<String>,
}

impl Replay {
    /// One record fewer to skip: whether this one is skipped.
    pub(super) fn skip(&mut self) -> bool {
        let skipped = self.skip > 0;
        self.skip = self.skip.saturating_sub(1);
        skipped
    }

    /// Whether the next record is one on disk already (derived again).
    pub(super) fn derives_again(&self) -> bool {
        self.skip > 0
    }

    /// Whether the steer `key` became a delivery of its own.
    pub(super) fn fell_back(&self, key: &str) -> bool {
        self.fell_back.contains(key)
    }

    /// The run stops: what the router records from here is new.
    pub(super) fn stop(&mut self) {
        self.skip = 0;
    }

    /// Whether the `delivered` record of `key` is on disk already (taken once).
    pub(super) fn delivered_on_disk(&mut self, key: &str) -> bool {
        self.on_disk.remove(key)
    }
}

impl Core {
    /// Go on from `r`: the router's stream after its last record on disk, the replay.
    pub(in crate::router) fn resume(
        &mut self,
        r: RouterRecovery,
        sinks: Vec<tokio::sync::mpsc::Sender<capfleet_wire::events::Published>>,
    ) {
        let router = urn(&self.fleet, capfleet_wire::events::ROUTER_URN_SEGMENT);
        self.bus = Publisher::continuing(router, sinks, r.seq);
        let order = r.replay.iter().map(|p| p.key.clone()).collect();
        let on_disk = r
            .replay
            .iter()
            .filter(|p| p.on_disk)
            .map(|p| p.key.clone())
            .collect();
        let results = r.replay.into_iter().map(|p| (p.key, p.result)).collect();
        self.replay = Some(Replay {
            order,
            results,
            parked: HashMap::new(),
            held: Vec::new(),
            skip: r.skip,
            resumed: Some(r.resumed),
            on_disk,
            fell_back: r.fell_back,
        });
    }

    /// The run stops: a `stopping` record, never one the replay skips (from here the
    /// router's records are the stop's).
    pub(super) async fn record_stopping(&mut self, outcome: RunOutcome, reason: &str) {
        if let Some(r) = self.replay.as_mut() {
            r.stop();
        }
        self.record(EventBody::Stopping {
            outcome,
            reason: reason.to_owned(),
        })
        .await;
    }

    /// The `resumed` record, once, ahead of everything the replay derives.
    pub(super) async fn record_resumed(&mut self) {
        if let Some(body) = self.replay.as_mut().and_then(|r| r.resumed.take()) {
            self.bus.publish(None, body).await;
        }
    }

    /// `key` (to `session`) has a recorded end: park it (no turn runs).
    pub(super) fn park(&mut self, key: &str, session: &str, origin: &Origin) -> bool {
        let Some(r) = self.replay.as_mut() else {
            return false;
        };
        if !r.results.contains_key(key) {
            return false;
        }
        r.parked
            .insert(key.to_owned(), (session.to_owned(), origin.clone()));
        true
    }

    /// A live turn ended: held while the replay lasts, else handed back.
    pub(in crate::router) fn hold(&mut self, ended: Ended) -> Option<Ended> {
        match self.replay.as_mut() {
            Some(r) => {
                r.held.push(ended);
                None
            }
            None => Some(ended),
        }
    }

    /// Take the recorded ends in their order as their deliveries come up; once all
    /// are taken, the live ends held meanwhile.
    pub(in crate::router) async fn release(&mut self) {
        loop {
            let Some(r) = self.replay.as_mut() else {
                return;
            };
            let Some(key) = r.order.front().cloned() else {
                let held = std::mem::take(&mut r.held);
                self.replay = None;
                tracing::info!("resume: the journal is replayed; the run goes on");
                for (session, key, origin, result) in held {
                    Box::pin(self.turn_done((session, key), origin, result)).await;
                }
                return;
            };
            r.order.pop_front();
            let result = r.results.remove(&key);
            match (r.parked.remove(&key), result) {
                (Some((session, origin)), Some(result)) => {
                    Box::pin(self.turn_done((session, key), origin, result)).await;
                }
                _ => tracing::warn!(
                    %key,
                    "resume: this delivery did not come up again; it is left out of the replay"
                ),
            }
        }
    }
}
