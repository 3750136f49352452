//! The ACP-stdio binding (spec §6.4, Appendix C.3) as a pure protocol layer: ACP
//! `session/update` kinds to CAP events, permission options to CAP decisions and back,
//! tool kinds to risk levels. Wire types come from the `agent-client-protocol` crate;
//! the connection and the process live in [`crate::driver::acp`].

pub(crate) mod diff;
pub(crate) mod mapper;
pub(crate) mod permission;
pub(crate) mod usage;

pub use mapper::AcpMapper;
pub(crate) use permission::{option_for, risk_of, stop_reason};
