//! A turn whose end was lost in a line dropped over the line cap.
//!
//! A driver drops an agent line longer than the manifest's `[limits] max_line_bytes`
//! and reports it (`cap.error parse_failed`). On a binding whose turn ends by a frame
//! — stream-json (`result`), `codex exec` (`turn.completed`), ACP (the
//! `session/prompt` response, or a request of the agent's that it then waits on) —
//! that line may have been the turn's end, and the turn would then wait for its
//! timeout (600 s by default), its restart re-issue the prompt, and fail alike until
//! the restart budget melts down. So how each binding decides:
//!
//! - **The agent goes quiet.** A dropped line during a turn arms a watch: when the
//!   agent then sends nothing for [`quiet_grace`] (as long as the turn had run before
//!   the drop, at least 2 s and at most 30 s) while nothing waits on an answer of
//!   ours, the turn fails at once with `cap.error line_too_long` naming the cap and the
//!   key that raises it ([`capfleet_wire::driver::lost_turn_end`]), and the agent is asked to
//!   stop whatever it may still be doing (the binding's interrupt). Any output of the
//!   agent after the dropped line restarts the quiet period; a turn end disarms it.
//!   An agent working on without output for longer than it had worked before the drop
//!   is judged lost: such a turn ends within twice the agent's own time plus 2 s.
//! - **The agent's output ends.** Line-oriented wires report it from their output
//!   loop (`driver/pump.rs`: stream-json and `codex exec`, one process per session or
//!   per turn) and the session fails the turn on that report; for ACP the session does
//!   it when the driver dies with the watch armed. The turn fails and the agent is
//!   restarted (per policy) for the next turns without re-issuing it. A report with no
//!   armed attempt (the turn was failed already, or none runs) is moot: not published.
//!
//! PTY turns end by the screen going idle, not by a frame: a dropped row hides no
//! turn end there, so no watch is armed. Nor under A2A: an SSE event over the cap
//! cuts the stream and the driver resubscribes, reading the task's state again, so a
//! final status lost in it is read back.

use std::time::{Duration, Instant};

use ractor::ActorRef;

use super::machine::Core;
use super::{Own, SessionMsg};
use crate::protocol::{CapEvent, StopReason};
use capfleet_wire::driver::turn_ends_by_frame;
use capfleet_wire::driver::{lost_turn_end, oversize_of};
use capfleet_wire::events::{EventBody, SessionState, TurnOutcome};

/// Shortest quiet after a dropped line that fails the turn.
pub(super) const MIN_QUIET: Duration = Duration::from_secs(2);
/// Longest quiet needed, however long the turn ran before the drop.
pub(super) const MAX_QUIET: Duration = Duration::from_secs(30);

/// How long the agent must stay quiet after a dropped line for the turn to fail:
/// as long as the turn had run (`before`), within [`MIN_QUIET`]..=[`MAX_QUIET`].
pub(super) fn quiet_grace(before: Duration) -> Duration {
    before.clamp(MIN_QUIET, MAX_QUIET)
}

/// An armed watch: attempt `attempt` of turn `turn` had a line dropped.
#[derive(Debug, Clone)]
pub(super) struct DroppedLine {
    turn: u32,
    attempt: u32,
    len: u64,
    max: u64,
    grace: Duration,
    last_output: Instant,
}

impl Core {
    /// Every output of the current driver: a dropped line during a turn arms the
    /// watch, any other output restarts its quiet period, a turn end disarms it.
    pub(super) fn watch_output(&mut self, myself: &ActorRef<SessionMsg>, event: Option<&CapEvent>) {
        let now = Instant::now();
        if let Some(w) = self.dropped.as_mut() {
            w.last_output = now;
        }
        let Some((len, max)) = event.and_then(oversize_of) else {
            return;
        };
        let Some(turn) = self.book.current().filter(|t| t.sent) else {
            return;
        };
        if !turn_ends_by_frame(self.spec.binding) {
            return;
        }
        let grace = quiet_grace(turn.started.elapsed());
        let (id, attempt) = (turn.id, turn.attempts);
        self.dropped = Some(DroppedLine {
            turn: id,
            attempt,
            len,
            max,
            grace,
            last_output: now,
        });
        let _timer = myself.send_after(grace, move || {
            Own::DroppedQuiet { turn: id, attempt }.into()
        });
    }

    /// The watch armed for the running attempt, if any.
    fn armed(&self) -> Option<&DroppedLine> {
        let turn = self.book.current()?;
        self.dropped
            .as_ref()
            .filter(|w| (w.turn, w.attempt) == (turn.id, turn.attempts))
    }

    /// The quiet timer of attempt `attempt` of turn `turn` fired: fail the turn if the
    /// agent stayed quiet for the grace with nothing waiting on us, else look again
    /// when the grace could be over.
    pub(super) async fn on_dropped_quiet(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn: u32,
        attempt: u32,
    ) {
        let Some(w) = self
            .armed()
            .filter(|w| (w.turn, w.attempt) == (turn, attempt))
        else {
            return;
        };
        let quiet = w.last_output.elapsed();
        let waiting = self.state != SessionState::Working || self.book.open_requests() > 0;
        if waiting || quiet < w.grace {
            let left = if waiting { w.grace } else { w.grace - quiet };
            let left = left.max(Duration::from_millis(50));
            let _timer =
                myself.send_after(left, move || Own::DroppedQuiet { turn, attempt }.into());
            return;
        }
        let after = format!("went quiet for {} ms", quiet.as_millis());
        let event = lost_turn_end(w.len, w.max, &after);
        self.fail_lost_turn(event).await;
        // It may still be at work on the turn: stop it (a long-lived agent stays up).
        self.slot.send(capfleet_wire::driver::DriverMsg::Interrupt);
    }

    /// The driver died while the running attempt's watch was armed: the turn fails
    /// (true) instead of being re-issued.
    pub(super) async fn dropped_then_died(&mut self) -> bool {
        let Some(w) = self.armed() else {
            return false;
        };
        let event = lost_turn_end(w.len, w.max, "ended");
        self.fail_lost_turn(event).await;
        true
    }

    /// The driver's output loop reported its output ended after a dropped line
    /// (`event`): the running turn fails if the line was dropped in its attempt; else
    /// the report is moot.
    pub(super) async fn on_lost_end(&mut self, event: CapEvent) {
        if self.armed().is_none() {
            tracing::debug!(urn = %self.bus.urn(), "output ended after a dropped line; no turn of it runs");
            return;
        }
        self.fail_lost_turn(event).await;
    }

    /// Fail the running turn with `event`: its end was in the dropped line.
    async fn fail_lost_turn(&mut self, event: CapEvent) {
        let Some(w) = self.dropped.take() else {
            return;
        };
        tracing::warn!(urn = %self.bus.urn(), turn = w.turn, max_line_bytes = w.max, "turn end lost in a dropped line");
        self.spans.on_event(&event);
        self.book.record(&event);
        self.publish(EventBody::Cap { event }).await;
        self.end_turn(TurnOutcome::Failed, StopReason::Error).await;
    }

    /// The turn ended (any way): nothing to watch.
    pub(super) fn disarm_dropped(&mut self) {
        self.dropped = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_the_time_before_the_drop_within_bounds() {
        assert_eq!(quiet_grace(Duration::ZERO), MIN_QUIET);
        assert_eq!(quiet_grace(Duration::from_secs(7)), Duration::from_secs(7));
        assert_eq!(quiet_grace(Duration::from_secs(3600)), MAX_QUIET);
        // Within twice the agent's own time plus the floor, never the turn timeout.
        for secs in [0, 1, 2, 5, 29, 30, 31, 600] {
            let before = Duration::from_secs(secs);
            assert!(before + quiet_grace(before) <= 2 * before + MIN_QUIET);
        }
    }
}
