//! The simulator as the test agent: its shipped manifest, a library session running a
//! script, and a fleet's `[[sessions]]` entry for it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::session::SessionSpec;
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::events::urn;
use capfleet_wire::registry::Binding;

use super::procs::EnvMarker;

/// The shipped `config/agents/sim.toml`, validated.
pub(crate) fn manifest() -> Arc<Manifest> {
    shipped("sim.toml")
}

/// The shipped `config/agents/<file>`, validated.
pub(crate) fn shipped(file: &str) -> Arc<Manifest> {
    let src = std::fs::read_to_string(super::repo_root().join("config/agents").join(file)).unwrap();
    Arc::new(Manifest::parse(&src, file).unwrap().manifest)
}

/// A stream-json session `name` of fleet `fleet` on the simulator (this build's
/// binary), running `script` (written to `dir/<name>.toml`) in `dir`, marked with
/// `marker` for the no-survivor checks.
pub(crate) fn session_spec(
    dir: &Path,
    fleet: &str,
    name: &str,
    script: &str,
    marker: &EnvMarker,
) -> SessionSpec {
    spec_on(dir, fleet, name, script, marker, Binding::StreamJson)
}

/// [`session_spec`] on the TUI simulator (`config/agents/sim-tui.toml`), over a PTY.
pub(crate) fn tui_session_spec(
    dir: &Path,
    fleet: &str,
    name: &str,
    script: &str,
    marker: &EnvMarker,
) -> SessionSpec {
    spec_on(dir, fleet, name, script, marker, Binding::Pty)
}

fn spec_on(
    dir: &Path,
    fleet: &str,
    name: &str,
    script: &str,
    marker: &EnvMarker,
    binding: Binding,
) -> SessionSpec {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, script).unwrap();
    let config = SessionConfig::new(dir.display().to_string());
    let manifest = match binding {
        Binding::Pty => shipped("sim-tui.toml"),
        _ => manifest(),
    };
    let mut launch = LaunchSpec::new(urn(fleet, name), manifest, config);
    launch.program = Some(PathBuf::from(super::BIN));
    let (k, v) = marker.pair();
    launch.env = vec![
        ("CAPFLEET_SIM_SCRIPT".into(), path.display().to_string()),
        (k.into(), v.into()),
    ];
    SessionSpec::new(name, launch, binding)
}

/// A `[[sessions]]` entry for the simulator with `script`, the no-survivor marker and
/// `extra` lines.
pub(crate) fn fleet_session(name: &str, script: &str, marker: &EnvMarker, extra: &str) -> String {
    let (k, v) = marker.pair();
    format!(
        "[[sessions]]\nname = \"{name}\"\nagent = \"sim\"\nscript = \"{script}\"\nenv = {{ {k} = \"{v}\" }}\n{extra}\n"
    )
}
