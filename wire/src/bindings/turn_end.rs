//! How a turn ended, as a binding reports it: what every driver hands its session.

use crate::protocol::StopReason;

/// How a turn ended, as the binding reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub stop_reason: StopReason,
    pub is_error: bool,
    /// The agent's own summary of the turn's text, when the binding gives one.
    pub result_text: Option<String>,
}

impl TurnEnd {
    /// A turn that ended for `stop_reason`, without a summary text.
    pub fn new(stop_reason: StopReason, is_error: bool) -> Self {
        Self {
            stop_reason,
            is_error,
            result_text: None,
        }
    }

    /// A turn cancelled on request (not an error).
    pub fn cancelled() -> Self {
        Self::new(StopReason::Cancelled, false)
    }
}
