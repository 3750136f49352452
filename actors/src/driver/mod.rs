//! The contract between a session and its driver: one driver actor per binding
//! (stream-json and ACP-stdio today; PTY and A2A follow), all speaking these messages.
//!
//! A driver owns its agent's process (or connection). It turns the agent's wire into
//! [`DriverOutput`]s that travel to the session through an [`OutputSink`]: batches
//! bounded by credits, so a flooding agent is slowed down (its pipe fills) instead of
//! growing a mailbox. When the agent dies the driver emits `cap.error` and *fails*
//! with an [`ExitCause`]; the session, its supervisor, applies the restart policy.

pub mod acp;
mod acp_conn;
#[cfg(test)]
mod acp_conn_tests;
mod acp_elicit;
mod acp_host;
mod acp_perms;
pub mod death;
pub mod launch;
pub mod pty;
pub mod sink;
pub mod stream_json;

use serde_json::Value;

pub use launch::{LaunchError, LaunchSpec};
pub use sink::OutputSink;

use crate::protocol::{CapEvent, Decision, StopReason};
pub use crate::supervision::ExitCause;

/// What a session asks of its driver.
#[derive(Debug)]
pub enum DriverMsg {
    /// Start a turn with this prompt.
    Prompt { text: String },
    /// Answer an open `cap.permission.request`.
    Permission {
        req_id: String,
        decision: Decision,
        /// Why (shown to the agent on deny).
        message: Option<String>,
    },
    /// Answer an open `cap.ask_user`; `None` declines it.
    Answer {
        ask_id: String,
        value: Option<Value>,
    },
    /// Cancel the current turn the binding's native way (the session falls back to
    /// [`DriverMsg::Kill`] when that does not end the turn in time).
    Interrupt,
    /// Kill the agent's process group now; the driver then fails with `cause`.
    Kill { cause: ExitCause },
    /// End the agent gracefully (close its input, wait, then kill the group); the
    /// driver stops normally.
    Shutdown,
    /// The user's terminal was resized (SIGWINCH): pass the size on (PTY only).
    Resize { rows: u16, cols: u16 },
    /// Internal: the agent's output reached end of file.
    OutputClosed,
}

/// What a driver tells its session, in stream order.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // `Event` is nearly every output; boxing costs an allocation each.
pub enum DriverOutput {
    /// The agent can take a prompt. `resume_id` is the binding's native session id
    /// when known (stream-json learns it from `system/init`, later); `resumed` says
    /// the agent was started on the previous conversation (a native resume).
    Ready {
        resume_id: Option<String>,
        resumed: bool,
    },
    /// The binding learned (or re-learned) the id to resume this conversation with.
    ResumeId(String),
    /// A CAP event.
    Event(CapEvent),
    /// The agent ended the current turn.
    TurnEnd(TurnEnd),
    /// The agent withdrew an open permission request / ask (e.g. on interrupt).
    Withdrawn { req_id: String },
}

/// How a turn ended, as the binding reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub stop_reason: StopReason,
    pub is_error: bool,
    /// The agent's own summary of the turn's text, when the binding gives one.
    pub result_text: Option<String>,
}
