//! Bindings: wire encodings between a driver and an agent (spec §6), as pure
//! protocol layers. Processes and actors live above them.

pub mod a2a;
pub mod acp;
pub mod codex_exec;
pub mod error_text;
pub mod pty;
pub mod risk;
pub mod sse;
pub mod stream_json;
mod turn_end;

pub use turn_end::TurnEnd;
