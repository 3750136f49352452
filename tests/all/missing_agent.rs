//! A missing agent is a clear error, not a crash loop: `resolve` says the binary is
//! not on PATH (with the manifest's install hint), `chat` and `run` refuse before
//! spawning anything (exit 2, naming session, agent and binary), and a binary that
//! vanishes mid-run fails its session without a restart loop. Nothing says "Actor
//! panicked during startup" or "meltdown".

use std::time::{Duration, Instant};

use crate::common::{self, EnvMarker, capfleet, run_journal, sandboxed, wait_until};

/// Neither of the words of the crash loop this replaces.
fn assert_no_crash_loop(text: &str) {
    assert!(!text.contains("panicked"), "{text}");
    assert!(!text.contains("meltdown"), "{text}");
}

#[test]
fn resolve_says_the_binary_is_not_on_path_with_the_install_hint() {
    let dir = tempfile::tempdir().unwrap();
    let out = sandboxed(dir.path())
        .args(["resolve", "claude-code"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("`claude` is not on PATH")
            && stdout.contains("npm install -g @anthropic-ai/claude-code"),
        "{stdout}"
    );
    assert!(stderr.contains("`chat` and `run` refuse it"), "{stderr}");
    let json = sandboxed(dir.path())
        .args(["resolve", "claude-code", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v["binary"]["path"].is_null(), "{v}");
    assert!(v["binary"]["error"].as_str().unwrap().contains("claude"));
}

#[test]
fn chat_refuses_an_agent_whose_binary_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = sandboxed(dir.path())
        .args(["chat", "claude-code", "--task", "hello"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("session `claude-code`")
            && stderr.contains("agent `claude-code`")
            && stderr.contains("binary `claude` is not on PATH")
            && stderr.contains("npm install -g @anthropic-ai/claude-code"),
        "{stderr}"
    );
    assert_no_crash_loop(&stderr);
    assert!(started.elapsed() < Duration::from_secs(10), "no restarts");
}

#[test]
fn run_refuses_a_fleet_with_a_missing_agent_before_spawning_anything() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("fleet.toml"),
        "[fleet]\nname = \"m\"\nstart = [\"worker\"]\ntask = \"go\"\n\n\
         [[sessions]]\nname = \"worker\"\nagent = \"claude-code\"\n",
    )
    .unwrap();
    let out = sandboxed(d).args(["run", "fleet.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("session `worker`")
            && stderr.contains("agent `claude-code`")
            && stderr.contains("binary `claude` is not on PATH"),
        "{stderr}"
    );
    assert_no_crash_loop(&stderr);
    assert!(!d.join(".capfleet/runs").exists(), "no run was started");
    // The plan only warns.
    let plan = sandboxed(d)
        .args(["run", "--dry-run", "fleet.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&plan.stderr);
    assert_eq!(plan.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: session `worker`"), "{stderr}");
}

/// The agent's binary (a copy of capfleet) is deleted while its first agent runs;
/// the agent then crashes: the restart finds no binary, and the session fails at
/// once, saying so — one restart attempt (the crash's), no loop.
#[test]
fn a_binary_that_vanishes_mid_run_fails_its_session_without_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = d.join("vanishing-agent");
    std::fs::copy(common::BIN, &bin).unwrap();
    let m = EnvMarker::new("vanish");
    let (k, v) = m.pair();
    std::fs::write(
        d.join("crash.toml"),
        "[[turn]]\nsteps = [{ say = \"up\" }, { sleep_ms = 1500 }, { crash = 3 }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"v\"\nstart = [\"a\"]\ntask = \"go\"\n\n\
             [[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"crash.toml\"\n\
             argv = [\"{}\", \"sim\", \"--mode\", \"stream-json\"]\nenv = {{ {k} = \"{v}\" }}\n",
            bin.display()
        ),
    )
    .unwrap();
    let child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(10), || !m
            .processes()
            .is_empty()),
        "the agent runs"
    );
    std::fs::remove_file(&bin).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_no_crash_loop(&stderr);
    let records = run_journal(d);
    let restarts = records.iter().filter(|r| r["type"] == "restart").count();
    assert_eq!(restarts, 1, "the crash's restart only");
    let failed = records
        .iter()
        .find(|r| r["type"] == "failed")
        .unwrap_or_else(|| panic!("the session failed: {stderr}"));
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.contains("could not be started")
            && reason.contains("does not exist or is not executable")
            && reason.contains("vanishing-agent"),
        "{reason}"
    );
    assert_no_crash_loop(reason);
}
