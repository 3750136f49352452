//! capfleet's engine crate, on the wire crate (`capfleet-wire`: processes, bindings,
//! drivers, the bus) and the protocol crate.
//!
//! Layering, never reversed: [`protocol`] <- `capfleet-wire` <- this crate <- the app.
//! A lower floor that needs something of a higher one is handed it (a handle, a
//! trait object, a value), never imports it. The actors here, in floors:
//!
//! 1. [`session`] and [`workspace`] (on the wire's bus and drivers);
//! 2. [`router`], and the fleet floor: [`fleet`], [`answerer`], [`journal`],
//!    [`budget`], [`tap`], [`telemetry`] — the consumers read the bus, never a session;
//! 3. [`resume`] (what a resumed run goes on from) and [`chaos`]' spec, schedule and report;
//! 4. [`root`] and [`run`], which assemble the tree ([`death`]: what a child's death does).
//!
//! [`protocol`], [`manifest`] and [`tomldoc`] live in the `capfleet-protocol` crate and are
//! re-exported here at the paths the engine and its users name them by.

pub mod answerer;
pub mod budget;
pub mod chaos;
pub mod death;
pub mod error;
pub mod fault;
mod fleet;
pub mod journal;
pub mod pricing;
pub mod resume;
pub mod root;
pub mod router;
pub mod run;
pub mod session;
mod tap;
pub mod telemetry;
pub mod workspace;

pub use capfleet_protocol::{manifest, protocol, tomldoc};
