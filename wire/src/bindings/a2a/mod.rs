//! The A2A binding's wire mapping (spec §6.5, §11, Appendix C.4), without actors or
//! I/O: the agent card and the choice of interface and spelling ([`card`]), the two
//! spellings of the JSON-RPC methods, states and parts ([`spelling`]), CAP events as
//! marked data parts ([`datapart`]), Gemini CLI's tool-call data parts
//! ([`coder_agent`]), SSE frames to CAP events ([`frames`]), the frames and card a
//! server sends ([`outbound`]: the simulator's A2A mode, `capfleet serve --expose`),
//! where a conversation goes on from after a loss ([`resume`]), and the questions
//! raised on a connection, none twice ([`asked`]).
//! The driver that speaks it over HTTP is `driver::a2a`.

mod asked;
pub(crate) mod card;
pub(crate) mod coder_agent;
pub mod datapart;
mod file_part;
pub(crate) mod frames;
#[cfg(test)]
mod frames_tests;
pub mod outbound;
pub(crate) mod resume;
pub(crate) mod spelling;

pub use spelling::Part;

pub use card::{CAP_EXTENSION, Card};
pub(crate) use card::{CardError, Choice, SchemeKind};
pub use frames::FrameMapper;
pub(crate) use frames::Mapped;
pub(crate) use resume::ResumePoint;
pub use spelling::{Method, Spelling, TaskState};
