//! Pinned third-party peers and their offline environment.
//!
//! `tests/support/install_peers.sh` decides where a peer lives and whether it
//! is installed; `tests/support/peer_env.sh` is the single source of truth for
//! a peer's offline environment. These helpers only run those scripts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::fake_llm::FakeLlm;
use super::support;

/// The executable of the installed pinned peer `name` (e.g. `"claude-code"`).
///
/// Panics if the peer is not installed: an interop test whose peer is missing
/// FAILS, it never skips.
pub(crate) fn peer(name: &str) -> PathBuf {
    try_peer(name).unwrap_or_else(|e| panic!("{e}"))
}

/// [`peer`] without the panic: `Err` explains how to install the peer.
pub(crate) fn try_peer(name: &str) -> Result<PathBuf, String> {
    let script = support("install_peers.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--path", name])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let how = format!(
        "run ./tests/run.sh (it installs the peers the suite uses) or \
         tests/support/install_peers.sh {name}"
    );
    if !out.status.success() {
        return Err(format!(
            "peer '{name}' is not installed: {}; {how}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !path.exists() {
        return Err(format!(
            "peer '{name}': {} does not exist although stamped as installed; {how}",
            path.display()
        ));
    }
    Ok(path)
}

/// The complete environment for Claude Code (2.1.337) offline against `fake`,
/// with `home` as HOME (seeded `$HOME/.claude.json`) and as the trusted workdir.
/// Use it with `Command::env_clear().envs(..)`: credential variables that
/// `peer_env.sh` unsets are absent. See [`claude_env_in`].
pub(crate) fn claude_env(fake: &FakeLlm, home: &Path) -> Vec<(String, String)> {
    claude_env_in(fake, home, home)
}

/// [`claude_env`] with a separate working directory (trusted in `.claude.json`).
pub(crate) fn claude_env_in(fake: &FakeLlm, home: &Path, workdir: &Path) -> Vec<(String, String)> {
    peer_env("claude", fake.port(), home, workdir)
}

/// [`claude_env_in`] with the pinned Claude Code's directory first on `PATH`: the
/// shipped manifests name its binary, `claude`, by name.
pub(crate) fn claude_env_on_path(
    fake: &FakeLlm,
    home: &Path,
    workdir: &Path,
) -> Vec<(String, String)> {
    let claude = peer("claude-code");
    let bin_dir = claude
        .parent()
        .expect("peer's directory")
        .display()
        .to_string();
    let mut env = claude_env_in(fake, home, workdir);
    match env.iter_mut().find(|(key, _)| key == "PATH") {
        Some((_, value)) => *value = format!("{bin_dir}:{value}"),
        None => env.push(("PATH".into(), bin_dir)),
    }
    env
}

/// Runs `peer_env.sh PEER PORT WORKDIR HOME -- env -0` (inheriting this
/// process's environment) and returns what it prints, minus the shell's own
/// bookkeeping variables (`PWD`, `OLDPWD`, `SHLVL`, `_`).
pub(crate) fn peer_env(
    peer: &str,
    port: u16,
    home: &Path,
    workdir: &Path,
) -> Vec<(String, String)> {
    let script = support("peer_env.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(peer)
        .arg(port.to_string())
        .arg(workdir)
        .arg(home)
        .args(["--", "env", "-0"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    if !out.status.success() {
        panic!(
            "{} {peer} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.stdout
        .split(|&b| b == 0)
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .filter(|(k, _)| !matches!(k.as_str(), "PWD" | "OLDPWD" | "SHLVL" | "_"))
        .collect()
}
