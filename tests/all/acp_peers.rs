//! Real ACP peers end to end through `capfleet chat --json`, offline against the
//! project's fake LLM: claude-agent-acp 0.23.1 (a scripted Read + Write with a
//! permission request, answered by policy or denied fail-safe), Gemini CLI 0.61.0
//! (a write through capfleet's `fs/*` with a permission; one turn answered),
//! opencode 1.18.33 (one turn answered) and codex-acp 0.16.0 (a shell command
//! asked for over `session/request_permission`, allowed by policy, run); and
//! claude-agent-acp's `usage_update`s as one `cap.usage` per turn, its cost the fake
//! LLM's usage of that turn. What went
//! over the wire is read back from the SDK's trace of every JSON-RPC message on
//! capfleet's stderr.
//!
//! claude-agent-acp has run Claude Code's built-in tools in its own process since
//! 0.18.0 ("it won't use client capabilities for files or terminals", its
//! changelog): 0.23.1 exposes no ACP-backed tools (no `mcp__acp__*`), and its
//! `readTextFile`/`writeTextFile` have no caller, so it never calls `fs/*` even
//! though capfleet advertises them. Its Write is asked for over
//! `session/request_permission` and runs only when allowed; the file effect is
//! asserted on disk and the Read through what the model was sent next. capfleet's
//! `fs/*` under `fs.scope` is exercised by Gemini here (which sends its in-root
//! paths through the client), by the official Python SDK agent (`acp_echo.rs`,
//! scope errors included) and by the sim (`sim_acp.rs`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{FakeLlm, of_kind, of_type, texts};
use serde_json::{Value, json};

use crate::common;

/// A real peer's first turn can take a while (node start-up, big system prompts).
const LIMIT: Duration = Duration::from_secs(150);

/// A peer to chat with: its `peer_env.sh` name, shipped manifest and argv.
struct Peer<'a> {
    fake: &'a FakeLlm,
    env: &'a str,
    manifest: &'a str,
    argv: Vec<String>,
}

impl<'a> Peer<'a> {
    /// Gemini CLI over ACP (`gemini --acp -m gemini-2.5-flash`).
    fn gemini(fake: &'a FakeLlm) -> Peer<'a> {
        Peer {
            fake,
            env: "gemini",
            manifest: "gemini-acp.toml",
            argv: vec![
                path_of("gemini"),
                "--acp".into(),
                "-m".into(),
                "gemini-2.5-flash".into(),
            ],
        }
    }
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
    let mut c = Command::new(common::BIN);
    let log = home.join("capfleet.stderr");
    c.env_clear()
        .envs(common::peer_env(p.env, p.fake.port(), home, ws))
        // The SDK traces every JSON-RPC message: proof of what went over the wire;
        // the driver says how the agent ended.
        .env(
            "CAPFLEET_LOG",
            "warn,agent_client_protocol=trace,capfleet_wire::driver::acp=info,capfleet_wire::driver::death=info",
        )
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
        .args(&p.argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("stderr file"));
    let (ev, code) = common::run_chat(c, None, LIMIT);
    let wire = std::fs::read_to_string(&log).unwrap_or_default();
    (ev, code, wire)
}

/// One JSON-RPC message from the SDK's trace: sent by capfleet, or received.
struct Msg {
    sent: bool,
    body: Value,
}

/// Every JSON-RPC message capfleet sent or received, in order.
fn messages(trace: &str) -> Vec<Msg> {
    trace
        .lines()
        .filter_map(|l| {
            let (sent, at) = match (
                l.find("Sending JSON-RPC message "),
                l.find("Received JSON-RPC message "),
            ) {
                (Some(i), _) => (true, i + "Sending JSON-RPC message ".len()),
                (None, Some(i)) => (false, i + "Received JSON-RPC message ".len()),
                (None, None) => return None,
            };
            let body = serde_json::from_str(&l[at..]).ok()?;
            Some(Msg { sent, body })
        })
        .collect()
}

/// The requests of `method` capfleet sent (`sent`) or received.
fn requests<'a>(wire: &'a [Msg], sent: bool, method: &str) -> Vec<&'a Value> {
    wire.iter()
        .filter(|m| m.sent == sent && m.body["method"] == method && m.body.get("id").is_some())
        .map(|m| &m.body)
        .collect()
}

/// The answer to `req`, going the other way.
fn answer_to<'a>(wire: &'a [Msg], sent: bool, req: &Value) -> &'a Value {
    wire.iter()
        .find(|m| m.sent != sent && m.body.get("method").is_none() && m.body["id"] == req["id"])
        .map(|m| &m.body)
        .unwrap_or_else(|| panic!("no answer to {req}"))
}

/// capfleet closed the session (`session/close`, answered) and the agent then
/// exited at end of input instead of being killed after the wait.
fn assert_closed_cleanly(wire: &[Msg], trace: &str) {
    let new = requests(wire, true, "session/new");
    let sid = &answer_to(wire, true, new[0])["result"]["sessionId"];
    let close = requests(wire, true, "session/close");
    assert_eq!(close.len(), 1, "one session/close");
    assert_eq!(&close[0]["params"]["sessionId"], sid);
    assert_eq!(answer_to(wire, true, close[0])["result"], json!({}));
    assert!(
        trace.contains("ACP agent exited at end of input")
            && !trace.contains("ignored end of input"),
        "the agent exited by itself"
    );
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

/// One claude-agent-acp chat: its events, exit code, workspace, fake LLM and wire.
struct ClaudeRun {
    ev: Vec<Value>,
    code: Option<i32>,
    ws: tempfile::TempDir,
    fake: FakeLlm,
    wire: Vec<Msg>,
    trace: String,
}

/// Claude reads `in.txt`, then writes `out.txt` (asks permission), then answers.
fn claude_write(answer: &[&str]) -> ClaudeRun {
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
    let peer = Peer {
        fake: &fake,
        env: "claude",
        manifest: "claude-agent-acp.toml",
        argv: vec![path_of("claude-agent-acp")],
    };
    let (ev, code, trace) = chat(
        &peer,
        &ws_path,
        home.path(),
        &["copy in.txt to out.txt"],
        answer,
    );
    ClaudeRun {
        ev,
        code,
        ws,
        fake,
        wire: messages(&trace),
        trace,
    }
}

/// What went over the wire for claude-agent-acp: fs advertised but never called,
/// the Write asked for and answered `option`, the session closed at the end.
fn assert_claude_wire(run: &ClaudeRun, option: &str) {
    let init = requests(&run.wire, true, "initialize");
    assert_eq!(
        init[0]["params"]["clientCapabilities"]["fs"],
        json!({"readTextFile": true, "writeTextFile": true}),
        "capfleet offers its fs"
    );
    let asked = requests(&run.wire, false, "session/request_permission");
    assert_eq!(asked.len(), 1, "the Write asks, the Read does not");
    let out = std::fs::canonicalize(run.ws.path())
        .expect("ws")
        .join("out.txt");
    assert_eq!(
        asked[0]["params"]["toolCall"]["rawInput"]["file_path"],
        out.display().to_string()
    );
    let outcome = &answer_to(&run.wire, false, asked[0])["result"]["outcome"];
    assert_eq!(
        *outcome,
        json!({"outcome": "selected", "optionId": option}),
        "capfleet picked the offered option"
    );
    for method in ["fs/read_text_file", "fs/write_text_file"] {
        assert!(
            requests(&run.wire, false, method).is_empty(),
            "claude-agent-acp 0.23.1 runs its tools in-process; a version that calls \
             {method} must be tested through capfleet's fs/* instead"
        );
    }
    assert_closed_cleanly(&run.wire, &run.trace);
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
    let run = claude_write(&["--max-risk", "medium"]);
    let ClaudeRun {
        ev, code, ws, fake, ..
    } = &run;
    assert_eq!(*code, Some(0), "{ev:#?}");
    let (req, resp) = permission_of(ev);
    assert_eq!(req["risk_level"], "medium", "an edit is medium risk: {req}");
    assert_eq!(req["intent"]["kind"], "edit", "{req}");
    assert!(
        resp["decision"].as_str().unwrap_or("").starts_with("allow"),
        "{resp}"
    );
    let written = std::fs::read_to_string(ws.path().join("out.txt")).expect("out.txt written");
    assert_eq!(written, "written by claude\n");
    assert!(
        requests_with(fake, "inside-content-42") >= 1,
        "the Read result reached the model"
    );
    assert!(texts(ev).contains("all done"), "{}", texts(ev));
    one_turn_ended(ev);
    assert!(
        of_kind(ev, "cap.tool_call.start").len() >= 2,
        "Read and Write mapped"
    );
    assert_claude_wire(&run, "allow");
}

#[test]
fn claude_agent_acp_write_denied_fail_safe() {
    let run = claude_write(&[]);
    let ClaudeRun { ev, code, ws, .. } = &run;
    assert_eq!(*code, Some(0), "{ev:#?}");
    let (_req, resp) = permission_of(ev);
    assert!(
        resp["decision"].as_str().unwrap_or("").starts_with("deny"),
        "{resp}"
    );
    assert!(
        !ws.path().join("out.txt").exists(),
        "a denied Write never runs"
    );
    assert!(texts(ev).contains("all done"), "{}", texts(ev));
    assert_claude_wire(&run, "reject");
}

/// claude-agent-acp 0.23.1 sends `usage_update` at each turn's end (Claude Code's
/// cumulative cost, the context in use) and the turn's tokens in the prompt response:
/// capfleet's one `cap.usage` per turn holds that turn's tokens and cost, equal to the
/// fake LLM's usage of the turn priced as Claude Code prices the model it asked for (not the session's
/// running total).
#[test]
fn claude_agent_acp_usage_per_turn_is_the_fake_llms() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    fake.script(json!([{"text": "alpha answer"}, {"text": "beta answer"}]));
    let peer = Peer {
        fake: &fake,
        env: "claude",
        manifest: "claude-agent-acp.toml",
        argv: vec![path_of("claude-agent-acp")],
    };
    let tasks = ["alpha-task", "beta-task"];
    let (ev, code, trace) = chat(&peer, ws.path(), home.path(), &tasks, &[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    let updates = messages(&trace)
        .iter()
        .filter(|m| !m.sent && m.body["params"]["update"]["sessionUpdate"] == "usage_update")
        .count();
    assert!(
        updates >= 2,
        "claude-agent-acp sent usage_update: {updates}"
    );
    let model = fake.requests_to("/v1/messages");
    let usages = of_kind(&ev, "cap.usage");
    assert_eq!(usages.len(), 2, "one cap.usage per turn: {usages:#?}");
    for (turn, u) in usages.iter().enumerate() {
        // A turn's requests carry its task, and not the next one's.
        let mine: Vec<&Value> = model
            .iter()
            .filter(|r| {
                let body = r["body"].to_string();
                body.contains(tasks[turn]) && tasks[turn + 1..].iter().all(|t| !body.contains(t))
            })
            .collect();
        assert!(!mine.is_empty(), "turn {} reached the model", turn + 1);
        let sum = |k: &str| {
            mine.iter()
                .map(|r| r["usage"][k].as_u64().expect("fake usage"))
                .sum::<u64>()
        };
        let (input, output) = (sum("input_tokens"), sum("output_tokens"));
        let e = &u["event"];
        assert_eq!(u["turn"], turn as u64 + 1, "{u}");
        assert_eq!(
            (e["input_tokens"].as_u64(), e["output_tokens"].as_u64()),
            (Some(input), Some(output)),
            "{u}"
        );
        // Priced per request, at the price Claude Code gives the model it asked for.
        let priced = common::fake_llm::claude_cost(mine.iter().copied());
        let cost = e["cost_usd_estimate"].as_f64().expect("cost");
        assert!(
            (cost - priced).abs() < 1e-6,
            "turn {}: cost {cost} != {priced}: {u}",
            turn + 1
        );
        assert!(
            e["_meta"]["acp.context_size"]
                .as_u64()
                .is_some_and(|s| s > 0),
            "{u}"
        );
    }
}

#[test]
fn gemini_acp_one_turn_answered() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    fake.script(json!([{"text": "gemini says hi"}]));
    let peer = Peer::gemini(&fake);
    let (ev, code, _wire) = chat(&peer, ws.path(), home.path(), &["hello"], &[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    assert_eq!(texts(&ev), "gemini says hi");
    one_turn_ended(&ev);
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
    let peer = Peer {
        fake: &fake,
        env: "opencode",
        manifest: "opencode-acp.toml",
        argv: vec![path_of("opencode"), "acp".into(), "--pure".into()],
    };
    let (ev, code, _wire) = chat(&peer, ws.path(), home.path(), &["hello"], &[]);
    assert_eq!(code, Some(0), "{ev:#?}");
    assert_eq!(texts(&ev), "opencode says hi");
    one_turn_ended(&ev);
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
    let peer = Peer::gemini(&fake);
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
    let wire = messages(&wire);
    let file = file.display().to_string();
    let read = requests(&wire, false, "fs/read_text_file");
    assert!(!read.is_empty(), "Gemini read through capfleet's fs");
    assert!(read.iter().all(|r| r["params"]["path"] == file.as_str()));
    assert_eq!(
        answer_to(&wire, false, read[0])["result"]["content"],
        "old\n"
    );
    let write = requests(&wire, false, "fs/write_text_file");
    assert_eq!(write.len(), 1, "Gemini wrote through capfleet's fs");
    assert_eq!(write[0]["params"]["content"], "gemini wrote");
    assert_eq!(answer_to(&wire, false, write[0])["result"], json!({}));
    let asked = requests(&wire, false, "session/request_permission");
    assert_eq!(asked.len(), 1);
    assert_eq!(
        answer_to(&wire, false, asked[0])["result"]["outcome"]["optionId"],
        "proceed_once",
        "Gemini's allow-once option"
    );
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

#[test]
fn codex_acp_command_asks_and_runs_when_allowed() {
    let fake = FakeLlm::start();
    let (ws, home) = dirs();
    let root = std::fs::canonicalize(ws.path()).expect("ws");
    fake.script(json!([
        {"tool": {"name": "exec_command", "input": {"cmd": "echo hi > out.txt"}}},
        {"text": "Wrote it."},
    ]));
    // An approval policy that asks; no sandbox, because Codex's Linux sandbox needs
    // bubblewrap, which the suite's machine need not have (the workspace is a tempdir).
    let peer = Peer {
        fake: &fake,
        env: "codex",
        manifest: "codex-acp.toml",
        argv: vec![
            path_of("codex-acp"),
            "-c".into(),
            "approval_policy=\"untrusted\"".into(),
            "-c".into(),
            "sandbox_mode=\"danger-full-access\"".into(),
        ],
    };
    let (ev, code, wire) = chat(
        &peer,
        &root,
        home.path(),
        &["write hi to out.txt"],
        &["--max-risk", "high"],
    );
    assert_eq!(code, Some(0), "{ev:#?}");
    let wire = messages(&wire);
    let asked = requests(&wire, false, "session/request_permission");
    assert_eq!(asked.len(), 1, "the command asks");
    let (req, resp) = permission_of(&ev);
    assert_eq!(req["intent"]["kind"], "execute", "{req}");
    assert_eq!(resp["decision"], "allow_once", "{resp}");
    assert_eq!(
        std::fs::read_to_string(root.join("out.txt")).expect("out.txt"),
        "hi\n",
        "the allowed command ran"
    );
    assert!(texts(&ev).ends_with("Wrote it."), "{}", texts(&ev));
    one_turn_ended(&ev);
    // codex-acp 0.16.0 does not exit at end of input: capfleet ends its group after
    // the wait (the driver's log says so), so no clean-close assertion here.
}

/// The chat had exactly one turn, and it ended normally.
fn one_turn_ended(ev: &[Value]) {
    let ends = of_type(ev, "turn_ended");
    assert_eq!(ends.len(), 1, "{ev:#?}");
    assert_eq!(ends[0]["stop_reason"], "end_turn");
}
