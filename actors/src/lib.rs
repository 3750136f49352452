//! capfleet's engine crate.
//!
//! Layering, never reversed: [`protocol`] <- [`manifest`] / [`registry`] <- bindings <- actors.
//! The protocol types know no actor; a binding knows no fleet; nothing here knows the CLI.
//! [`protocol`], [`manifest`] and [`tomldoc`] live in the `capfleet-protocol` crate and are
//! re-exported here at the paths the engine and its users name them by.

// `pub` items of private modules in the session, driver, router and workspace code,
// which the issue-12 restructuring rewrites: `cargo fix` makes them `pub(crate)` once
// it has landed, and this allow goes.
#![allow(unreachable_pub)]

pub mod answerer;
pub mod bindings;
pub mod budget;
pub mod clock;
pub mod driver;
pub mod fleet;
pub mod journal;
pub mod pricing;
pub mod process;
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
pub mod workspace;

pub use capfleet_protocol::{manifest, protocol, tomldoc};
