//! Poison turns, decided once: pure, no clock and no actor inside.
//!
//! A restart re-issues the turn that was running (spec §10.6). When the prompt itself
//! is what kills the agent (an answer over the line cap, an input that crashes it, a
//! request that hangs it), every re-issue fails the same way until the restart budget
//! melts down: the turn's time and cost again and again. So a turn whose attempts
//! failed [`POISON_AFTER`] times in a row *the same way* — the same last `cap.error`
//! code of the attempt and the same [`ExitCause`] — is not tried again: the session
//! ends it failed and reports it ([`POISON_TURN`]); the fleet's `on_error` decides
//! what the run does. The agent itself is still restarted for the turns after it,
//! under the usual [`super::RestartTracker`] (whose meltdown still wins).
//!
//! An attempt cut by the orchestrator (a chaos fault, a kill of ours) says nothing of
//! the turn: it breaks the row ([`AttemptLog::not_its_own`]).

use serde::Serialize;

use super::ExitCause;
use crate::protocol::{CapEvent, ErrorKind};

/// Attempts of one turn failing the same way in a row that make it a poison turn.
pub(crate) const POISON_AFTER: u32 = 2;
/// The `cap.error` code of a poison turn (a binding code: the spec has none).
pub const POISON_TURN: &str = "poison_turn";

/// How one attempt of a turn failed: the last `cap.error` code seen during it (none if
/// it sent none) and how its agent ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptFailure {
    pub code: Option<String>,
    pub cause: ExitCause,
}

/// Whether `this` failure, following `previous` (the attempt just before, if it
/// failed on its own), fails the same way: same code and same cause.
pub(crate) fn same_way(previous: Option<&AttemptFailure>, this: &AttemptFailure) -> bool {
    previous == Some(this)
}

/// What to do with a turn whose attempt just failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Re-issue it (if the restart policy brings the agent back).
    Retry,
    /// Do not: it failed `times` times in a row the same way.
    Poison { times: u32 },
}

/// The failures of one turn's attempts, in a row.
#[derive(Debug, Clone, Default)]
pub struct AttemptLog {
    last: Option<AttemptFailure>,
    /// Failures in a row equal to `last` (0 when none).
    row: u32,
}

impl AttemptLog {
    /// Records the failure of the latest attempt and decides.
    pub fn failed(&mut self, failure: AttemptFailure) -> Verdict {
        self.row = if same_way(self.last.as_ref(), &failure) {
            self.row + 1
        } else {
            1
        };
        self.last = Some(failure);
        if self.row >= POISON_AFTER {
            Verdict::Poison { times: self.row }
        } else {
            Verdict::Retry
        }
    }

    /// The latest attempt was cut by the orchestrator, not by the turn: the row starts over.
    pub fn not_its_own(&mut self) {
        self.last = None;
        self.row = 0;
    }

    /// The failure the row is made of, if any.
    pub fn last(&self) -> Option<&AttemptFailure> {
        self.last.as_ref()
    }
}

/// The `cap.error` reporting turn `turn` as poison: `times` attempts failed as `failure`.
pub fn poison_event(turn: u32, times: u32, failure: &AttemptFailure) -> CapEvent {
    let code = failure.code.as_deref().unwrap_or("no cap.error");
    let mut event = CapEvent::error(
        ErrorKind::Other(POISON_TURN.into()),
        format!(
            "turn {turn} is a poison turn: its {times} attempts in a row failed the same way \
             ({code}; agent {}), so it is not tried again; the fleet's on_error decides",
            failure.cause
        ),
        false,
    );
    if let CapEvent::Error(e) = &mut event {
        e.details = Some(serde_json::json!({
            "turn": turn, "attempts": times, "code": failure.code, "cause": failure.cause,
        }))
        .into();
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: Option<&str>, cause: ExitCause) -> AttemptFailure {
        AttemptFailure {
            code: code.map(str::to_owned),
            cause,
        }
    }

    fn exited(code: i32) -> ExitCause {
        ExitCause::Exited { code }
    }

    #[test]
    fn the_same_failure_twice_is_poison() {
        let mut log = AttemptLog::default();
        let a = f(Some("agent_exited"), exited(3));
        assert_eq!(log.failed(a.clone()), Verdict::Retry);
        assert_eq!(log.failed(a.clone()), Verdict::Poison { times: 2 });
        assert_eq!(log.last(), Some(&a));
    }

    #[test]
    fn a_different_code_or_cause_is_no_poison() {
        let mut log = AttemptLog::default();
        assert_eq!(
            log.failed(f(Some("agent_exited"), exited(3))),
            Verdict::Retry
        );
        // Same code, another exit status.
        assert_eq!(
            log.failed(f(Some("agent_exited"), exited(4))),
            Verdict::Retry
        );
        // Same cause, another code.
        assert_eq!(
            log.failed(f(Some("parse_failed"), exited(4))),
            Verdict::Retry
        );
        assert_eq!(log.failed(f(None, exited(4))), Verdict::Retry);
        // Then twice alike: poison, counted from where the row began.
        assert_eq!(log.failed(f(None, exited(4))), Verdict::Poison { times: 2 });
    }

    #[test]
    fn a_row_must_be_unbroken() {
        let mut log = AttemptLog::default();
        let (a, b) = (
            f(
                Some("agent_hung"),
                ExitCause::hung(std::time::Duration::from_secs(1)),
            ),
            f(Some("agent_exited"), ExitCause::Signaled { signal: 9 }),
        );
        assert_eq!(log.failed(a.clone()), Verdict::Retry);
        assert_eq!(log.failed(b), Verdict::Retry);
        assert_eq!(log.failed(a.clone()), Verdict::Retry);
        log.not_its_own();
        assert_eq!(log.last(), None);
        assert_eq!(log.failed(a.clone()), Verdict::Retry);
        assert_eq!(log.failed(a), Verdict::Poison { times: 2 });
    }

    #[test]
    fn same_way_compares_code_and_cause() {
        let a = f(Some("x"), ExitCause::Normal);
        assert!(!same_way(None, &a));
        assert!(same_way(Some(&a), &a.clone()));
        assert!(!same_way(Some(&f(Some("y"), ExitCause::Normal)), &a));
        let d = |m: &str| f(None, ExitCause::DriverError { message: m.into() });
        assert!(same_way(Some(&d("gone")), &d("gone")));
        assert!(!same_way(Some(&d("gone")), &d("other")));
    }

    #[test]
    fn the_report_names_the_turn_the_code_and_the_cause() {
        let e = poison_event(4, 2, &f(Some("agent_exited"), exited(3)));
        let CapEvent::Error(e) = e else {
            panic!("not an error")
        };
        assert_eq!(e.code.as_str(), POISON_TURN);
        assert!(e.message.contains("turn 4"), "{}", e.message);
        assert!(e.message.contains("agent_exited"), "{}", e.message);
        assert!(e.message.contains("exited with status 3"), "{}", e.message);
        assert!(e.message.contains("on_error"), "{}", e.message);
    }
}
