//! Signal faults: how `kill`, `term`, `hang` and `exit` reach an agent. Only the
//! process group the session's own driver spawned is ever touched — the driver
//! applies the fault to the `ProcessGroup` it holds (registered with the keeper), and
//! the session only names the fault; no pid is ever looked up by name or command line,
//! so a process that merely looks like an agent is never hit.
//!
//! `exit` is a clean exit mid-turn: the driver closes the agent's input (the wire's
//! own end of input: stdin's end for a pipe agent, end of file on a PTY) without
//! marking the agent as ending on purpose. A CLI agent ends its session with status 0
//! at end of input — at once, mid-turn (an ACP agent, `capfleet sim` whose script sets
//! `exit_at_eof`), or after the turn in flight (Claude Code's stream-json input, the
//! sim by default) — so the driver sees a clean exit it did not ask for, in the middle
//! of the session's life: the restart policy decides (`transient` leaves a clean exit
//! alone: the turn fails, the session closes; `permanent` starts the agent again and
//! the turn is re-sent).

use std::time::Duration;

/// A fault the driver applies to its agent's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalFault {
    /// `SIGKILL` to the group.
    Kill,
    /// `SIGTERM` to the group.
    Term,
    /// `SIGSTOP` to the group, `SIGCONT` after `resume_after` (never: `None`).
    Hang { resume_after: Option<Duration> },
    /// The agent's input closed: it ends by itself, status 0.
    Exit,
}

impl SignalFault {
    /// The signal sent, if the fault is one.
    pub fn signal(self) -> Option<i32> {
        match self {
            SignalFault::Kill => Some(libc::SIGKILL),
            SignalFault::Term => Some(libc::SIGTERM),
            SignalFault::Hang { .. } => Some(libc::SIGSTOP),
            SignalFault::Exit => None,
        }
    }

    /// What is done, for the `chaos` record's `detail` (`SIGKILL to group 4242`).
    pub fn describe(self, pgid: Option<i32>) -> String {
        let group = pgid.map_or_else(|| "the agent's group".to_owned(), |g| format!("group {g}"));
        match self {
            SignalFault::Kill => format!("SIGKILL to {group}"),
            SignalFault::Term => format!("SIGTERM to {group}"),
            SignalFault::Hang {
                resume_after: Some(d),
            } => format!("SIGSTOP to {group}, SIGCONT after {} ms", d.as_millis()),
            SignalFault::Hang { resume_after: None } => {
                format!("SIGSTOP to {group}, never continued")
            }
            SignalFault::Exit => format!("input of {group} closed (a clean exit)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_kind_names_its_signal() {
        assert_eq!(SignalFault::Kill.signal(), Some(libc::SIGKILL));
        assert_eq!(
            SignalFault::Kill.describe(Some(4242)),
            "SIGKILL to group 4242"
        );
        let hang = SignalFault::Hang {
            resume_after: Some(Duration::from_millis(300)),
        };
        assert_eq!(
            hang.describe(None),
            "SIGSTOP to the agent's group, SIGCONT after 300 ms"
        );
    }
}
