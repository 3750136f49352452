//! Chaos: faults injected into a run on purpose, and what they did.
//!
//! - [`report`]: the report of a chaos run, read back from its journal.

pub mod report;
