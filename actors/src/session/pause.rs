//! Rate limits pause the turn, not the session's restart budget
//! ([`crate::supervision::rate_limit`]).
//!
//! A `cap.error` `rate_limit` during a turn is noted with the reset the agent gave.
//! When that attempt then ends — the agent ends the turn with an error, or its
//! process exits — the session moves to `paused` (a `paused` event with the resume
//! time) instead of failing the turn or counting a restart. At the resume time the
//! turn is re-issued with its partial output (§10.6): to the same agent when it is
//! still up, else through the restart path (a fresh driver resumes natively or gets
//! the prompt back once ready). A cancel during a pause ends the turn at once (the
//! agent is not working on it); a close ends the session as from any other state.
//! Only one retry goes out per pause, and the next pause backs off further.

use std::time::Duration;

use ractor::ActorRef;

use super::machine::Core;
use super::{Own, SessionMsg};
use crate::events::{EventBody, SessionState, TurnOutcome};
use crate::protocol::{CapEvent, ErrorKind, StopReason};
use crate::supervision::rate_limit::{PausePlan, RateLimitPolicy, human, reset_after};

/// The session's rate-limit pauses.
#[derive(Debug)]
pub(super) struct Pauses {
    policy: RateLimitPolicy,
    /// The running attempt hit a rate limit: the reset the agent gave, if any.
    hit: Option<Option<Duration>>,
    /// Pauses since the last completed turn.
    steps: u32,
    /// Time paused since the last completed turn.
    paused: Duration,
    /// The pending resume (its timer carries it): stale timers are ignored.
    token: u64,
}

impl Pauses {
    pub(super) fn new(policy: RateLimitPolicy) -> Self {
        Pauses {
            policy,
            hit: None,
            steps: 0,
            paused: Duration::ZERO,
            token: 0,
        }
    }

    /// A turn ended: what its attempt hit is moot; after a completed one the next
    /// rate limit starts the backoff over.
    pub(super) fn turn_ended(&mut self, outcome: TurnOutcome) {
        self.hit = None;
        if outcome == TurnOutcome::Completed {
            self.steps = 0;
            self.paused = Duration::ZERO;
        }
    }
}

impl Core {
    /// Note a `rate_limit` error of the running turn, with the reset it names.
    pub(super) fn note_rate_limit(&mut self, event: &CapEvent) {
        let CapEvent::Error(e) = event else { return };
        if e.code != ErrorKind::RateLimit || self.book.current().is_none() {
            return;
        }
        let now = jiff::ZonedDateTime::now();
        let reset = reset_after(&e.message, e.details.get(), &now);
        // A second error of the same attempt without a time keeps the first's.
        self.pauses.hit = Some(reset.or(self.pauses.hit.flatten()));
    }

    /// The attempt that hit a rate limit ended (its turn ended in error, or its agent
    /// exited): pause instead, unless the turn was cancelled or the policy gives up.
    /// True when the session paused.
    pub(super) async fn pause_instead(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        let Some(reset) = self.pauses.hit.take() else {
            return false;
        };
        if self.book.current().is_none() || self.book.cancel_requested() {
            return false;
        }
        let p = &mut self.pauses;
        let (delay, source) = match p.policy.plan(p.steps, reset, p.paused) {
            PausePlan::Pause { delay, source } => (delay, source),
            PausePlan::GiveUp { reason } => {
                let urn = self.bus.urn();
                tracing::warn!(parent: self.spans.current(), %urn, %reason, "rate limited; not pausing");
                return false;
            }
        };
        p.steps += 1;
        p.paused += delay;
        p.token += 1;
        let (pause, token) = (p.steps, p.token);
        self.book.pausing();
        let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        let until_ms = crate::clock::now_ms().saturating_add(delay_ms);
        let reason = format!(
            "rate limited; the turn is re-issued in {} ({})",
            human(delay),
            source.as_str()
        );
        let urn = self.bus.urn();
        tracing::warn!(parent: self.spans.current(), %urn, pause, delay_ms, source = source.as_str(), "rate limited: the session pauses");
        self.publish(EventBody::Paused {
            delay_ms,
            until_ms,
            source,
            pause,
            reason,
        })
        .await;
        self.set_state(SessionState::Paused).await;
        let _timer = myself.send_after(delay, move || Own::Resume { token }.into());
        true
    }

    /// The pause `token` is over: re-issue the turn.
    pub(super) async fn resume(&mut self, myself: &ActorRef<SessionMsg>, token: u64) {
        if token != self.pauses.token || self.state != SessionState::Paused || self.closing {
            return;
        }
        if self.slot.driver.is_some() && self.slot.is_ready() {
            self.send_prompt(myself, Some(false)).await;
        } else {
            // The agent went away during the pause: the restart path brings it back and
            // its ready sends the turn (without counting a restart).
            self.set_state(SessionState::Starting).await;
            let _go = myself.cast(Own::StartDriver.into());
        }
    }

    /// A cancel while paused: the agent is not working on the turn, so it ends now.
    pub(super) async fn cancel_paused(&mut self, myself: &ActorRef<SessionMsg>) {
        self.pauses.token += 1;
        if self.slot.driver.is_none() {
            // No agent up: the next turn needs one.
            self.set_state(SessionState::Starting).await;
            let _go = myself.cast(Own::StartDriver.into());
        }
        self.end_turn(TurnOutcome::Cancelled, StopReason::Cancelled)
            .await;
    }
}
