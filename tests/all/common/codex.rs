//! Codex CLI (the suite's pinned 0.171.0) in `capfleet chat --json`, offline against
//! the fake LLM, on the binding asked for: the shipped manifest as it is (`codex
//! app-server`, which the pinned Codex has) or with its app-server fast path taken
//! out (`codex exec --json`, what a Codex without `app-server` gets).

use std::time::Duration;

use super::chat::{Run, assert_no_survivor, chat};
pub(crate) use super::codex_manifest::{Via, manifest};
use super::{EnvMarker, peer};

/// `capfleet chat <codex manifest> --json` with these tasks and `extra` arguments
/// against the fake LLM on `port`, in the work directory `work`, Codex found on the
/// session's `PATH`; SIGINT after `interrupt` if given. Nothing marked survives it.
pub(crate) fn codex_chat(
    via: Via,
    port: u16,
    work: &std::path::Path,
    tasks: &[&str],
    extra: &[&str],
    interrupt: Option<Duration>,
    marker: &EnvMarker,
) -> Run {
    let codex = peer("codex");
    let bin = codex.parent().expect("bin dir");
    let home = tempfile::tempdir().expect("home");
    let dir = tempfile::tempdir().expect("manifest dir");
    let manifest_path = dir.path().join("codex.toml");
    std::fs::write(&manifest_path, manifest(via)).expect("manifest");
    let mut env: Vec<String> = super::peers::peer_env("codex", port, home.path(), work)
        .into_iter()
        .filter(|(k, _)| k != "PATH")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let path = std::env::var("PATH").unwrap_or_default();
    env.push(format!("PATH={}:{path}", bin.display()));
    let mut args = vec!["--cwd", work.to_str().expect("utf8")];
    for task in tasks {
        args.extend(["--task", task]);
    }
    for kv in &env {
        args.extend(["--env", kv.as_str()]);
    }
    args.extend(extra);
    let run = chat(
        manifest_path.to_str().expect("utf8"),
        &args,
        marker,
        interrupt,
    );
    assert_no_survivor(marker);
    run
}

/// The marked processes whose command line contains `word`, with that line.
pub(crate) fn processes_with(marker: &EnvMarker, word: &str) -> Vec<(i32, String)> {
    marker
        .processes()
        .into_iter()
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(word).then_some((pid, line))
        })
        .collect()
}
