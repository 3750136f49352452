//! The stream-json binding (spec §6.2, Appendix C.1) as Claude Code 2.1 speaks it:
//! the pure protocol layer. No process, no actor: the driver owns the child, feeds
//! its stdout lines to [`StreamJsonMapper::on_line`] and writes the [`outbound`]
//! lines to its stdin.
//!
//! - [`frames`]: typed inbound frames, parsed once, borrowing from the line.
//! - [`mapper`]: the per-session state machine (frames → [`Output`]s).
//! - [`control`]: permission / ask requests, their answers and withdrawals.
//! - `streaming`: de-duplication of streamed text against snapshots.
//! - `rate_limit`: Claude Code's `rate_limit_event` (subscription limits).
//! - `result`: usage, per-turn cost, stop reasons and errors of a turn's end.
//! - [`risk`]: scope and risk of a tool call.
//! - [`outbound`]: the frames we write.
//! - [`argv`]: the command line from manifest + session config.

pub(crate) mod argv;
pub(crate) mod control;
pub(crate) mod frames;
pub(crate) mod mapper;
#[cfg(test)]
mod mapper_tests;
pub mod outbound;
pub(crate) mod output;
mod rate_limit;
mod result;
#[cfg(test)]
mod result_tests;
pub(crate) mod risk;
mod streaming;
pub(crate) mod todos;

pub use argv::{ArgvError, ArgvWarning, build_argv};
pub use control::{PendingKind, ResponseError};
pub use mapper::StreamJsonMapper;
pub(crate) use output::TurnEnd;
pub use output::{ControlAck, MapperStats, Output};
