//! What the mapper hands to the session: CAP events plus binding-level signals the
//! driver acts on (turn ends, withdrawn permissions, control acks).

use serde_json::Value;

use crate::protocol::{CapEvent, StopReason};

/// One result of mapping a line, in stream order.
// `Event` is nearly every output; boxing it would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A CAP event for the orchestrator (and the journal).
    Event(CapEvent),
    /// The agent finished a turn (`result` frame); follows that turn's `cap.usage`
    /// (and `cap.error`, if any).
    TurnEnd(TurnEnd),
    /// The agent withdrew a pending `can_use_tool` (`control_cancel_request`, e.g. on
    /// interrupt): the `cap.permission.request` / `cap.ask_user` with this id must not
    /// be answered any more.
    PermissionWithdrawn {
        req_id: String,
        /// The tool call the request was about.
        tool_use_id: Option<String>,
    },
    /// The agent answered one of our control requests (e.g. `interrupt`).
    ControlAck(ControlAck),
    /// The agent sent a control request this binding does not handle; the driver
    /// should answer it with [`super::outbound::control_error_response`], or the
    /// agent may wait for it.
    UnsupportedControlRequest { request_id: String, subtype: String },
}

/// The end of one turn, from the `result` frame.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub stop_reason: StopReason,
    /// `result.is_error` (true for interrupts too: see `stop_reason`).
    pub is_error: bool,
    /// `result.result`: the last text of the turn, when given.
    pub result_text: Option<String>,
    /// `result.subtype`, e.g. `success`, `error_during_execution`.
    pub subtype: String,
}

/// The agent's reply to a control request we sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlAck {
    pub request_id: String,
    /// `Ok(response body)` for `subtype: "success"`, `Err(message)` otherwise.
    pub result: Result<Option<Value>, String>,
}

/// Counters of what the mapper saw, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MapperStats {
    /// Non-blank lines seen.
    pub frames: u64,
    /// Well-formed frames with nothing to map (unknown types/subtypes, status, ...).
    pub ignored_frames: u64,
    /// Lines that were not a JSON object, or too long; each also yields a
    /// `cap.error` `parse_failed`.
    pub malformed_frames: u64,
    /// Well-formed frames where none may come (a `result` before `init` or outside
    /// any turn); each also yields a `cap.error` `stray_frame`.
    pub stray_frames: u64,
    /// CAP events emitted.
    pub events: u64,
}
