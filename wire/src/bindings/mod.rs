//! Bindings: wire encodings between a driver and an agent (spec §6), as pure
//! protocol layers. Processes and actors live above them.

pub mod a2a;
pub mod acp;
pub mod codex_app;
pub mod codex_exec;
pub(crate) mod error_text;
pub mod pty;
pub mod risk;
pub mod sse;
pub mod stream_json;
mod turn_end;

pub(crate) use turn_end::TurnEnd;

/// The `cap.error` code of a well-formed frame that arrived where none may (a
/// binding's own code: the spec's `parse_failed` is for output that cannot be parsed).
/// Any binding may emit it; the run's telemetry counts it (through the driver
/// contract, [`crate::driver::STRAY_FRAME`]).
pub const STRAY_FRAME: &str = "stray_frame";
