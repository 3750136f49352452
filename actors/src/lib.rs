//! capfleet's engine crate.
//!
//! Layering, never reversed: [`protocol`] <- [`manifest`] / [`registry`] <- bindings <- actors.
//! The protocol types know no actor; a binding knows no fleet; nothing here knows the CLI.
//!
//! The actors, in floors, each importing only from the floors below it:
//!
//! 1. [`events`], the bus: the run's event type, its [`Publisher`](events::Publisher),
//!    the stream URNs, the requests a session hands its answerer and their answers,
//!    the trace context;
//! 2. [`driver`] (a driver reaches its session through a narrow sink handle);
//! 3. [`session`] and [`workspace`];
//! 4. [`router`], and the fleet floor: [`fleet`], [`answerer`], [`journal`],
//!    [`budget`], [`tap`], [`telemetry`] — the consumers read the bus, never a session;
//! 5. [`root`] and [`run`], which assemble the tree ([`death`]: what a child's death does).
//!
//! [`protocol`], [`manifest`] and [`tomldoc`] live in the `capfleet-protocol` crate and are
//! re-exported here at the paths the engine and its users name them by.

pub mod answerer;
pub mod bindings;
pub mod budget;
pub mod chaos;
pub mod clock;
pub mod death;
pub mod driver;
pub mod error;
pub mod events;
pub mod fault;
pub mod fleet;
pub mod journal;
pub mod pricing;
pub mod process;
pub mod registry;
pub mod resume;
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
