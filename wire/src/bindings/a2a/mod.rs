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
pub mod card;
pub mod coder_agent;
pub mod datapart;
mod file_part;
pub mod frames;
#[cfg(test)]
mod frames_tests;
pub mod outbound;
pub mod resume;
pub mod spelling;

pub use card::{CAP_EXTENSION, Card, CardError, Choice, Scheme, SchemeKind};
pub use frames::{FrameMapper, Mapped};
pub use resume::ResumePoint;
pub use spelling::{Method, Spelling, TaskState};
