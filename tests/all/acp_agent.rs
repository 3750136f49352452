//! `capfleet acp`: capfleet as an ACP agent, driven by the official Python ACP SDK's
//! client (`tests/support/acp_client.py`, peer `py-acp`) in front of the stream-json
//! sim — a turn with text, an inner tool call and a permission the client allows, a
//! cancel, usage in `_meta`; then, in a new process, `session/load` replaying the
//! conversation and resuming the inner agent natively. capfleet's own ACP driver
//! driving it through the shipped manifest's `acp_stdio` (a permission answered two
//! levels up). And SIGTERM mid-turn: exit 130, no inner agent left. `acp --fleet`
//! likewise: a fleet's run per prompt (the answering session's updates, another
//! session's permission asked of the client, the final diff as ACP `diff` content, a
//! cancel of every inner turn, `session/load` going on with the runs, SIGTERM).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use common::EnvMarker;
use common::chat::{assert_no_survivor, chat, script};

use crate::common;

const SCRIPT: &str = r#"
[[turn]]
match = "first"
steps = [{ say = "checking " }, { permission = "Bash", input = { command = "ls" } }, { tool = "Bash", input = { command = "ls" }, output = "a\nb" }, { usage = { input_tokens = 10, output_tokens = 5, cost_usd = 0.25 } }, { say = "done" }]
[[turn]]
match = "slow"
steps = [{ say = "started" }, { sleep_ms = 20000 }, { say = "never" }]
[[turn]]
match = "second"
steps = [{ say = "two" }]
"#;

/// `capfleet acp --agent sim` with the script and a state dir.
fn acp_argv(script: &Path, state: &Path) -> Vec<String> {
    vec![
        common::BIN.to_owned(),
        "acp".into(),
        "--agent".into(),
        "sim".into(),
        "--script".into(),
        script.display().to_string(),
        "--state-dir".into(),
        state.display().to_string(),
    ]
}

/// Run the SDK client in `mode` (with `extra` before the agent's argv); its JSON report.
fn client(mode: &str, cwd: &Path, extra: &[&str], agent: &[String], marker: &EnvMarker) -> Value {
    let mut cmd = Command::new(common::peer("py-acp"));
    cmd.arg(common::support("acp_client.py"))
        .args([mode, cwd.to_str().expect("utf8")])
        .args(extra)
        .arg("--")
        .args(agent)
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(Stdio::null());
    let out = common::output_within(cmd, Duration::from_secs(90));
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client report: {e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn updates<'a>(turn: &'a Value, kind: &str) -> Vec<&'a Value> {
    turn["updates"]
        .as_array()
        .expect("updates")
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

#[test]
fn the_python_acp_sdk_drives_a_turn_a_permission_a_cancel_then_loads_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = tempfile::tempdir().expect("ws");
    let state = dir.path().join("state");
    let script = script(dir.path(), SCRIPT);
    let marker = EnvMarker::new("acp-agent");
    let agent = acp_argv(&script, &state);

    let run = client("turns", ws.path(), &[], &agent, &marker);
    assert_eq!(run["load_session"], true, "{run:#}");
    assert_eq!(run["agent"], "capfleet");
    // The inner permission reached the client's callback, which allowed it.
    let perms = run["permissions"].as_array().expect("permissions");
    assert_eq!(perms.len(), 1, "{run:#}");
    assert_eq!(perms[0]["title"], "Bash");
    assert_eq!(perms[0]["input"]["command"], "ls", "{run:#}");
    let first = &run["first"];
    assert_eq!(first["stop"], "end_turn", "{run:#}");
    assert_eq!(first["text"], "checking done");
    // The inner tool calls (the gated one the permission was for, then the one that
    // ran) as tool_call / tool_call_update pairs.
    let calls = updates(first, "tool_call");
    let ends = updates(first, "tool_call_update");
    assert_eq!(calls.len(), ends.len(), "{first:#}");
    assert!(calls.iter().all(|c| c["title"] == "Bash"), "{first:#}");
    assert!(ends.iter().all(|e| e["status"] == "completed"), "{first:#}");
    assert!(ends.iter().any(|e| e["rawOutput"] == "a\nb"), "{first:#}");
    // Usage and cost in the response's _meta.
    assert_eq!(
        first["meta"]["capfleet.usage"]["cost_usd"], 0.25,
        "{first:#}"
    );
    assert_eq!(first["meta"]["capfleet.usage"]["output_tokens"], 5);
    let slow = &run["slow"];
    assert_eq!(slow["stop"], "cancelled", "{run:#}");
    assert!(!slow["text"].as_str().unwrap_or("").contains("never"));
    assert_no_survivor(&marker);

    // The record a later load reads: the sim's own conversation id.
    let id = run["session_id"].as_str().expect("session id");
    let record: Value =
        serde_json::from_slice(&std::fs::read(state.join(format!("{id}.json"))).expect("record"))
            .expect("record json");
    let resume_id = record["resume_id"].clone();
    assert!(resume_id.is_string(), "{record:#}");

    let loaded = client("load", ws.path(), &[id], &agent, &marker);
    let replayed: Vec<(String, String)> = loaded["replayed"]
        .as_array()
        .expect("replayed")
        .iter()
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap_or("").to_owned(),
                u["content"]["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expected = [
        ("user_message_chunk", "first"),
        ("agent_message_chunk", "checking done"),
        ("user_message_chunk", "slow"),
        ("agent_message_chunk", "started"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(replayed, expected, "{loaded:#}");
    assert_eq!(loaded["second"]["stop"], "end_turn", "{loaded:#}");
    assert_eq!(loaded["second"]["text"], "two");
    // The inner agent was resumed natively: the same conversation id.
    let record: Value =
        serde_json::from_slice(&std::fs::read(state.join(format!("{id}.json"))).expect("record"))
            .expect("record json");
    assert_eq!(record["resume_id"], resume_id, "{record:#}");
    assert_eq!(record["history"].as_array().map(Vec::len), Some(6));
    assert_no_survivor(&marker);
}

/// A raw JSON-RPC line to the agent.
fn send(stdin: &mut impl Write, msg: Value) {
    writeln!(stdin, "{msg}").expect("write");
    stdin.flush().expect("flush");
}

#[test]
fn sigterm_mid_turn_exits_130_and_leaves_no_inner_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = script(dir.path(), SCRIPT);
    let marker = EnvMarker::new("acp-term");
    let argv = acp_argv(&script, &dir.path().join("state"));
    sigterm_mid_turn(&argv, dir.path(), &marker);
}

#[test]
fn sigterm_mid_run_of_a_fleet_exits_130_and_leaves_no_inner_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = EnvMarker::new("acp-fleet-term");
    let argv = fleet_argv(dir.path());
    sigterm_mid_turn(&argv, dir.path(), &marker);
}

/// `argv` (an ACP agent) prompted "slow" in `cwd`, sent SIGTERM once its first text
/// arrived: it exits 130, nothing of it left.
fn sigterm_mid_turn(argv: &[String], cwd: &Path, marker: &EnvMarker) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet acp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let cwd = cwd.display().to_string();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    let mut session = None;
    let mut started = false;
    for line in lines.by_ref() {
        let msg: Value = serde_json::from_str(&line.expect("line")).expect("every line is JSON");
        // A client waits for `initialize`'s answer before it opens a session.
        if msg["id"] == 1 {
            send(
                &mut stdin,
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                       "params": {"cwd": cwd, "mcpServers": []}}),
            );
        }
        if msg["id"] == 2 {
            let id = msg["result"]["sessionId"].clone();
            send(
                &mut stdin,
                json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                       "params": {"sessionId": id, "prompt": [{"type": "text", "text": "slow"}]}}),
            );
            session = Some(id);
        }
        if msg["method"] == "session/update" && msg.to_string().contains("started") {
            started = true;
            break;
        }
    }
    assert!(session.is_some() && started, "the turn started");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = common::wait_within(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130), "{status}");
    assert_no_survivor(marker);
}

/// The shipped manifest with its ACP fast path the only one: `capfleet chat` then
/// drives `capfleet acp` over its own ACP driver.
#[test]
fn capfleet_drives_capfleet_acp_through_the_shipped_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = script(dir.path(), SCRIPT);
    let shipped = std::fs::read_to_string(common::repo_root().join("config/agents/capfleet.toml"))
        .expect("shipped manifest");
    let acp_only: String = shipped
        .lines()
        .map(|l| {
            if l.starts_with("stream_json =") {
                "stream_json = false"
            } else if l.starts_with("x-stream_json_traceparent =") {
                // It says how speak reads its user frames: no stream_json, no speak.
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(acp_only.contains(r#"acp_stdio = ["capfleet", "acp"]"#));
    let manifest = dir.path().join("capfleet-acp.toml");
    std::fs::write(&manifest, acp_only).expect("manifest");
    let marker = EnvMarker::new("acp-nested");
    let state = dir.path().join("state");
    let state_dir = format!("--state-dir={}", state.display());
    let run = chat(
        manifest.to_str().expect("utf8"),
        &[
            "--allow-tool",
            "Bash",
            "--env",
            "CAPFLEET_ACP_AGENT=sim",
            "--script",
            script.to_str().expect("utf8"),
            "--task",
            "first",
            "--argv",
            common::BIN,
            "acp",
            &state_dir,
        ],
        &marker,
        None,
    );
    assert!(run.status.success(), "{:#?}", run.events);
    assert_eq!(run.texts().concat(), "checking done");
    // The inner permission went up to capfleet acp's client, the outer chat, whose
    // allow-list answered.
    let asked = run.kinds("cap.permission.request");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let answered = run.kinds("cap.permission.response");
    assert_eq!(answered[0]["decision"], "allow_once", "{answered:?}");
    let ends = run.kinds("cap.tool_call.end");
    assert!(ends.iter().any(|e| e["output"] == "a\nb"), "{ends:?}");
    assert_no_survivor(&marker);
}

/// The answering session of the ACP fleet: text and a file written in its worktree,
/// then (slow) 20 s of work, then (second) a word.
const FLEET_LEAD: &str = r#"
[[turn]]
match = "first"
steps = [{ say = "checking " }, { write = "notes.txt", content = "hello\n" }, { usage = { input_tokens = 4, output_tokens = 2, cost_usd = 0.05 } }, { say = "done" }]
[[turn]]
match = "slow"
steps = [{ say = "started" }, { sleep_ms = 20000 }, { say = "never" }]
[[turn]]
match = "second"
steps = [{ say = "two" }]
"#;

/// Beside it: a plan (the fleet's: shown as the client's `plan`), a permission for
/// Bash (the client answers it) and $0.25.
const FLEET_HELPER: &str = r#"
[[turn]]
match = "first"
steps = [{ plan = [{ id = "p1", content = "write the notes", status = "in_progress" }] }, { permission = "Bash", input = { command = "ls" } }, { usage = { input_tokens = 10, output_tokens = 5, cost_usd = 0.25 } }, { say = "helped" }]
[[turn]]
match = "slow"
steps = [{ sleep_ms = 20000 }]
[[turn]]
match = "second"
steps = [{ say = "h2" }]
"#;

/// `capfleet acp --fleet` over a fleet of the two scripts above (written in `dir`,
/// its state dir there too).
fn fleet_argv(dir: &Path) -> Vec<String> {
    std::fs::write(dir.join("lead.toml"), FLEET_LEAD).expect("lead");
    std::fs::write(dir.join("helper.toml"), FLEET_HELPER).expect("helper");
    let fleet = dir.join("pair.toml");
    std::fs::write(
        &fleet,
        "[fleet]\nname = \"pair\"\nstart = [\"lead\", \"helper\"]\n\n\
         [[sessions]]\nname = \"lead\"\nagent = \"sim\"\nscript = \"lead.toml\"\n\n\
         [[sessions]]\nname = \"helper\"\nagent = \"sim\"\nscript = \"helper.toml\"\n",
    )
    .expect("fleet");
    vec![
        common::BIN.to_owned(),
        "acp".into(),
        "--fleet".into(),
        fleet.display().to_string(),
        "--state-dir".into(),
        dir.join("state").display().to_string(),
    ]
}

#[test]
fn the_python_acp_sdk_drives_a_fleet_updates_a_permission_the_diff_a_cancel_and_a_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = common::repo::Fixture::git_repo(&[("README.md", "hi\n")]);
    let marker = EnvMarker::new("acp-fleet");
    let agent = fleet_argv(dir.path());

    let run = client("turns", ws.path(), &[], &agent, &marker);
    assert_eq!(run["load_session"], true, "{run:#}");
    let perms = run["permissions"].as_array().expect("permissions");
    assert_eq!(perms.len(), 1, "{run:#}");
    assert_eq!(perms[0]["title"], "Bash");
    let first = &run["first"];
    assert_eq!(first["stop"], "end_turn", "{run:#}");
    // The answering session's words only; the whole fleet's cost; the run named.
    assert_eq!(first["text"], "checking done");
    assert_eq!(
        first["meta"]["capfleet.usage"]["cost_usd"], 0.30,
        "{first:#}"
    );
    let id = run["session_id"].as_str().expect("session id");
    assert_eq!(first["meta"]["capfleet.run"]["id"], id, "{first:#}");
    // The helper's plan, the fleet's plan, is the client's; its tool call is not.
    let plans = updates(first, "plan");
    assert_eq!(plans.len(), 1, "{first:#}");
    assert_eq!(plans[0]["entries"][0]["content"], "write the notes");
    assert!(
        updates(first, "tool_call")
            .iter()
            .all(|c| c["title"] != "TodoWrite"),
        "{first:#}"
    );
    // The lead's worktree kept its work; its final diff offered as ACP diff content.
    let diffs: Vec<&Value> = updates(first, "tool_call")
        .into_iter()
        .filter(|c| c["kind"] == "edit" && c["content"][0]["type"] == "diff")
        .collect();
    assert_eq!(diffs.len(), 1, "{first:#}");
    let diff = &diffs[0]["content"][0];
    let path = diff["path"].as_str().expect("path");
    assert!(path.ends_with("/lead/notes.txt"), "{diff:#}");
    assert_eq!(diff["newText"], "hello\n");
    assert!(diff["oldText"].is_null(), "{diff:#}");
    assert_eq!(std::fs::read_to_string(path).expect("kept"), "hello\n");
    let slow = &run["slow"];
    assert_eq!(slow["stop"], "cancelled", "{run:#}");
    assert!(!slow["text"].as_str().unwrap_or("").contains("never"));
    assert_no_survivor(&marker);

    // A new process goes on with the conversation: replayed, then its third run.
    let loaded = client("load", ws.path(), &[id], &agent, &marker);
    let replayed: Vec<String> = loaded["replayed"]
        .as_array()
        .expect("replayed")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        replayed,
        ["first", "checking done", "slow", "started"],
        "{loaded:#}"
    );
    assert_eq!(loaded["second"]["stop"], "end_turn", "{loaded:#}");
    assert_eq!(loaded["second"]["text"], "two");
    let third = ws.path().join(".capfleet/runs").join(format!("{id}.3"));
    assert!(third.join("journal.jsonl").is_file(), "{}", third.display());
    assert_no_survivor(&marker);
}
