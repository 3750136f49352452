//! A span-aware TOML document reader shared by every config loader (agent manifests,
//! `fleet.toml`): typed getters that record every finding — with origin, 1-based line
//! and dotted key — instead of stopping at the first.
//!
//! Each loader brings its own error type by implementing [`Finding`]; warnings
//! (unknown keys, remarks) are the same for all.

mod finding;
mod reader;

pub use finding::{Finding, Location, Warning, WarningKind, nearest};
pub use reader::{Reader, Wire, join, unknown};
