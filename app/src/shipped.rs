//! The manifests shipped in `config/agents/`, embedded at build time (see `build.rs`):
//! `SHIPPED` (every manifest by registry name) and `OWN_MANIFEST` (capfleet's own).

include!(concat!(env!("OUT_DIR"), "/shipped_manifests.rs"));
