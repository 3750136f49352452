//! The real Claude Code (pinned) with `capfleet mcp` as its MCP server
//! (`--mcp-config`, stdio, in the repository Claude Code works in) starts the demo
//! fleet through it and follows it to its end: the fake LLM is scripted to call
//! `mcp__capfleet__start_run` with the demo's path, then, once the test has read the
//! run id from the tool result Claude Code sent back, `mcp__capfleet__wait_run` on
//! that id. The tools are allowed by `--allowedTools` (no prompt: `-p`). The run's
//! journal shows the fleet ran to completion and both calls, journaled with their
//! caller; nothing of Claude Code, capfleet or the fleet's agents outlives the
//! conversation.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::claude_stream::ClaudeStream;
use crate::common::mcp::demo_path;
use crate::common::repo::Fixture;
use crate::common::{BIN, EnvMarker, FakeLlm, claude_env_in, journal_records};

/// A turn that only starts the fleet.
const START_WITHIN: Duration = Duration::from_secs(90);
/// A turn that waits for the demo fleet's end.
const WAIT_WITHIN: Duration = Duration::from_secs(300);
/// What `wait_run` may wait, at most (less than the turn's own limit).
const WAIT_RUN_S: u64 = 240;

/// The text of the `tool_result` of call `id` in the last message of a model request
/// Claude Code sent (the test fails, showing the request, without one).
fn tool_result(request: &Value, id: &str) -> (String, bool) {
    let blocks = request["body"]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .cloned()
        .unwrap_or_default();
    let result = blocks
        .iter()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id} in {request:#}"));
    // A string, or text blocks.
    let text = match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<String>(),
        other => panic!("a tool_result's content: {other}"),
    };
    (text, result["is_error"] == true)
}

/// The id of the one `tool_use` of `tool` among Claude Code's frames.
fn tool_use_id(frames: &[Value], tool: &str) -> String {
    let uses: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "assistant")
        .filter_map(|f| f["message"]["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use" && b["name"] == tool)
        .collect();
    assert_eq!(uses.len(), 1, "one call of {tool} in {frames:#?}");
    uses[0]["id"].as_str().expect("a tool_use id").to_owned()
}

/// The tool result of call `id`, sent back in model request `n` (0-based), as JSON.
fn answered(fake: &FakeLlm, n: usize, id: &str) -> Value {
    let requests = fake.requests_to("/v1/messages");
    let request = requests
        .get(n)
        .unwrap_or_else(|| panic!("model request {n} of {requests:#?}"));
    let (text, is_error) = tool_result(request, id);
    assert!(!is_error, "the tool call failed: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("the tool's result ({e}): {text}"))
}

/// `capfleet mcp` (the binary under test) as Claude Code's MCP server `capfleet`.
fn mcp_config(dir: &Path) -> String {
    let config = json!({"mcpServers": {"capfleet": {"command": BIN, "args": ["mcp"]}}});
    let path = dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).expect("the MCP config");
    path.display().to_string()
}

#[test]
fn claude_code_starts_the_demo_fleet_through_capfleet_mcp() {
    let fake = FakeLlm::start();
    fake.script(json!([
        {"tool": {"name": "mcp__capfleet__start_run", "input": {"fleet_path": demo_path()}}},
        {"text": "The demo fleet is running."},
    ]));
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let home = tempfile::tempdir().expect("a HOME");
    let marker = EnvMarker::new("mcp-claude");
    let config = mcp_config(home.path());
    let flags = [
        "--mcp-config",
        &config,
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__capfleet__start_run,mcp__capfleet__wait_run",
    ];
    let env = claude_env_in(&fake, home.path(), repo.path());
    let mut claude = ClaudeStream::start(env, &marker, repo.path(), &flags);

    // Started: Claude Code got the run id back.
    let frames = claude.turn("Start the demo fleet.", START_WITHIN);
    let done = frames.last().expect("the result frame");
    assert_eq!(done["subtype"], "success", "{done:#}");
    let started = answered(&fake, 1, &tool_use_id(&frames, "mcp__capfleet__start_run"));
    assert_eq!(started["fleet"], "demo", "{started}");
    let run = started["run"].as_str().expect("the run id").to_owned();
    let dir = repo.path().join(".capfleet/runs").join(&run);
    assert!(dir.join("journal.jsonl").is_file(), "{}", dir.display());

    // Followed to its end by the id Claude Code was given.
    fake.script(json!([
        {"tool": {"name": "mcp__capfleet__wait_run", "input": {"run": run, "timeout_s": WAIT_RUN_S}}},
        {"text": "The demo fleet completed."},
    ]));
    let frames = claude.turn("Wait until it has finished.", WAIT_WITHIN);
    let status = answered(&fake, 3, &tool_use_id(&frames, "mcp__capfleet__wait_run"));
    assert_eq!(status["run"], run.as_str(), "{status}");
    assert_eq!(status["state"], "completed", "{status}");
    let sessions = status["sessions"].as_array().expect("its sessions");
    assert_eq!(sessions.len(), 4, "{status}");
    assert!(
        sessions.iter().all(|s| s["turns"].as_u64() >= Some(1)),
        "every session ran: {status}"
    );
    let (exit, stderr) = claude.close(Duration::from_secs(30));
    assert!(exit.success(), "claude exited {exit}; stderr:\n{stderr}");
    // capfleet mcp's last step, after its client has gone, is the late calls' write.
    marker.wait_gone(
        Duration::from_secs(10),
        "Claude Code, capfleet mcp and the fleet's agents have ended",
    );

    // The journal: the fleet ran to completion, and both calls are in it.
    let journal = journal_records(&dir.join("journal.jsonl"));
    let ended = journal
        .iter()
        .rfind(|r| r["type"] == "run_ended")
        .expect("the run's end");
    assert_eq!(ended["outcome"], "completed", "{ended}");
    let calls: Vec<(&str, bool)> = journal
        .iter()
        .filter(|r| r["type"] == "mcp_call")
        .map(|r| (r["tool"].as_str().unwrap_or(""), r["ok"] == true))
        .collect();
    assert!(calls.contains(&("start_run", true)), "{calls:?}");
    assert!(calls.contains(&("wait_run", true)), "{calls:?}");
}
