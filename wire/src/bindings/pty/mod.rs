//! The PTY binding (spec §6.1, Appendix A) as pure, synchronous code: the screen a
//! human would see ([`screen`]), when the agent is ready or done ([`settle`]), what
//! its completed lines mean ([`lines`]) and how to type into it ([`input`]). The
//! PTY wire (`crate::driver::pty`) drives them on the clock; the driver skeleton owns
//! the process.

mod classify;
pub(crate) mod input;
pub(crate) mod lines;
mod plan;
pub(crate) mod redraw;
pub(crate) mod screen;
pub(crate) mod settle;

pub(crate) use input::{Paste, answer_bytes, prompt_bytes};
pub use lines::LineParser;
pub use redraw::RowScan;
pub use screen::{Fed, Screen};
pub(crate) use settle::{Settle, Verdict};
