//! The stops a run receives from outside ([`Stop`]): the first one stops the run, a
//! later signal forces every agent's end now.

use super::Stop;
use capfleet_wire::events::Signal;
use capfleet_wire::process::halt::{self, Urgency};

/// The stops a run has received.
pub(super) struct Stops {
    /// The first signal (none when a cancel came first, or nothing).
    pub(super) first: Option<Signal>,
    /// A stop was received.
    stopped: bool,
    /// The signal channel is open.
    pub(super) listening: bool,
}

impl Default for Stops {
    fn default() -> Self {
        Stops {
            first: None,
            stopped: false,
            listening: true,
        }
    }
}

impl Stops {
    /// Take `stop` (`None`: the channel closed): the first one stops the run (its
    /// reason and signal are returned) and halts every agent when it is `SIGTERM` or
    /// `SIGHUP`; any later signal forces every agent's end now (a later cancel only
    /// repeats what is under way).
    pub(super) fn on(&mut self, stop: Option<Stop>) -> Option<(String, Option<Signal>)> {
        let Some(stop) = stop else {
            self.listening = false;
            return None;
        };
        if self.stopped {
            if let Stop::Signal(signal) = stop {
                tracing::warn!(%signal, "second signal: killing every agent now");
                halt::escalate(Urgency::Force);
            }
            return None;
        }
        self.stopped = true;
        match stop {
            Stop::Cancel(reason) => Some((reason, None)),
            Stop::Signal(signal) => {
                self.first = Some(signal);
                if !signal.is_interrupt() {
                    tracing::warn!(%signal, "terminated: killing every agent's group");
                    halt::escalate(Urgency::Halt);
                }
                let reason = match signal {
                    Signal::Int => "interrupted".to_owned(),
                    other => format!("terminated by {other}"),
                };
                Some((reason, Some(signal)))
            }
        }
    }
}
