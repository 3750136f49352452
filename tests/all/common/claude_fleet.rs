//! A fleet run with Claude Code's offline environment (apart from `peers`, which the
//! codex bench includes on its own).

use std::path::Path;

use super::fake_llm::FakeLlm;

/// `capfleet run fleet.toml --json` in `dir`, `fleet` written there as `fleet.toml`,
/// with Claude Code's offline environment against `fake` (`$HOME` `home`) and the
/// peer's directory first on `PATH` (a fleet names its agent's binary by name).
pub(crate) fn run_fleet_with_claude(
    fake: &FakeLlm,
    home: &Path,
    dir: &Path,
    fleet: &str,
) -> std::process::Output {
    let env = super::claude_env_on_path(fake, home, dir);
    std::fs::write(dir.join("fleet.toml"), fleet).expect("fleet.toml");
    super::capfleet(dir)
        .envs(env)
        .args(["run", "fleet.toml", "--json"])
        .output()
        .expect("capfleet run")
}
