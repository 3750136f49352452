//! The restart strategy, written once: pure, deterministic, no clock and no actor inside.
//!
//! A session supervisor feeds every exit of its driver into a [`RestartTracker`] with the
//! current [`Instant`] and an [`ExitCause`], and gets back a [`Decision`]: restart after a
//! delay (with the attempt number, for the restart event and span), or stop (with why).
//!
//! # Semantics
//!
//! - [`Restart::Temporary`] never restarts; [`Restart::Transient`] restarts only abnormal exits
//!   (see [`ExitCause::is_abnormal`]); [`Restart::Permanent`] restarts every exit.
//! - Meltdown: at most `max_restarts` restarts inside a sliding `window`. The exit that would be
//!   restart number `max_restarts + 1` inside the window stops the session instead. Restarts
//!   older than `window` (measured at decision time) no longer count. `max_restarts = 0` means
//!   the first restartable exit is a meltdown.
//! - Backoff: `attempt` is the restart's rank inside the window (1-based). Attempt 1 is
//!   immediate (crash-to-ready must stay within 50 ms + boot); attempt `n >= 2` waits
//!   `backoff_initial * multiplier^(n-2)`, capped at `backoff_max`. Once the window has slid
//!   past earlier restarts the attempt count, and with it the delay, starts over. No jitter: the
//!   decision must be reproducible in tests and in the journal.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Which exits of a session's driver are restarted (OTP's child restart types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restart {
    /// Restart on every exit, normal ones included.
    Permanent,
    /// Restart only abnormal exits (the default).
    #[default]
    Transient,
    /// Never restart.
    Temporary,
}

/// Default `max_restarts` within [`DEFAULT_WINDOW`].
pub(crate) const DEFAULT_MAX_RESTARTS: u32 = 3;
/// Default meltdown window.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// Default delay before the second restart inside the window (the first is immediate).
pub(crate) const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// Default cap of the backoff delay.
pub(crate) const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Default growth factor of the backoff delay.
pub(crate) const DEFAULT_BACKOFF_MULTIPLIER: u32 = 2;

/// A session's restart policy, as written in `fleet.toml` (durations as `*_s` / `*_ms`
/// numbers); every field is optional and defaults to `transient`, 3 restarts within 60 s,
/// backoff 0, 100 ms, 200 ms, ... capped at 10 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RestartPolicy {
    /// Which exits are restarted.
    pub restart: Restart,
    /// Restarts allowed inside `window`; one more exit is a meltdown.
    pub max_restarts: u32,
    /// The sliding meltdown window.
    #[serde(rename = "restart_window_s", with = "secs")]
    pub window: Duration,
    /// Delay before the second restart inside the window.
    #[serde(rename = "backoff_initial_ms", with = "millis")]
    pub backoff_initial: Duration,
    /// Upper bound of any restart delay.
    #[serde(rename = "backoff_max_ms", with = "millis")]
    pub backoff_max: Duration,
    /// Growth factor per further restart (1 = constant delay; 0 is read as 1).
    #[serde(rename = "backoff_multiplier")]
    pub multiplier: u32,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            restart: Restart::default(),
            max_restarts: DEFAULT_MAX_RESTARTS,
            window: DEFAULT_WINDOW,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            multiplier: DEFAULT_BACKOFF_MULTIPLIER,
        }
    }
}

impl RestartPolicy {
    /// Whether `cause` is restartable under this policy, meltdown aside (an agent
    /// that cannot be started never is).
    pub fn restarts(&self, cause: &ExitCause) -> bool {
        if matches!(cause, ExitCause::CannotStart { .. }) {
            return false;
        }
        match self.restart {
            Restart::Permanent => true,
            Restart::Transient => cause.is_abnormal(),
            Restart::Temporary => false,
        }
    }

    /// The delay before restart number `attempt` (1-based) inside the window.
    pub fn delay(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let mut delay = self.backoff_initial.min(self.backoff_max);
        let multiplier = self.multiplier.max(1);
        for _ in 2..attempt {
            if delay >= self.backoff_max {
                break;
            }
            delay = delay.saturating_mul(multiplier).min(self.backoff_max);
        }
        delay
    }
}

/// Why a driver ended. A driver fails its actor with an `ExitCause` as the error (it implements
/// [`std::error::Error`]) so the supervisor can recover it with [`ExitCause::from_error`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitCause {
    /// The agent exited with status 0, or the driver stopped on request (cancel, shutdown).
    #[error("exited normally")]
    Normal,
    /// The agent exited with a non-zero status.
    #[error("exited with status {code}")]
    Exited { code: i32 },
    /// The agent was killed by a signal.
    #[error("killed by signal {signal}")]
    Signaled { signal: i32 },
    /// The agent produced nothing past the turn timeout and was killed.
    #[error("hung past the turn timeout of {timeout_ms} ms")]
    Hung { timeout_ms: u64 },
    /// The driver itself failed (protocol violation, I/O error, panic in the actor).
    #[error("driver failed: {message}")]
    DriverError { message: String },
    /// The agent could not be started because its program is not there (not on
    /// `PATH`, deleted): no crash, and never restarted whatever the policy.
    #[error("could not be started: {message}")]
    CannotStart { message: String },
}

impl ExitCause {
    /// The cause's kind as serialized (`exited`, `signaled`, `hung`, …): a label of
    /// few values for metrics and spans.
    pub fn kind(&self) -> &'static str {
        match self {
            ExitCause::Normal => "normal",
            ExitCause::Exited { .. } => "exited",
            ExitCause::Signaled { .. } => "signaled",
            ExitCause::Hung { .. } => "hung",
            ExitCause::DriverError { .. } => "driver_error",
            ExitCause::CannotStart { .. } => "cannot_start",
        }
    }

    /// Everything but [`ExitCause::Normal`] is abnormal.
    pub fn is_abnormal(&self) -> bool {
        !matches!(self, ExitCause::Normal)
    }

    /// A hang past `timeout`.
    pub fn hung(timeout: Duration) -> Self {
        ExitCause::Hung {
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Classifies a child's exit status.
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(0), _) => ExitCause::Normal,
            (Some(code), _) => ExitCause::Exited { code },
            (None, Some(signal)) => ExitCause::Signaled { signal },
            (None, None) => ExitCause::DriverError {
                message: format!("unclassified exit status {status}"),
            },
        }
    }

    /// Recovers the cause from a failed actor's error (ractor's `ActorProcessingErr` derefs to
    /// this type): an `ExitCause` anywhere in the source chain wins, anything else is a
    /// [`ExitCause::DriverError`] carrying the error's text.
    pub fn from_error(err: &(dyn std::error::Error + 'static)) -> Self {
        let mut current = Some(err);
        while let Some(e) = current {
            if let Some(cause) = e.downcast_ref::<ExitCause>() {
                return cause.clone();
            }
            current = e.source();
        }
        ExitCause::DriverError {
            message: err.to_string(),
        }
    }
}

/// What to do with an exited driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Restart after `delay`; this is restart number `attempt` inside the window.
    Restart { attempt: u32, delay: Duration },
    /// Do not restart.
    Stop { reason: StopReason },
}

/// Why a driver is not restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The policy does not restart this exit (temporary, or transient after a normal exit).
    NotRestartable { policy: Restart },
    /// `restarts` restarts already happened inside `window`: the session fails.
    Meltdown { restarts: u32, window: Duration },
    /// The agent cannot be started ([`ExitCause::CannotStart`]): a restart would fail alike.
    CannotStart,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::NotRestartable { policy } => {
                write!(f, "not restartable under the {policy:?} policy")
            }
            StopReason::Meltdown { restarts, window } => {
                write!(f, "meltdown: {restarts} restarts within {window:?}")
            }
            StopReason::CannotStart => f.write_str(
                "not restarted: a missing program is no crash; install it or fix the command",
            ),
        }
    }
}

/// Applies a [`RestartPolicy`] to the exits of one child. Memory is O(`max_restarts`).
#[derive(Debug, Clone)]
pub struct RestartTracker {
    policy: RestartPolicy,
    /// Decision instants of the restarts still inside the window, oldest first.
    restarts: VecDeque<Instant>,
    total: u64,
}

impl RestartTracker {
    /// A tracker with no restart yet.
    pub fn new(policy: RestartPolicy) -> Self {
        Self {
            policy,
            restarts: VecDeque::new(),
            total: 0,
        }
    }

    /// The policy applied.
    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    /// Restarts decided since creation, all windows together.
    pub fn total_restarts(&self) -> u64 {
        self.total
    }

    /// Restarts that still count against the meltdown limit at `now`.
    pub fn restarts_in_window(&mut self, now: Instant) -> u32 {
        self.prune(now);
        u32::try_from(self.restarts.len()).unwrap_or(u32::MAX)
    }

    /// Decides what to do with an exit at `now`, and records the restart if there is one.
    pub fn on_exit(&mut self, now: Instant, cause: &ExitCause) -> Decision {
        if matches!(cause, ExitCause::CannotStart { .. }) {
            return Decision::Stop {
                reason: StopReason::CannotStart,
            };
        }
        if !self.policy.restarts(cause) {
            return Decision::Stop {
                reason: StopReason::NotRestartable {
                    policy: self.policy.restart,
                },
            };
        }
        let in_window = self.restarts_in_window(now);
        if in_window >= self.policy.max_restarts {
            return Decision::Stop {
                reason: StopReason::Meltdown {
                    restarts: in_window,
                    window: self.policy.window,
                },
            };
        }
        self.restarts.push_back(now);
        self.total += 1;
        let attempt = in_window + 1;
        Decision::Restart {
            attempt,
            delay: self.policy.delay(attempt),
        }
    }

    fn prune(&mut self, now: Instant) {
        while let Some(&oldest) = self.restarts.front() {
            if now.saturating_duration_since(oldest) >= self.policy.window {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
    }
}

mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
