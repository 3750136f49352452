//! The A2A binding against real A2A servers: a test agent on the official Python SDK
//! (a2a-sdk 1.3.0, `tests/support/a2a_py_agent.py`, written with its AgentExecutor),
//! served once with the 1.0 routes and once with the SDK's v0.3 compat, and driven by
//! `capfleet chat` in each spelling — a turn with text, a streamed diff artifact and
//! usage, a permission through `input-required` and the answerer, a cancel, and the
//! conversation's `contextId` reused by the next turn, an answer whose stream opens
//! with the asking Task (answered once); and one on the official JS SDK
//! (@a2a-js/sdk 1.3.0 with express, `tests/support/a2a_js_agent.mjs`): a turn whose
//! artifact streams in chunks; and Gemini CLI's own A2A server
//! (@google/gemini-cli-a2a-server 0.25.2) against the fake LLM: a text turn, then a
//! tool that asks for approval (`input-required`) and is approved by the answerer.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::a2a::{A2aPeer, chat, chat_command, chat_signalled, manifest};
use crate::common::{FakeLlm, of_kind, of_type, peer, peer_env, run_chat, support, texts};

/// The Python SDK agent serving `spelling` (`1.0` routes, or `0.3` through its compat).
fn python_agent(spelling: &str) -> A2aPeer {
    python_agent_with(spelling, &[])
}

/// [`python_agent`] with more of its options.
fn python_agent_with(spelling: &str, args: &[&str]) -> A2aPeer {
    let mut cmd = Command::new(peer("a2a-py"));
    cmd.arg(support("a2a_py_agent.py"))
        .args(["--spelling", spelling])
        .args(args);
    A2aPeer::spawn(cmd, None)
}

const DIFF: &str = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n";

fn ready_spelling(events: &[Value]) -> &Value {
    &of_kind(events, "cap.session.ready")[0]["event"]["_meta"]["capfleet.a2a"]["spelling"]
}

#[test]
fn python_sdk_turn_with_text_artifact_and_usage_in_both_spellings() {
    for spelling in ["1.0", "0.3"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = python_agent(spelling);
        let m = manifest(dir.path(), &agent.url, "");
        let (events, code) = chat(dir.path(), &m, &["hello there"], &[]);
        assert_eq!(code, Some(0), "{spelling}: {events:#?}");
        assert_eq!(ready_spelling(&events), spelling, "{events:#?}");
        assert_eq!(texts(&events), "echo: hello there", "{spelling}");
        let artifacts = of_kind(&events, "cap.artifact");
        assert_eq!(
            artifacts.len(),
            1,
            "{spelling}: chunks joined: {artifacts:#?}"
        );
        let a = &artifacts[0]["event"];
        assert_eq!(
            (a["name"].as_str(), a["content"].as_str()),
            (Some("change.diff"), Some(DIFF))
        );
        // 1.0 carries the part's media type; the SDK's 0.3 conversion drops it.
        let mime = if spelling == "1.0" {
            "text/x-diff"
        } else {
            "text/plain"
        };
        assert_eq!(a["mime_type"], mime, "{spelling}");
        let usage = of_kind(&events, "cap.usage");
        assert_eq!(
            usage[0]["event"]["input_tokens"], 7,
            "{spelling}: {events:#?}"
        );
        assert_eq!(usage[0]["event"]["output_tokens"], 3);
        assert_eq!(of_type(&events, "turn_ended")[0]["stop_reason"], "end_turn");
    }
}

#[test]
fn python_sdk_permission_round_trip_through_input_required() {
    for spelling in ["1.0", "0.3"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = python_agent(spelling);
        let m = manifest(dir.path(), &agent.url, "");
        let (events, code) = chat(dir.path(), &m, &["permission"], &["--allow-tool", "Bash"]);
        assert_eq!(code, Some(0), "{spelling}: {events:#?}");
        let req = of_kind(&events, "cap.permission.request");
        assert_eq!(req[0]["event"]["tool"], "Bash", "{spelling}: {events:#?}");
        assert_eq!(req[0]["event"]["intent"]["command"], "ls");
        assert!(
            texts(&events).ends_with("decision: allow_once"),
            "{spelling}: the agent read capfleet's answer: {events:#?}"
        );
        let ends = of_type(&events, "turn_ended");
        assert_eq!(ends.len(), 1, "{ends:#?}");
        assert_eq!(ends[0]["stop_reason"], "end_turn");
    }
}

/// An executor that enqueues the current Task first when a message continues it
/// (`--task-first`): the answer's stream opens with the task still `input-required`,
/// the same `cap.permission.request` (same `req_id`) in its status message. capfleet
/// answers once (a second answer: -32004 "Task is not waiting for input", the turn
/// failed), says the question once, and the turn completes.
#[test]
fn python_sdk_answer_stream_opening_with_the_asking_task_is_answered_once() {
    for spelling in ["1.0", "0.3"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = python_agent_with(spelling, &["--task-first"]);
        let m = manifest(dir.path(), &agent.url, "");
        let log = dir.path().join("stderr.log");
        let mut c = chat_command(dir.path(), &m, &["permission"], &["--allow-tool", "Bash"]);
        c.env("CAPFLEET_LOG", "capfleet_wire::driver::a2a=debug")
            .stderr(std::fs::File::create(&log).expect("log"));
        let (events, code) = run_chat(c, None, Duration::from_secs(60));
        assert_eq!(code, Some(0), "{spelling}: {events:#?}");
        let asked = of_kind(&events, "cap.permission.request");
        let answered = of_kind(&events, "cap.permission.response");
        assert_eq!(
            (asked.len(), answered.len()),
            (1, 1),
            "{spelling}: asked and answered once: {events:#?}"
        );
        assert_eq!(asked[0]["event"]["req_id"], "py-perm-1");
        assert!(
            of_kind(&events, "cap.error").is_empty(),
            "{spelling}: {events:#?}"
        );
        assert_eq!(
            texts(&events),
            "May I run Bash: ls?decision: allow_once",
            "{spelling}: the question said once, the answer read"
        );
        let ends = of_type(&events, "turn_ended");
        assert_eq!(ends.len(), 1, "{ends:#?}");
        assert_eq!(ends[0]["stop_reason"], "end_turn", "{spelling}: {ends:#?}");
        let stderr = std::fs::read_to_string(&log).expect("stderr");
        assert!(
            stderr.contains("question=py-perm-1")
                && stderr.contains("said again a question raised before"),
            "{spelling}: the repeat is traced: {stderr}"
        );
    }
}

#[test]
fn python_sdk_cancel_ends_the_turn_and_the_conversation_goes_on() {
    for spelling in ["1.0", "0.3"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = python_agent(spelling);
        let m = manifest(dir.path(), &agent.url, "");
        let (events, code) = chat_signalled(
            dir.path(),
            &m,
            &["slow", "after the cancel"],
            &[],
            Some(Duration::from_millis(2500)),
        );
        assert_eq!(code, Some(0), "{spelling}: {events:#?}");
        let ends = of_type(&events, "turn_ended");
        assert_eq!(ends[0]["stop_reason"], "cancelled", "{spelling}: {ends:#?}");
        assert_eq!(ends[1]["stop_reason"], "end_turn", "{spelling}: {ends:#?}");
        let t = texts(&events);
        assert!(
            t.starts_with("working")
                && !t.contains("never")
                && t.ends_with("echo: after the cancel"),
            "{spelling}: {t}"
        );
    }
}

/// The JS SDK agent (`tests/support/a2a_js_agent.mjs`).
fn js_agent() -> A2aPeer {
    let mut cmd = Command::new("node");
    cmd.arg(support("a2a_js_agent.mjs")).arg(peer("a2a-js"));
    A2aPeer::spawn(cmd, None)
}

#[test]
fn js_sdk_turn_with_a_streamed_artifact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = js_agent();
    let m = manifest(dir.path(), &agent.url, "");
    let (events, code) = chat(dir.path(), &m, &["notes please"], &[]);
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(ready_spelling(&events), "1.0");
    assert_eq!(texts(&events), "streaming: notes please");
    let artifacts = of_kind(&events, "cap.artifact");
    assert_eq!(
        artifacts.len(),
        1,
        "three chunks, one artifact: {artifacts:#?}"
    );
    let a = &artifacts[0]["event"];
    assert_eq!(a["name"], "notes.md");
    assert_eq!(a["mime_type"], "text/markdown");
    assert_eq!(a["content"], "# Notes\n- one\n- two\n");
    assert_eq!(of_kind(&events, "cap.usage")[0]["event"]["input_tokens"], 5);
    assert_eq!(of_type(&events, "turn_ended")[0]["stop_reason"], "end_turn");
}

/// Gemini CLI's own A2A server (`@google/gemini-cli-a2a-server` 0.25.2, 0.3 spelling,
/// no CAP extension: driven as a plain agent) against the fake LLM, its workspace
/// `ws`; it prints its port in a log line.
fn gemini_agent(fake: &FakeLlm, ws: &Path, home: &Path) -> A2aPeer {
    let server = peer("gemini-a2a")
        .parent()
        .expect(".bin")
        .join("../@google/gemini-cli-a2a-server/dist/a2a-server.mjs");
    let mut cmd = Command::new("node");
    // (Run as a file of its own name: through the .bin link it does not start.)
    cmd.arg(server)
        .env_clear()
        .envs(peer_env("gemini", fake.port(), home, ws))
        .env("CODER_AGENT_WORKSPACE_PATH", ws)
        .current_dir(ws);
    A2aPeer::spawn_until(cmd, None, |line| {
        let (_, rest) = line.split_once("Agent Server started on http://localhost:")?;
        Some(format!("127.0.0.1:{}", rest.trim()))
    })
}

#[test]
fn gemini_cli_a2a_server_a_text_turn_then_a_tool_approved_by_the_answerer() {
    let fake = FakeLlm::start();
    let ws = tempfile::tempdir().expect("ws");
    let home = tempfile::tempdir().expect("home");
    fake.script(json!([
        {"text": "Hello from Gemini over A2A"},
        {"tool": {"name": "run_shell_command", "input": {"command": "echo capfleet-ran-it", "description": "echo"}}},
        {"text": "the command ran"},
    ]));
    let agent = gemini_agent(&fake, ws.path(), home.path());
    let m = manifest(ws.path(), &agent.url, "\n[x-a2a]\nplain = true\n");
    let (events, code) = chat(
        ws.path(),
        &m,
        &["say hello", "run the echo"],
        &["--allow-tool", "run_shell_command", "--max-risk", "high"],
    );
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(ready_spelling(&events), "0.3");
    let ends = of_type(&events, "turn_ended");
    assert_eq!(ends.len(), 2, "{ends:#?}");
    assert!(
        ends.iter().all(|e| e["stop_reason"] == "end_turn"),
        "{ends:#?}"
    );
    let t = texts(&events);
    assert!(t.starts_with("Hello from Gemini over A2A"), "{t}");
    assert!(t.ends_with("the command ran"), "{t}");
    let req = of_kind(&events, "cap.permission.request");
    assert_eq!(req.len(), 1, "{events:#?}");
    assert_eq!(req[0]["event"]["tool"], "run_shell_command");
    let answered = of_kind(&events, "cap.permission.response");
    assert_eq!(
        answered[0]["event"]["decision"], "allow_once",
        "{events:#?}"
    );
    // The command really ran: its output went back to the model.
    let asked = serde_json::to_string(&fake.requests()).expect("json");
    assert!(
        asked.contains("capfleet-ran-it\\n") || asked.contains("capfleet-ran-it"),
        "{asked}"
    );
    assert_eq!(fake.requests().len(), 3, "one model call per scripted turn");
}
