//! The protocol crate's one integration-test binary: the wire types against the spec's
//! own examples (`protocol/tests/fixtures/spec/`) and manifests (`protocol/tests/fixtures/manifests/`).
//! Nothing here runs a process; `cargo nextest run -p capfleet-protocol`.

mod conformance_events;
mod manifest;
