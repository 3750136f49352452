//! capfleet's engine crate.
//!
//! Layering, never reversed: [`protocol`] <- [`manifest`] / [`registry`] <- bindings <- actors.
//! The protocol types know no actor; a binding knows no fleet; nothing here knows the CLI.

pub mod answerer;
pub mod bindings;
pub mod budget;
pub mod clock;
pub mod driver;
pub mod error;
pub mod fleet;
pub mod journal;
pub mod manifest;
pub mod pricing;
pub mod process;
pub mod protocol;
pub mod registry;
pub mod root;
pub mod router;
pub mod rpc;
pub mod run;
pub mod session;
pub mod supervision;
pub mod sync;
pub mod tap;
pub mod telemetry;
pub mod tomldoc;
pub mod workspace;
