//! The session's state: its lifecycle state and its parts — the stream it publishes
//! on, the driver slot, the turn book, the hooks, the pauses, the answerer's handle,
//! the spans —
//! and what moves it between states: publishing, closing, failing.

use ractor::ActorRef;

use super::book::TurnBook;
use super::hooks::Hooks;
use super::pause::Pauses;
use super::slot::DriverSlot;
use super::spans::Spans;
use super::{SessionArgs, SessionError, SessionMsg, SessionSnapshot, SessionSpec};
use capfleet_wire::driver::DriverMsg;
use capfleet_wire::events::Decider;
use capfleet_wire::events::{EventBody, Publisher, SessionState};

/// The session's state (see [`super::Session`]).
pub(crate) struct Core {
    pub(super) spec: SessionSpec,
    pub(super) state: SessionState,
    /// `Close` was asked: the driver is shutting down, the session ends with it.
    pub(super) closing: bool,
    /// The session's stream (its URN, sequence and subscribers).
    pub(super) bus: Publisher,
    pub(super) slot: DriverSlot,
    pub(super) book: TurnBook,
    pub(super) hooks: Hooks,
    pub(super) pauses: Pauses,
    pub(super) answerer: Option<Decider>,
    pub(super) spans: Spans,
    /// A line dropped over the cap during the running attempt (`dropped`).
    pub(super) dropped: Option<super::dropped::DroppedLine>,
}

impl Core {
    pub(super) fn new(args: SessionArgs) -> Core {
        let SessionArgs {
            spec,
            subscribers,
            answerer,
            parent,
        } = args;
        let recovered = spec.recovered.clone().unwrap_or_default();
        let mut slot = DriverSlot::new(&spec);
        // A resumed run's journal first, else the conversation the config names
        // (`speak --resume`, an ACP `session/load`).
        slot.resume_id = recovered
            .resume_id
            .or_else(|| spec.launch.config.session_resume_id.get().cloned());
        Core {
            state: SessionState::Starting,
            closing: false,
            bus: Publisher::continuing(spec.urn(), subscribers, recovered.seq),
            slot,
            book: TurnBook::resumed(
                recovered.last_turn,
                recovered.ended,
                recovered.interrupted,
                recovered.interrupted_tools,
            ),
            hooks: Hooks::new(&spec),
            pauses: Pauses::new(spec.rate_limit),
            answerer,
            spans: Spans::new(&spec, &parent),
            dropped: None,
            spec,
        }
    }

    /// Publish an event of the running turn (if any).
    pub(super) async fn publish(&mut self, body: EventBody) {
        let turn = self.book.turn_id();
        self.bus.publish(turn, body).await;
    }

    pub(super) async fn set_state(&mut self, to: SessionState) {
        if self.state != to {
            let from = self.state;
            self.state = to;
            tracing::debug!(parent: &self.spans.session, %from, %to, "session state");
            if to.is_terminal() {
                self.spans.finished(to.as_str());
            }
            self.publish(EventBody::State { from, to }).await;
        }
    }

    pub(super) fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot {
            urn: self.bus.urn().clone(),
            state: self.state,
            turns: self.book.done(),
            restarts: self.slot.tracker.total_restarts(),
            usage: self.book.usage(),
            resume_id: self.slot.resume_id.clone(),
            open_requests: self.book.open_requests(),
        }
    }

    pub(super) fn stop_reason(&self) -> String {
        format!("session {} {}", self.bus.urn(), self.state)
    }

    pub(super) async fn fail(&mut self, reason: String) {
        tracing::error!(parent: &self.spans.session, urn = %self.bus.urn(), %reason, "session failed");
        self.spans.failed(&reason);
        self.finish_turn_with_error(SessionError::Failed {
            reason: reason.clone(),
        })
        .await;
        self.publish(EventBody::Failed { reason }).await;
        self.set_state(SessionState::Failed).await;
    }

    pub(super) async fn close(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.closing || self.state.is_terminal() {
            return;
        }
        self.closing = true;
        match &self.slot.driver {
            Some(d) => {
                let _gone = d.cast(DriverMsg::Shutdown);
            }
            None => {
                self.finish_turn_with_error(SessionError::Closed).await;
                self.set_state(SessionState::Closed).await;
                myself.stop(Some(self.stop_reason()));
            }
        }
    }

    /// Stopped from above: a caller still waiting for its turn gets an answer.
    pub(super) fn fail_pending_reply(&mut self) {
        self.book.reply(Err(SessionError::Closed));
    }
}
