//! Chaos runs (`[chaos]` in fleet.toml, `capfleet run --chaos SPEC`): faults injected
//! into a run on purpose, from a seed, so that a run's faults are reproducible. The
//! fault kinds and the injectors at the wire (bytes, connections, signals) are the
//! wire crate's (`capfleet_wire::chaos`); the engine's part:
//!
//! - [`spec`]: the faults as written (kinds, rates, targets, the seed), read from the
//!   fleet file's `[chaos]` table or the inline `--chaos` syntax into one
//!   [`spec::ChaosSpec`];
//! - [`schedule`]: the seeded decisions — which fault hits which session at which turn
//!   attempt, and the timed (per-minute, `at`) faults' sequence — pure functions of
//!   the seed and the fault's coordinates, never of wall-clock timing;
//! - [`apply`]: a spec's faults as the injectors take them, and the handles a session
//!   of a chaos run is given;
//! - [`report`]: the report of a chaos run, read back from its journal (it reads the
//!   journal and the process table).
//!
//! The run's task that fires the timed faults (and `self_kill`) is the run's
//! (`run/timed.rs`); the session's own part is `session/chaos.rs`. Every fault is an
//! `EventBody::Chaos` record, published (and so journaled) before the fault is
//! applied, and a `chaos` span.

pub(crate) mod apply;
pub(crate) mod report;
pub(crate) mod schedule;
pub(crate) mod spec;

pub use report::events::{EMITTED, Events};
pub use report::metrics::SERIES;
pub use report::{Mttr, Report};
pub use spec::{ChaosSpec, Entry, Raw, Target};
