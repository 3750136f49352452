//! `capfleet speak` as the official Claude Agent SDK runs it: an executable that
//! stands for Claude Code, and the SDK's drivers (`tests/support/agent_sdk_speak.mjs`:
//! two turns, a permission through `canUseTool`, an interrupt; `agent_sdk_end.mjs`:
//! three turns, one interrupted, read to the conversation's very end).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::EnvMarker;

/// An executable the SDK takes for Claude Code: `capfleet speak <args>` with whatever
/// the SDK appends, marked with `marker`.
pub(crate) fn cli(dir: &Path, args: &[&str], marker: &EnvMarker) -> PathBuf {
    let path = dir.join("claude-cap");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let body = format!(
        "#!/bin/sh\nexport {}={}\nexec {} speak {} \"$@\"\n",
        marker.key,
        marker.value,
        super::BIN,
        quoted.join(" ")
    );
    std::fs::write(&path, body).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

/// `node tests/support/<script> SDK_DIR CLI ARGS…` in `dir`: the SDK's driver `script`
/// run against `cli`; the one JSON object it prints.
fn node(script: &str, dir: &Path, cli: &Path, args: &[&str], mut cmd: Command) -> Value {
    let package = super::peer("claude-agent-sdk");
    let sdk_dir = package.ancestors().nth(4).expect("the peer's directory");
    let out = cmd
        .arg(super::support(script))
        .arg(sdk_dir)
        .arg(cli)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).expect(&stderr)
}

/// Run the SDK's two-turn query against `cli` in `dir`; what it delivered.
pub(crate) fn drive(dir: &Path, cli: &Path) -> Value {
    let mut cmd = Command::new("node");
    cmd.env("CAPFLEET_SIM_STATE", dir);
    node("agent_sdk_speak.mjs", dir, cli, &[], cmd)
}

/// Run the SDK's three-turn query against `cli` in `dir` to its very end (`cmd`:
/// `node` with the environment `cli` needs), turn `interrupt` (1-based, 0 for none)
/// interrupted at its first streamed text, then stdin closed: each `result`'s
/// subtype and `is_error`, the `error` the query ended with (null for a clean end),
/// and the CLI's `exit` (`code`, `signal`).
pub(crate) fn drive_to_end(dir: &Path, cli: &Path, interrupt: u32, cmd: Command) -> Value {
    node(
        "agent_sdk_end.mjs",
        dir,
        cli,
        &[&interrupt.to_string()],
        cmd,
    )
}

/// [`drive`], with what every such run shows checked: one Bash permission (`ls`)
/// through `canUseTool`, `system/init` first. What it delivered, and the
/// conversation's id.
pub(crate) fn drive_asking_bash(dir: &Path, cli: &Path) -> (Value, String) {
    let got = drive(dir, cli);
    assert_eq!(
        got["asked"],
        serde_json::json!([{"tool": "Bash", "input": {"command": "ls"}}])
    );
    let first = &got["turns"][0][0];
    assert_eq!(first["system"], "init", "{got:#}");
    let id = first["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    (got, id)
}

/// Run `speak` (`cmd`, marked with `marker`) on stream-json `prompts`, SIGTERM it
/// once a turn's first text is `started`: it exits 130, its last `result` is an error
/// naming the signal, nothing it started is left within 1 s. Every frame it wrote.
pub(crate) fn sigterm_when_started(
    cmd: Command,
    prompts: &[&str],
    marker: &EnvMarker,
) -> Vec<Value> {
    signal_when_started(cmd, prompts, marker, libc::SIGTERM, "SIGTERM")
}

/// [`sigterm_when_started`] with the signal `signal`, named `name`.
pub(crate) fn signal_when_started(
    mut cmd: Command,
    prompts: &[&str],
    marker: &EnvMarker,
    signal: i32,
    name: &str,
) -> Vec<Value> {
    let mut child = cmd
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for prompt in prompts {
        writeln!(
            stdin,
            r#"{{"type":"user","message":{{"role":"user","content":"{prompt}"}}}}"#
        )
        .unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut frames: Vec<Value> = Vec::new();
    // Read up to the first text `started`: the inner agents are now mid-turn.
    for line in lines.by_ref() {
        let frame: Value = serde_json::from_str(&line.unwrap()).expect("every line is a frame");
        let started = frame["message"]["content"][0]["text"] == "started";
        frames.push(frame);
        if started {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    for line in lines {
        frames.push(serde_json::from_str(&line.unwrap()).expect("every line is a frame"));
    }
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(status.code(), Some(130));
    let result = frames
        .iter()
        .rfind(|f| f["type"] == "result")
        .expect("a result");
    assert_eq!(result["is_error"], true);
    let error = result["errors"][0].as_str().unwrap_or_default();
    assert!(error.contains(name), "{result}");
    assert!(
        super::wait_until(Duration::from_secs(1), Duration::from_millis(20), || marker
            .processes()
            .is_empty()),
        "{:?}",
        marker.processes()
    );
    frames
}
