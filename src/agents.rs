//! The application's view of agents: the registry configured from the environment
//! and the shipped manifests, and the bindings this build drives.

use capfleet_actors::registry::{Binding, Registry, RegistryConfig};

use crate::shipped::SHIPPED;

/// The bindings capfleet drives, in the spec's priority order. gRPC is left out: no
/// agent we drive ships the `CapAgent` service, so selection falls through past it.
pub const SUPPORTED_BINDINGS: &[Binding] = &[
    Binding::StreamJson,
    Binding::AcpStdio,
    Binding::A2a,
    Binding::Pty,
];

/// The registry over the real places (`PATH`, `~/.config/cap/agents`, …) plus the
/// manifests embedded in this binary.
pub fn registry() -> Registry {
    let shipped = SHIPPED
        .iter()
        .map(|(name, src)| ((*name).to_owned(), (*src).to_owned()))
        .collect();
    Registry::new(RegistryConfig::from_env(shipped))
}
