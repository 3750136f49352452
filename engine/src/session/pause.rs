//! Rate limits pause the turn, not the session's restart budget
//! ([`capfleet_wire::supervision::rate_limit`]).
//!
//! A `cap.error` `rate_limit` during a turn is noted with the reset the agent gave;
//! one read from a structured source (Claude Code's `rate_limit_event`, named in the
//! error's details) outranks one read from text in the same attempt, and the pause
//! names that source and the limit's type.
//! When that attempt then ends — the agent ends the turn with an error, or its
//! process exits — the session moves to `paused` (a `paused` event with the resume
//! time) instead of failing the turn or counting a restart. At the resume time the
//! turn is re-issued with its partial output (§10.6): to the same agent when it is
//! still up, else through the restart path (a fresh driver resumes natively or gets
//! the prompt back once ready). A cancel during a pause ends the turn at once (the
//! agent is not working on it); a close ends the session as from any other state.
//! Only one retry goes out per pause, and the next pause backs off further.
//!
//! A rate limit pauses, it is no crash (`session/pause.rs`, the pure part in
//! `supervision/rate_limit.rs`): a `cap.error` `rate_limit` during a turn is noted
//! with the reset its message or details name (a delay, a clock time in a named or
//! the local zone, a timestamp); when that attempt ends — a turn end in error or the
//! driver's exit — the session publishes `paused` (delay, resume time, `reset` or
//! `backoff`), moves to state `paused` and sets a timer instead of ending the turn
//! or asking the restart tracker. At the timer the turn's prompt goes out again with
//! its partial output (to the same driver if it is up, else through `StartDriver`
//! and the ready that sends a pending prompt). The turn timeout does not fire while
//! paused; a cancel ends the paused turn at once. Backoff (no reset given) is
//! `rate_limit_backoff` (1 min) doubling per pause to 1 h; past `max_pause` (6 h in
//! all since the last completed turn) or with `on_rate_limit = "fail"` the turn fails
//! as before. The ACP driver files a failed `session/prompt` whose message reads as
//! a rate limit (`bindings/error_text.rs`: the APIs' error types, a `429` word, the
//! agents' own usage-limit sentences, taken from their sources) as `rate_limit`, and
//! so does the stream-json `result` mapper for an error without an HTTP status
//! (`error_during_execution` whose text says `rate_limit_error: …`). Claude Code's
//! `rate_limit_event` frames (`stream_json/rate_limit.rs`; written only under a
//! subscription sign-in) map to a `rate_limit` `cap.error` when `rejected` (details
//! `source` = `rate_limit_event`, `limit_type`, `resetsAt`) and to a
//! `rate_limit_warning` `cap.error` when `allowed_warning` (journaled, counted in
//! `capfleet_rate_limit_warnings_total`, never a failure). A structured reset
//! outranks one read from text in the same attempt, and the `paused` record then
//! names `source` `rate_limit_event` and its `limit_type`.

use std::time::Duration;

use ractor::ActorRef;

use super::machine::Core;
use super::{Own, SessionMsg};
use crate::protocol::{CapEvent, ErrorKind, StopReason};
use capfleet_wire::events::{EventBody, SessionState, TurnOutcome};
use capfleet_wire::supervision::rate_limit::{
    DETAIL_LIMIT_TYPE, DETAIL_SOURCE, PausePlan, PauseSource, RateLimitPolicy, human, reset_after,
};

/// A rate limit the running attempt hit.
#[derive(Debug, Clone, Default, PartialEq)]
struct Hit {
    /// The reset the agent gave, if any.
    reset: Option<Duration>,
    /// The structured source the binding read it from, if any.
    source: Option<PauseSource>,
    /// Which limit (`five_hour`, …), when the agent said.
    limit_type: Option<String>,
}

impl Hit {
    /// A later hit of the same attempt: a structured source with a reset outranks
    /// text; otherwise the later one, keeping what it does not say.
    fn then(self, next: Hit) -> Hit {
        let rank = |h: &Hit| (h.source.is_some() && h.reset.is_some(), h.reset.is_some());
        if rank(&self) > rank(&next) && self.source.is_some() {
            return self;
        }
        Hit {
            reset: next.reset.or(self.reset),
            source: next.source.or(self.source),
            limit_type: next.limit_type.or(self.limit_type),
        }
    }
}

/// The session's rate-limit pauses.
#[derive(Debug)]
pub(super) struct Pauses {
    policy: RateLimitPolicy,
    /// The running attempt hit a rate limit.
    hit: Option<Hit>,
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
        let details = e.details.get();
        let detail = |key: &str| details.and_then(|d| d.get(key)).and_then(|v| v.as_str());
        let hit = Hit {
            reset: reset_after(&e.message, details, &now),
            source: detail(DETAIL_SOURCE).and_then(PauseSource::of_detail),
            limit_type: detail(DETAIL_LIMIT_TYPE).map(str::to_owned),
        };
        self.pauses.hit = Some(match self.pauses.hit.take() {
            Some(first) => first.then(hit),
            None => hit,
        });
    }

    /// The attempt that hit a rate limit ended (its turn ended in error, or its agent
    /// exited): pause instead, unless the turn was cancelled or the policy gives up.
    /// True when the session paused.
    pub(super) async fn pause_instead(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        let Some(hit) = self.pauses.hit.take() else {
            return false;
        };
        if self.book.current().is_none() || self.book.cancel_requested() {
            return false;
        }
        let p = &mut self.pauses;
        let (delay, source) = match p.policy.plan(p.steps, hit.reset, p.paused) {
            PausePlan::Pause {
                delay,
                source: PauseSource::Reset,
            } => (delay, hit.source.unwrap_or(PauseSource::Reset)),
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
        let until_ms = capfleet_wire::clock::now_ms().saturating_add(delay_ms);
        let limit = hit
            .limit_type
            .as_deref()
            .map(|t| format!(" ({t} limit)"))
            .unwrap_or_default();
        let reason = format!(
            "rate limited{limit}; the turn is re-issued in {} ({})",
            human(delay),
            source.as_str()
        );
        let urn = self.bus.urn();
        let limit_type = hit.limit_type;
        tracing::warn!(parent: self.spans.current(), %urn, pause, delay_ms, source = source.as_str(), limit_type = limit_type.as_deref(), "rate limited: the session pauses");
        self.publish(EventBody::Paused {
            delay_ms,
            until_ms,
            source,
            limit_type,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(secs: Option<u64>, event: bool, limit: Option<&str>) -> Hit {
        Hit {
            reset: secs.map(Duration::from_secs),
            source: event.then_some(PauseSource::RateLimitEvent),
            limit_type: limit.map(str::to_owned),
        }
    }

    /// Claude Code writes its `rate_limit_event` (exact `resetsAt`) before the turn's
    /// failed `result` (a clock time in text, to the minute): the event's reset holds.
    #[test]
    fn a_structured_reset_outranks_later_text() {
        let event = hit(Some(3), true, Some("five_hour"));
        assert_eq!(event.clone().then(hit(Some(60), false, None)), event);
        // Text first, then the event: the event's.
        assert_eq!(hit(Some(60), false, None).then(event.clone()), event);
        // Text only: a later error without a time keeps the first's.
        assert_eq!(
            hit(Some(60), false, None).then(hit(None, false, None)),
            hit(Some(60), false, None)
        );
        // An event without a reset gives way to text with one, keeping its names.
        assert_eq!(
            hit(None, true, Some("seven_day")).then(hit(Some(60), false, None)),
            hit(Some(60), true, Some("seven_day"))
        );
    }
}
