//! A peer's message to a session mid-turn, where the session's agent takes queued
//! input (CAP core §7.7, [`crate::session::SessionSpec::steers`]: a Codex
//! app-server's `turn/steer`): it joins the running turn instead of waiting for the
//! turn's end. Only mentions do (`@cap://` and addressed text, a peer talking to a
//! peer); the fleet's task, a route's and a plan entry's text always run a turn of
//! their own, whose end is what the route, the join or the plan waits for.
//!
//! A steer is keyed as a delivery is (`<to>#<n>`) and journaled as `steered` (not
//! `routed`: a reader tells a steered message from one that ran a turn), on disk
//! before the session gets it. The session answers once its agent took it; one it
//! did not take (the turn ended first) becomes a delivery of its own, under the same
//! key (its `routed` record follows the `steered` one). A resumed run's replay derives
//! each steer again: one that became a turn does so again (the journal has its
//! `routed` record), one taken by a turn whose end is recorded is not sent again, one
//! joining a turn that runs again is sent again.

use ractor::ActorRef;

use super::super::RouterMsg;
use super::{Core, Delivery, Origin, QUEUE_MAX, Slot};
use crate::session::SessionMsg;
use capfleet_wire::events::EventBody;

impl Slot {
    /// Whether `d`, for this session while it runs a turn, joins that turn: a
    /// mention (not one whose steer was missed already) to a session that steers.
    pub(super) fn steerable(&self, d: &Delivery) -> bool {
        d.origin == Origin::Mention
            && d.key.is_none()
            && self.steers
            && self.steering.len() < QUEUE_MAX
    }
}

impl Core {
    /// Steer `d` into the turn `to` runs: recorded now, sent at the end of the
    /// router's message once on disk ([`Core::send_steers`]).
    pub(super) async fn steer(&mut self, to: &str, d: Delivery) {
        let key = self.next_key(to);
        // A resumed run's replay derives it again: its record is on disk already.
        let again = self.replay.as_ref().is_some_and(|r| r.derives_again());
        self.record(EventBody::Steered {
            from: d.from.clone(),
            to: to.into(),
            via: d.via,
            bytes: d.text.len(),
            key: key.clone(),
        })
        .await;
        if self.replay.as_ref().is_some_and(|r| r.fell_back(&key)) {
            // It became a turn of its own before the stop: so it does again.
            self.missed(to, key, d).await;
            return;
        }
        let Some(slot) = self.slots.get_mut(to) else {
            return;
        };
        if again && slot.parked {
            tracing::debug!(session = to, %key, "resume: the steer's turn ended with it");
            return;
        }
        tracing::info!(session = to, %key, "a message steered into the running turn");
        slot.steering.push((key.clone(), d));
        self.unsent_steers.push((to.to_owned(), key));
    }

    /// The message's steers (on disk) to their sessions, each answer back to the router.
    pub(super) fn send_steers(&mut self, me: &ActorRef<RouterMsg>) {
        for (session, key) in std::mem::take(&mut self.unsent_steers) {
            let Some(slot) = self.slots.get_mut(&session) else {
                continue;
            };
            let Some(text) = (slot.steering.iter())
                .find(|(k, _)| *k == key)
                .map(|(_, d)| d.text.clone())
            else {
                continue;
            };
            let (reply, answer) = ractor::concurrency::oneshot();
            slot.cast(SessionMsg::Steer {
                text,
                reply: reply.into(),
            });
            let router = me.clone();
            tokio::spawn(async move {
                let taken = matches!(answer.await, Ok(Ok(())));
                let _router_gone = router.cast(RouterMsg::SteerAnswered {
                    session,
                    key,
                    taken,
                });
            });
        }
    }

    /// The session answered the steer `key`: taken, or it becomes a turn of its own.
    pub(in crate::router) async fn steer_answered(
        &mut self,
        session: &str,
        key: &str,
        taken: bool,
    ) {
        let Some(slot) = self.slots.get_mut(session) else {
            return;
        };
        let Some(i) = slot.steering.iter().position(|(k, _)| k == key) else {
            return;
        };
        let (key, d) = slot.steering.remove(i);
        if !taken {
            self.missed(session, key, d).await;
        }
    }

    /// A steer not taken: delivered as any message is, under its key.
    async fn missed(&mut self, to: &str, key: String, d: Delivery) {
        tracing::info!(session = to, %key, "the steer was not taken: it waits for a turn of its own");
        let d = Delivery {
            key: Some(key),
            ..d
        };
        // Boxed: a delivery may steer, and a steer not taken delivers.
        Box::pin(self.deliver(to, d)).await;
    }
}
