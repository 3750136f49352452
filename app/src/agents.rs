//! The application's view of agents: the registry configured from the environment
//! and the shipped manifests, and how capfleet's own agents (the simulator) are
//! started. The bindings this build drives are the engine's
//! ([`capfleet_wire::driver::SUPPORTED`]).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use capfleet_engine::pricing::Pricing;

use capfleet_engine::manifest::Manifest;
use capfleet_wire::registry::{Registry, RegistryConfig};

use crate::shipped::SHIPPED;

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
pub(crate) fn program_override(manifest: &Manifest) -> Option<PathBuf> {
    (manifest.agent.binary == "capfleet")
        .then(std::env::current_exe)
        .and_then(Result::ok)
}

/// The shipped pricing table (`config/pricing.toml`), for agents that report tokens
/// but no cost.
pub(crate) fn pricing() -> Arc<Pricing> {
    static TABLE: OnceLock<Arc<Pricing>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let src = include_str!("../../config/pricing.toml");
            // A shipped file that does not parse is a build defect: the test
            // `shipped_pricing_parses` keeps it from shipping.
            Arc::new(Pricing::parse(src).unwrap_or_default())
        })
        .clone()
}

/// The variable naming a simulator's script.
pub(crate) const SIM_SCRIPT_ENV: &str = "CAPFLEET_SIM_SCRIPT";

/// What `chat` and `fleet.toml` say about one session of an agent.
pub struct SessionRequest<'a> {
    pub fleet: &'a str,
    pub name: String,
    pub manifest: Arc<Manifest>,
    /// Absolute, existing.
    pub cwd: &'a std::path::Path,
    pub model: Option<String>,
    pub system_prompt: Option<String>,
    pub permission_mode: Option<capfleet_engine::protocol::PermissionMode>,
    pub argv: Option<Vec<String>>,
    pub env: Vec<(String, String)>,
    /// A simulator script (absolute), passed as [`SIM_SCRIPT_ENV`].
    pub script: Option<&'a std::path::Path>,
}

/// The one way the application turns an agent into a session spec: the config sent
/// first, the binding chosen, the launch (argv override, capfleet's own executable
/// for its agents, environment, script), the pricing table. Restart policy, timeouts
/// and limits are the caller's.
pub fn session_spec(r: SessionRequest<'_>) -> capfleet_engine::session::SessionSpec {
    use capfleet_engine::protocol::SessionConfig;
    use capfleet_wire::driver::LaunchSpec;
    use capfleet_wire::registry::select_binding;

    let mut config = SessionConfig::new(r.cwd.display().to_string());
    if let Some(model) = r.model {
        config = config.with_model(model);
    }
    if let Some(prompt) = r.system_prompt {
        config = config.with_system_prompt(prompt);
    }
    if let Some(mode) = r.permission_mode {
        config = config.with_permission_mode(mode);
    }
    let binding = select_binding(&r.manifest, capfleet_wire::driver::SUPPORTED).binding;
    let urn = capfleet_wire::events::urn(r.fleet, &r.name);
    let mut launch = LaunchSpec::new(urn, r.manifest.clone(), config);
    launch.shape = capfleet_wire::driver::natural_shape(binding, &r.manifest);
    launch.argv = r.argv;
    launch.program = program_override(&r.manifest);
    launch.env = r.env;
    if let Some(script) = r.script {
        launch
            .env
            .push((SIM_SCRIPT_ENV.into(), script.display().to_string()));
    }
    let mut spec = capfleet_engine::session::SessionSpec::new(r.name, launch, binding);
    spec.pricing = Some(pricing());
    spec
}

/// What to say when `spec`'s agent program is not there (`None` when it is): the
/// session, the agent and the binary, then how to fix it — the manifest's install
/// hint (`agent.x-install`) when it has one, and `override_with` (how this verb
/// points a session at another command).
pub fn missing_agent(
    spec: &capfleet_engine::session::SessionSpec,
    override_with: &str,
) -> Option<String> {
    use capfleet_wire::driver::LaunchError;
    let LaunchError::NotFound {
        agent,
        program,
        on_path,
        ..
    } = spec.launch.missing_program()?
    else {
        return None;
    };
    let what = if on_path {
        format!("binary `{program}` is not on PATH")
    } else {
        format!("`{program}` does not exist or is not executable")
    };
    let fix = match &spec.launch.manifest.agent.install {
        Some(install) => format!("install it (`{install}`) or {override_with}"),
        None => format!("install it or {override_with}"),
    };
    Some(format!(
        "session `{}`: agent `{agent}`: {what}; {fix}",
        spec.name
    ))
}

/// How `resolve` reports an agent's binary: where it is, or why it cannot run.
pub fn binary_status(manifest: &Manifest) -> Result<PathBuf, String> {
    if let Some(own) = program_override(manifest) {
        return Ok(own);
    }
    let binary = std::path::Path::new(&manifest.agent.binary);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    capfleet_wire::process::find_program(binary, &cwd, None).ok_or_else(|| {
        let hint = manifest
            .agent
            .install
            .as_ref()
            .map(|i| format!(" (install: `{i}`)"))
            .unwrap_or_default();
        format!("`{}` is not on PATH{hint}", manifest.agent.binary)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn shipped_pricing_parses() {
        let p = capfleet_engine::pricing::Pricing::parse(include_str!("../../config/pricing.toml"))
            .expect("config/pricing.toml parses");
        assert!(p.price("claude-opus-4-8[1m]").is_some());
        assert!(
            p.price("gpt-5-mini").unwrap().input_per_mtok
                < p.price("gpt-5").unwrap().input_per_mtok
        );
        // The families the shipped manifests' agents default to, by their ids.
        let input = |m: &str| p.price(m).map(|p| p.input_per_mtok);
        for (model, usd) in [
            ("claude-opus-4-5-20251101", 5.0),
            ("claude-opus-4-1-20250805", 15.0),
            ("claude-opus-4-20250514", 15.0),
            ("claude-sonnet-4-5-20250929", 3.0),
            ("claude-haiku-4-5-20251001", 1.0),
            ("gpt-5-codex", 1.25),
            ("gpt-5.1-codex", 1.25),
            ("gpt-5.1-codex-mini", 0.25),
            ("gemini-3-pro-preview", 2.0),
            ("gemini-2.5-flash", 0.30),
        ] {
            assert_eq!(input(model), Some(usd), "{model}");
        }
        assert_eq!(input("fake-model"), None);
    }
}
