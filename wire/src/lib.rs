//! capfleet's wire floor: everything between an agent and the engine's session.
//!
//! - [`process`]: process plumbing (spawn, process groups, lines, halting, sweeping);
//! - [`bindings`]: the wire encodings (spec §6) as pure tables from frames to CAP events;
//! - [`rpc`]: the reverse RPC an agent calls capfleet back with;
//! - [`registry`]: the installed agents, their manifests and the binding each takes;
//! - [`driver`]: the contract between a session and its driver, and the drivers — the
//!   one place a binding is named (its checklist: the module's doc);
//! - [`supervision`]: the restart policy, rate limits and poison turns, as pure policy;
//! - [`events`]: the run's bus, the event type every producer publishes;
//! - [`chaos`]: the fault kinds, and the injectors at the wire (bytes, connections,
//!   signals) a chaos run installs;
//! - [`clock`], [`sync`]: small shared bits.
//!
//! Nothing here names a session, a router or a fleet: the engine crate
//! (`capfleet-engine`) stands on this one, never the other way (`cargo tree -p
//! capfleet-wire` holds no engine; `tests/all/floors.rs` keeps it so).

pub mod bindings;
pub mod chaos;
pub mod clock;
pub mod driver;
pub mod events;
pub mod process;
pub mod registry;
pub mod rpc;
pub mod supervision;
pub mod sync;

pub use capfleet_protocol::{manifest, protocol, tomldoc};
