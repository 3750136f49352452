//! The application's view of agents: the registry configured from the environment
//! and the shipped manifests, the bindings this build drives, and how capfleet's own
//! agents (the simulator) are started.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use capfleet_actors::pricing::Pricing;

use capfleet_actors::manifest::Manifest;
use capfleet_actors::registry::{Binding, Registry, RegistryConfig};

use crate::shipped::SHIPPED;

/// The bindings this build has drivers for, in the spec's priority order. Selection
/// always falls through to PTY.
pub const SUPPORTED_BINDINGS: &[Binding] = &[Binding::StreamJson, Binding::AcpStdio, Binding::Pty];

/// The registry over the real places (`PATH`, `~/.config/cap/agents`, …) plus the
/// manifests embedded in this binary.
pub fn registry() -> Registry {
    let shipped = SHIPPED
        .iter()
        .map(|(name, src)| ((*name).to_owned(), (*src).to_owned()))
        .collect();
    Registry::new(RegistryConfig::from_env(shipped))
}

/// Agents whose binary is `capfleet` (the simulator, capfleet as an agent) run this
/// very executable, whether or not a `capfleet` is on `PATH`.
pub fn program_override(manifest: &Manifest) -> Option<PathBuf> {
    (manifest.agent.binary == "capfleet")
        .then(std::env::current_exe)
        .and_then(Result::ok)
}

/// The shipped pricing table (`config/pricing.toml`), for agents that report tokens
/// but no cost.
pub fn pricing() -> Arc<Pricing> {
    static TABLE: OnceLock<Arc<Pricing>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let src = include_str!("../config/pricing.toml");
            // A shipped file that does not parse is a build defect: the test
            // `shipped_pricing_parses` keeps it from shipping.
            Arc::new(Pricing::parse(src).unwrap_or_default())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn shipped_pricing_parses() {
        let p = capfleet_actors::pricing::Pricing::parse(include_str!("../config/pricing.toml"))
            .expect("config/pricing.toml parses");
        assert!(p.price("claude-opus-4-8[1m]").is_some());
        assert!(
            p.price("gpt-5-mini").unwrap().input_per_mtok
                < p.price("gpt-5").unwrap().input_per_mtok
        );
    }
}
