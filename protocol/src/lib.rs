//! capfleet's wire layer: what every other crate speaks, and nothing that runs.
//!
//! Layering, never reversed: [`tomldoc`] <- [`protocol`] <- [`manifest`]. No actor, no
//! process, no binding: the wire and engine crates (`capfleet-wire`, `capfleet-engine`) and the CLI build on these types.
//!
//! - [`protocol`]: CAP events (typed, direction and required fields as data,
//!   vocabularies), the error registry, `SessionConfig`, coding-profile payloads.
//! - [`manifest`]: agent manifests (spec §5), validated with every error's line.
//! - [`tomldoc`]: the TOML reader that records every finding with its location.
#![warn(missing_docs)]

pub mod manifest;
pub mod protocol;
pub mod tomldoc;
