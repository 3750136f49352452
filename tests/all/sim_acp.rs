//! `capfleet sim --mode acp` driven by `capfleet chat` over ACP-stdio: script steps
//! call the orchestrator's `fs/*`, `_cap/fs.*` and `terminal/*` (under `fs.scope`
//! and terminal vetting) and ask permissions; `_cap/fs.watch` publishes
//! `cap.fs.change`, `_cap/notify` a system text; cancel ends the turn `cancelled`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{of_kind, of_type, texts};
use serde_json::Value;

use crate::common;

fn script(ws: &Path) -> String {
    let ws = ws.display();
    format!(
        r#"
[[turn]]
match = "files"
steps = [
  {{ rpc = "fs/read_text_file", params = {{ path = "{ws}/f.txt" }} }},
  {{ rpc = "fs/write_text_file", params = {{ path = "{ws}/new.txt", content = "from sim" }} }},
  {{ rpc = "fs/read_text_file", params = {{ path = "/etc/hostname" }} }},
  {{ rpc = "fs/read_text_file", params = {{ path = "{ws}/missing.txt" }} }},
  {{ rpc = "_cap/fs.list", params = {{ path = "{ws}" }} }},
]

[[turn]]
match = "term"
steps = [{{ run = "echo", args = ["hi-term"] }}]

[[turn]]
match = "perm"
steps = [
  {{ permission = "Deploy", input = {{ target = "prod" }}, risk = "high", output = "deployed" }},
  {{ say = "after" }},
]

[[turn]]
match = "watch"
steps = [
  {{ rpc = "_cap/fs.watch", params = {{ path = "{ws}", recursive = true }} }},
  {{ sleep_ms = 400 }},
  {{ rpc = "fs/write_text_file", params = {{ path = "{ws}/w.txt", content = "w" }} }},
  {{ sleep_ms = 800 }},
  {{ rpc = "_cap/notify", params = {{ title = "Done", body = "watching", urgent = false }} }},
]

[[turn]]
match = "elicit"
steps = [
  {{ rpc = "elicitation/create", params = {{ mode = "form", message = "Your name?", requestedSchema = {{ type = "object", properties = {{ name = {{ type = "string" }} }}, required = ["name"] }} }} }},
  {{ rpc = "elicitation/create", params = {{ mode = "url", message = "Log in", elicitationId = "e1", url = "https://example.invalid/login" }} }},
]

[[turn]]
match = "slow"
steps = [{{ say = "working" }}, {{ sleep_ms = 30000 }}, {{ say = "never" }}]
"#
    )
}

fn run(
    ws: &Path,
    tasks: &[&str],
    extra: &[&str],
    sigint: Option<Duration>,
) -> (Vec<Value>, Option<i32>) {
    let bin = common::BIN;
    let script_path = ws.join("script.toml");
    std::fs::write(&script_path, script(ws)).expect("script");
    let mut c = Command::new(bin);
    c.arg("chat")
        .arg(common::support("sim-acp.toml"))
        .arg("--json")
        .arg("--cwd")
        .arg(ws)
        .arg("--script")
        .arg(&script_path);
    for t in tasks {
        c.args(["-t", t]);
    }
    c.args(extra)
        .args(["--argv", bin, "sim", "--mode", "acp"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    common::run_chat(c, sigint, Duration::from_secs(60))
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("f.txt"), "inside").expect("f");
    ws
}

#[test]
fn fs_calls_go_through_the_orchestrator_under_scope() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("ws");
    let (ev, code) = run(&root, &["files"], &[], None);
    assert_eq!(code, Some(0), "{ev:#?}");
    let t = texts(&ev);
    assert!(
        t.contains(r#"fs/read_text_file -> {"content":"inside"}"#),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).expect("new.txt"),
        "from sim"
    );
    assert!(
        t.contains("fs/read_text_file error: path outside the declared fs.scope"),
        "{t}"
    );
    assert!(
        t.contains("fs/read_text_file error: Resource not found"),
        "a missing file in scope is ACP's -32002, which agents read as ENOENT: {t}"
    );
    assert!(t.contains("_cap/fs.list -> ") && t.contains("f.txt"), "{t}");
    assert_eq!(of_type(&ev, "turn_ended")[0]["stop_reason"], "end_turn");
}

#[test]
fn terminal_and_permission_steps_are_denied_fail_safe() {
    let ws = workspace();
    let (ev, code) = run(ws.path(), &["term", "perm"], &[], None);
    assert_eq!(code, Some(0), "{ev:#?}");
    let reqs = of_kind(&ev, "cap.permission.request");
    let tools: Vec<_> = reqs.iter().map(|r| r["event"]["tool"].clone()).collect();
    assert_eq!(tools, ["terminal.create", "Deploy"], "{reqs:#?}");
    let t = texts(&ev);
    assert!(
        t.contains("run echo error: ") && !t.contains("output=hi-term"),
        "{t}"
    );
    assert!(t.ends_with("after"), "a rejected tool is skipped: {t}");
    let ends = of_kind(&ev, "cap.tool_call.end");
    assert_eq!(
        ends.last().expect("end")["event"]["is_error"],
        true,
        "{ends:#?}"
    );
}

#[test]
fn terminal_and_permission_steps_run_when_allowed() {
    let ws = workspace();
    let allow = [
        "--allow-tool",
        "terminal.create",
        "--allow-tool",
        "Deploy",
        "--max-risk",
        "high",
    ];
    let (ev, code) = run(ws.path(), &["term", "perm"], &allow, None);
    assert_eq!(code, Some(0), "{ev:#?}");
    let t = texts(&ev);
    assert!(t.contains("exit=0 output=hi-term"), "{t}");
    let ends = of_kind(&ev, "cap.tool_call.end");
    assert_eq!(
        ends.last().expect("end")["event"]["output"],
        "deployed",
        "{ends:#?}"
    );
}

#[test]
fn cancel_ends_a_sim_turn_cancelled() {
    let ws = workspace();
    let (ev, code) = run(
        ws.path(),
        &["slow", "echo me"],
        &[],
        Some(Duration::from_millis(1500)),
    );
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends[0]["stop_reason"], "cancelled", "{ends:#?}");
    assert_eq!(ends[1]["stop_reason"], "end_turn");
    let t = texts(&ev);
    assert!(!t.contains("never") && t.ends_with("echo: echo me"), "{t}");
    assert_eq!(code, Some(0));
}

#[test]
fn fs_watch_and_notify_reach_the_session() {
    let ws = workspace();
    let root = std::fs::canonicalize(ws.path()).expect("ws");
    let (ev, code) = run(&root, &["watch"], &[], None);
    assert_eq!(code, Some(0), "{ev:#?}");
    let t = texts(&ev);
    assert!(
        t.contains(r#"_cap/fs.watch -> {"subscription_id":"watch-1"}"#),
        "{t}"
    );
    let changes = of_kind(&ev, "cap.fs.change");
    let w = root.join("w.txt").display().to_string();
    assert!(
        changes
            .iter()
            .any(|c| c["event"]["path"] == w.as_str() && c["event"]["event"] == "created"),
        "{changes:#?}"
    );
    let notes: Vec<_> = of_kind(&ev, "cap.text_chunk")
        .into_iter()
        .filter(|e| e["event"]["channel"] == "system")
        .collect();
    assert!(
        notes.iter().any(|e| e["event"]["text"] == "Done: watching"),
        "{notes:#?}"
    );
}

#[test]
fn form_elicitation_asks_the_user_url_elicitation_is_declined() {
    let ws = workspace();
    let (ev, code) = run(ws.path(), &["elicit"], &[], None);
    assert_eq!(code, Some(0), "{ev:#?}");
    let asks = of_kind(&ev, "cap.ask_user");
    assert_eq!(asks.len(), 1, "only the form asks: {asks:#?}");
    assert_eq!(asks[0]["event"]["prompt"], "Your name?");
    assert_eq!(
        asks[0]["event"]["form"]["properties"]["name"]["type"],
        "string"
    );
    let t = texts(&ev);
    assert_eq!(
        t.matches(r#"elicitation/create -> {"action":"decline"}"#)
            .count(),
        2,
        "no human: the form is declined fail-safe, the URL always: {t}"
    );
}
