//! Real ACP peers end to end through `capfleet chat --json`, offline against the
//! project's fake LLM: claude-agent-acp 0.23.1 (a scripted Read + Write with a
//! permission request, answered by policy or denied fail-safe), Gemini CLI 0.61.0
//! and opencode 1.18.33 (one turn answered each).
//!
//! claude-agent-acp 0.23.1 runs Claude Code's own Read/Write tools in its process
//! (its `readTextFile`/`writeTextFile` are never called), so the file effect is
//! asserted on disk, and the Read through what the model was sent next. Gemini's
//! write_file does go through capfleet's `fs/read_text_file` + `fs/write_text_file`
//! (seen in the SDK's wire trace).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{FakeLlm, of_kind, of_type, texts};
use serde_json::{Value, json};

/// A real peer's first turn can take a while (node start-up, big system prompts).
const LIMIT: Duration = Duration::from_secs(150);

/// A peer to chat with: its `peer_env.sh` name, shipped manifest and argv.
struct Peer<'a> {
    fake: &'a FakeLlm,
    env: &'a str,
    manifest: &'a str,
    argv: &'a [String],
}

/// `capfleet chat <shipped manifest> --json --cwd ws -t ... <extra> --argv <argv>`
/// in the peer's offline environment (`peer_env.sh`, HOME = `home`). Also returns
/// capfleet's stderr, where the ACP SDK traced every JSON-RPC message.
fn chat(
    p: &Peer<'_>,
    ws: &Path,
    home: &Path,
    tasks: &[&str],
    extra: &[&str],
) -> (Vec<Value>, Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capfleet"));
    let log = home.join("capfleet.stderr");
    c.env_clear()
        .envs(common::peer_env(p.env, p.fake.port(), home, ws))
        // The SDK traces every JSON-RPC message: proof of what went over the wire.
        .env("CAPFLEET_LOG", "agent_client_protocol=trace")
        .arg("chat")
        .arg(common::repo_root().join("config/agents").join(p.manifest))
        .arg("--json")
        .arg("--cwd")
        .arg(ws);
    for t in tasks {
        c.args(["-t", t]);
    }
    c.args(["--restart", "temporary"])
        .args(extra)
        .arg("--argv")
        .args(p.argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("stderr file"));
    let (ev, code) = common::run_chat(c, None, LIMIT);
    let wire = std::fs::read_to_string(&log).unwrap_or_default();
    (ev, code, wire)
}

fn path_of(name: &str) -> String {
    common::peer(name).display().to_string()
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().expect("ws");
    let home = tempfile::tempdir().expect("home");
    (ws, home)
}

/// The model's requests that carry `needle` somewhere in their body.
fn requests_with(fake: &FakeLlm, needle: &str) -> usize {
    fake.requests()
        .iter()
        .filter(|r| r["body"].to_string().contains(needle))
        .count()
}

/// Claude reads `in.txt`, then writes `out.txt` (asks permission), then answers.
fn claude_write(answer: &[&str]) -> (Vec<Value>, Option<i32>, tempfile::TempDir, FakeLlm) {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    let ws_path = std::fs::canonicalize(ws.path()).expect("ws");
    std::fs::write(ws_path.join("in.txt"), "inside-content-42\n").expect("in.txt");
    let (inp, out) = (ws_path.join("in.txt"), ws_path.join("out.txt"));
    fake.script(json!([
        {"tool": {"name": "Read", "input": {"file_path": inp}}},
        {"tool": {"name": "Write", "input": {"file_path": out, "content": "written by claude\n"}}},
        {"text": "all done"},
    ]));
    let argv = [path_of("claude-agent-acp")];
    let peer = Peer {
        fake: &fake,
        env: "claude",
        manifest: "claude-agent-acp.toml",
        argv: &argv,
    };
    let (ev, code, _wire) = chat(
        &peer,
        &ws_path,
        home.path(),
        &["copy in.txt to out.txt"],
        answer,
    );
    (ev, code, ws, fake)
}

fn permission_of(ev: &[Value]) -> (Value, Value) {
    let req = of_kind(ev, "cap.permission.request");
    assert_eq!(req.len(), 1, "exactly the Write asks: {ev:#?}");
    let resp = of_kind(ev, "cap.permission.response");
    assert_eq!(resp.len(), 1, "{ev:#?}");
    (req[0]["event"].clone(), resp[0]["event"].clone())
}

#[test]
fn claude_agent_acp_write_allowed_by_policy() {
    let (ev, code, ws, fake) = claude_write(&["--max-risk", "medium"]);
    assert_eq!(code, Some(0), "{ev:#?}");
    let (req, resp) = permission_of(&ev);
    assert_eq!(req["risk_level"], "medium", "an edit is medium risk: {req}");
    assert_eq!(req["intent"]["kind"], "edit", "{req}");
    assert!(
        resp["decision"].as_str().unwrap_or("").starts_with("allow"),
        "{resp}"
    );
    let written = std::fs::read_to_string(ws.path().join("out.txt")).expect("out.txt written");
    assert_eq!(written, "written by claude\n");
    assert!(
        requests_with(&fake, "inside-content-42") >= 1,
        "the Read result reached the model"
    );
    assert!(texts(&ev).contains("all done"), "{}", texts(&ev));
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "end_turn");
    assert!(
        of_kind(&ev, "cap.tool_call.start").len() >= 2,
        "Read and Write mapped"
    );
}

#[test]
fn claude_agent_acp_write_denied_fail_safe() {
    let (ev, code, ws, _fake) = claude_write(&[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    let (_req, resp) = permission_of(&ev);
    assert!(
        resp["decision"].as_str().unwrap_or("").starts_with("deny"),
        "{resp}"
    );
    assert!(
        !ws.path().join("out.txt").exists(),
        "a denied Write never runs"
    );
    assert!(texts(&ev).contains("all done"), "{}", texts(&ev));
}

#[test]
fn gemini_acp_one_turn_answered() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    fake.script(json!([{"text": "gemini says hi"}]));
    let argv = [
        path_of("gemini"),
        "--acp".into(),
        "-m".into(),
        "gemini-2.5-flash".into(),
    ];
    let peer = Peer {
        fake: &fake,
        env: "gemini",
        manifest: "gemini-acp.toml",
        argv: &argv,
    };
    let (ev, code, _wire) = chat(&peer, ws.path(), home.path(), &["hello"], &[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    assert_eq!(texts(&ev), "gemini says hi");
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "end_turn");
    let asked = fake.requests();
    assert!(
        asked.iter().all(|r| r["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(":streamGenerateContent"))),
        "{asked:#?}"
    );
}

#[test]
fn opencode_acp_one_turn_answered() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    // opencode also asks for a title (no tools): only the main request has tools.
    fake.script(json!([{"match": "\"tools\"", "text": "opencode says hi"}]));
    let argv = [path_of("opencode"), "acp".into(), "--pure".into()];
    let peer = Peer {
        fake: &fake,
        env: "opencode",
        manifest: "opencode-acp.toml",
        argv: &argv,
    };
    let (ev, code, _wire) = chat(&peer, ws.path(), home.path(), &["hello"], &[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    assert_eq!(texts(&ev), "opencode says hi");
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["stop_reason"], "end_turn");
}

#[test]
fn gemini_acp_edits_through_capfleet_fs_with_permission() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    let root = std::fs::canonicalize(ws.path()).expect("ws");
    let file = root.join("o.txt");
    std::fs::write(&file, "old\n").expect("o.txt");
    fake.script(json!([
        {"tool": {"name": "write_file", "input": {"file_path": file, "content": "gemini wrote"}}},
        {"text": "written"},
    ]));
    let argv = [
        path_of("gemini"),
        "--acp".into(),
        "-m".into(),
        "gemini-2.5-flash".into(),
    ];
    let peer = Peer {
        fake: &fake,
        env: "gemini",
        manifest: "gemini-acp.toml",
        argv: &argv,
    };
    let (ev, code, wire) = chat(
        &peer,
        &root,
        home.path(),
        &["rewrite o.txt"],
        &["--max-risk", "medium"],
    );
    assert_eq!(code, Some(0), "{ev:#?}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("o.txt"),
        "gemini wrote"
    );
    for method in ["fs/read_text_file", "fs/write_text_file"] {
        assert!(
            wire.contains(&format!("\"method\":\"{method}\"")),
            "Gemini called capfleet's {method}"
        );
    }
    let (req, resp) = permission_of(&ev);
    assert_eq!(req["risk_level"], "medium", "{req}");
    assert_eq!(resp["decision"], "allow_once", "{resp}");
    assert_eq!(texts(&ev), "written");
    let starts = of_kind(&ev, "cap.tool_call.start");
    let ends = of_kind(&ev, "cap.tool_call.end");
    assert_eq!(
        (starts.len(), ends.len()),
        (1, 1),
        "announced only in the permission, still started: {ev:#?}"
    );
    assert_eq!(starts[0]["event"]["call_id"], ends[0]["event"]["call_id"]);
}
