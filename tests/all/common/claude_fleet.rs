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
    let claude = super::peer("claude-code");
    let bin_dir = claude
        .parent()
        .expect("peer's directory")
        .display()
        .to_string();
    let mut env = super::claude_env_in(fake, home, dir);
    for (key, value) in &mut env {
        if key == "PATH" {
            *value = format!("{bin_dir}:{value}");
        }
    }
    std::fs::write(dir.join("fleet.toml"), fleet).expect("fleet.toml");
    super::capfleet(dir)
        .envs(env)
        .args(["run", "fleet.toml", "--json"])
        .output()
        .expect("capfleet run")
}
