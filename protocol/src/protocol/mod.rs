//! CAP core protocol types (spec §7, §14): events, directions and required fields,
//! the error registry and `SessionConfig`, plus the coding profile's artifact
//! payloads. Knows no actor and no binding.
//!
//! - [`kinds::KINDS`]: the event-kind table (direction, required and vocabulary
//!   fields) that [`decode`] enforces.
//! - [`CapEvent`]: one typed value per kind, tagged by `"kind"` on the wire.
//! - [`decode_event`]: one NDJSON line to a validated [`CapEvent`].

pub mod agent_events;
pub mod coding;
pub mod control_events;
pub mod decode;
pub mod errors;
pub mod event;
pub mod kinds;
pub mod meta;
pub mod nullable;
pub mod session_config;
pub mod vocab;

pub use agent_events::{
    Artifact, AskUser, ErrorEvent, FsChange, PermissionRequest, Plan, PlanEntry, PtyRawBytes,
    SessionReady, TextChunk, Thought, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage,
};
pub use control_events::{AskUserAnswer, Cancel, PermissionResponse, UserInputInject};
pub use decode::{
    DecodeError, decode_event, decode_event_directed, decode_trusted, decode_value,
    decode_value_directed,
};
pub use errors::{CapCode, ErrorKind};
pub use event::{CapEvent, PROTOCOL_VERSION};
pub use kinds::{EventKind, KINDS, KindSpec, kind_spec};
pub use meta::{HasMeta, META_LATE_OUTPUT, Meta, is_late_output};
pub use nullable::Nullable;
pub use session_config::SessionConfig;
pub use vocab::{
    CancelScope, Channel, Decision, Direction, FsEvent, PermissionMode, PermissionScope,
    PlanStatus, Priority, RiskLevel, StopReason,
};
