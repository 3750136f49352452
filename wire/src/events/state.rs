//! The session lifecycle of spec §9, as capfleet tracks it.

use std::fmt;

use serde::Serialize;

/// Where a session is. `Done` ends a turn with the agent alive; `Failed` and `Closed`
/// are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The agent is being spawned (or respawned); prompts wait.
    Starting,
    /// The agent is up and has not had a turn yet.
    Ready,
    /// A turn is running.
    Working,
    /// The turn waits for an answer (ask or permission).
    InputRequired,
    /// The last turn ended; the agent is idle.
    Done,
    /// A rate limit paused the turn: it is re-issued when the limit resets.
    Paused,
    /// The session failed for good.
    Failed,
    /// The session was closed.
    Closed,
}

impl SessionState {
    pub const ALL: [SessionState; 8] = [
        SessionState::Starting,
        SessionState::Ready,
        SessionState::Working,
        SessionState::InputRequired,
        SessionState::Done,
        SessionState::Paused,
        SessionState::Failed,
        SessionState::Closed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Starting => "starting",
            SessionState::Ready => "ready",
            SessionState::Working => "working",
            SessionState::InputRequired => "input_required",
            SessionState::Done => "done",
            SessionState::Paused => "paused",
            SessionState::Failed => "failed",
            SessionState::Closed => "closed",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Failed | SessionState::Closed)
    }

    /// A prompt can start now.
    pub fn is_idle(self) -> bool {
        matches!(self, SessionState::Ready | SessionState::Done)
    }
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
