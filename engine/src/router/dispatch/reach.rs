//! Sessions as the router reaches them. A run starts its router before its sessions
//! are up: they come up a few at a time while the run goes ([`crate::run`]), each
//! announced ([`RouterMsg::SessionUp`]). A delivery is on disk before its session has
//! it: its ask waits in the slot until the end of the router's message, when one
//! sync of the journal makes every delivery of the message durable at once (a
//! thousand start sessions are one sync, not a thousand), and is then sent — or, to a
//! session not up yet, once it comes up. What the router sends a session meanwhile
//! (a cancel, a close) waits too, and follows the ask. Once no more sessions come up
//! ([`RouterMsg::NoMoreSessions`], the run stopped starting them), a turn waiting
//! for one that never came ends as closed, and so does any later delivery to it.

use ractor::ActorRef;
use tracing::Instrument;

use super::super::RouterMsg;
use super::{Core, Origin, Slot};
use crate::session::{SessionError, SessionMsg};

/// A turn launched: the ask for its session, sent once the session is up.
pub(in crate::router) struct Ask {
    pub key: String,
    pub prompt: String,
    pub origin: Origin,
    /// The route that started it (the ask is sent, and its end awaited, inside it).
    pub route: tracing::Span,
}

impl Slot {
    /// Send `msg` to the session now, or after its ask once that is sent.
    pub(super) fn cast(&mut self, msg: SessionMsg) {
        match (&self.actor, &self.waiting) {
            (Some(actor), None) => {
                let _gone = actor.cast(msg);
            }
            _ => self.deferred.push(msg),
        }
    }

    /// The session is up as `actor`: its waiting ask goes out, then what waited
    /// behind it.
    fn reach(&mut self, me: &ActorRef<RouterMsg>, name: &str, actor: ActorRef<SessionMsg>) {
        if let Some(ask) = self.waiting.take() {
            send(me, &actor, name.to_owned(), ask);
        }
        for msg in self.deferred.drain(..) {
            let _gone = actor.cast(msg);
        }
        self.actor = Some(actor);
    }
}

impl Core {
    /// Ask `session` for the turn `ask` (its `routed` record published): sent at the
    /// end of the router's message, once on disk ([`Core::send_asks`]).
    pub(super) fn ask(&mut self, session: &str, ask: Ask) {
        let Some(slot) = self.slots.get_mut(session) else {
            return;
        };
        slot.waiting = Some(ask);
        self.unsent.push(session.to_owned());
    }

    /// The end of a router's message: its asks and steers on disk (one sync for all),
    /// then each ask sent to its session if that is up (else when it comes up; a turn
    /// for one that never will ends as closed), then each steer behind them.
    pub(in crate::router) async fn send_asks(&mut self, me: &ActorRef<RouterMsg>) {
        if self.unsent.is_empty() && self.unsent_steers.is_empty() {
            return;
        }
        self.make_durable().await;
        for name in std::mem::take(&mut self.unsent) {
            let Some(slot) = self.slots.get_mut(&name) else {
                continue;
            };
            match slot.actor.clone() {
                Some(actor) => slot.reach(me, &name, actor),
                None if self.sessions_ended => {
                    slot.deferred.clear();
                    if let Some(ask) = slot.waiting.take() {
                        never_up(me, name, ask);
                    }
                }
                None => {}
            }
        }
        self.send_steers(me);
    }

    /// Session `name` is up: its waiting ask (on disk: asks are sent, or left waiting,
    /// at the end of the message that made them) goes out, then what waited behind it.
    pub(in crate::router) fn session_up(
        &mut self,
        me: &ActorRef<RouterMsg>,
        name: &str,
        actor: ActorRef<SessionMsg>,
    ) {
        if let Some(slot) = self.slots.get_mut(name) {
            slot.reach(me, name, actor);
        }
    }

    /// No more sessions come up: the turns waiting for one end as closed.
    pub(in crate::router) fn no_more_sessions(&mut self, me: &ActorRef<RouterMsg>) {
        self.sessions_ended = true;
        for (name, slot) in &mut self.slots {
            if slot.actor.is_none() {
                slot.deferred.clear();
                if let Some(ask) = slot.waiting.take() {
                    never_up(me, name.clone(), ask);
                }
            }
        }
    }
}

/// Send the ask (in its route's span: the session handles it in it, ractor carries
/// the span) and report the turn's end to the router.
fn send(me: &ActorRef<RouterMsg>, actor: &ActorRef<SessionMsg>, session: String, ask: Ask) {
    let Ask {
        key,
        prompt,
        origin,
        route,
    } = ask;
    let (reply, result) = ractor::concurrency::oneshot();
    let sent = route.in_scope(|| {
        actor.cast(SessionMsg::Ask {
            prompt,
            traceparent: None,
            reply: reply.into(),
        })
    });
    let router = me.clone();
    tokio::spawn(
        async move {
            let result = match (sent, result.await) {
                (Ok(()), Ok(r)) => r,
                _ => Err(SessionError::Closed),
            };
            let _router_gone = router.cast(RouterMsg::TurnDone {
                session,
                key,
                origin,
                result,
            });
        }
        .instrument(route),
    );
}

/// The session never came up: its turn ends as closed.
fn never_up(me: &ActorRef<RouterMsg>, session: String, ask: Ask) {
    let _router_gone = me.cast(RouterMsg::TurnDone {
        session,
        key: ask.key,
        origin: ask.origin,
        result: Err(SessionError::Closed),
    });
}
