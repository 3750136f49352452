//! ACP-stdio end to end: `capfleet chat` driving the official Python SDK's echo agent
//! (`tests/support/acp_echo_agent.py`, peer `py-acp`) — prompt, echo, fs through
//! the reverse RPC under `fs.scope`, permissions, a form elicitation answered at
//! the terminal, cancel, crash + `session/load`, `session/close` at the end.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{of_kind, of_type, texts};
use serde_json::{Value, json};

use crate::common;

/// `chat <acp-echo manifest> --json --cwd <dir> -t ... <extra> --argv <python> <agent>`.
fn chat_args(cwd: &Path, tasks: &[&str], extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["chat".into(), common::support("acp-echo.toml").into()];
    a.extend(["--json".into(), "--cwd".into(), cwd.into()]);
    for t in tasks {
        a.extend(["-t".into(), (*t).into()]);
    }
    a.extend(extra.iter().map(OsString::from));
    a.extend([
        "--argv".into(),
        common::peer("py-acp").into(),
        common::support("acp_echo_agent.py").into(),
    ]);
    a
}

/// `capfleet` + [`chat_args`], stdin closed (nobody to ask), stdout piped.
fn chat(cwd: &Path, tasks: &[&str], extra: &[&str]) -> Command {
    let mut c = Command::new(common::BIN);
    c.args(chat_args(cwd, tasks, extra))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run to the end (bounded), returning the NDJSON events and the exit code.
fn run(cmd: Command, signal_after: Option<Duration>) -> (Vec<Value>, Option<i32>) {
    common::run_chat(cmd, signal_after, Duration::from_secs(60))
}

#[test]
fn prompt_echo_and_fs_under_scope() {
    let ws = tempfile::tempdir().expect("ws");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(ws.path().join("f.txt"), "inside").expect("f");
    std::fs::write(outside.path().join("g.txt"), "secret").expect("g");
    std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).expect("link");
    let inside = format!("read {}", ws.path().join("f.txt").display());
    let link = format!("read {}", ws.path().join("out/g.txt").display());
    let missing = format!("read {}", outside.path().join("nope").display());
    let (ev, code) = run(
        chat(ws.path(), &["echo: hello", &inside, &link, &missing], &[]),
        None,
    );
    assert_eq!(code, Some(0), "{ev:#?}");
    let t = texts(&ev);
    assert!(t.starts_with("hellocontent=inside"), "{t}");
    let denied = "error=path outside the declared fs.scope";
    assert_eq!(
        t.matches(denied).count(),
        2,
        "existing and missing look the same: {t}"
    );
    assert!(!t.contains("secret"));
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends.len(), 4);
    assert!(ends.iter().all(|e| e["stop_reason"] == "end_turn"));
    let ready = of_kind(&ev, "cap.session.ready");
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".closed")).ok(),
        ready[0]["event"]["session_id"].as_str().map(str::to_owned),
        "the session was closed with session/close at the end"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn form_elicitation_answered_at_the_terminal() {
    let ws = tempfile::tempdir().expect("ws");
    let events = ws.path().join("events.ndjson");
    let args = chat_args(ws.path(), &["elicit", "elicit"], &[]);
    // The human types a name, then declines the second form (an empty answer).
    let answers: [(&str, &[u8]); 2] = [("answer: ", b"Ada\r"), ("answer: ", b"\r")];
    let run = common::terminal::on_a_terminal(
        ws.path(),
        &args,
        &events,
        &answers,
        Duration::from_secs(60),
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.status, run.screen);
    assert_eq!(run.answered, 2, "{}", run.screen);
    let ev: Vec<Value> = std::fs::read_to_string(&events)
        .expect("events")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let asks = of_kind(&ev, "cap.ask_user");
    assert_eq!(asks.len(), 2, "{ev:#?}");
    assert_eq!(asks[0]["event"]["prompt"], "Your name?");
    assert_eq!(
        asks[0]["event"]["form"]["properties"]["name"]["type"],
        "string"
    );
    let answered: Vec<_> = of_kind(&ev, "cap.ask_user.answer")
        .iter()
        .map(|a| a["event"]["value"].clone())
        .collect();
    assert_eq!(answered, [json!({"name": "Ada"}), Value::Null], "{ev:#?}");
    assert_eq!(
        texts(&ev),
        r#"action=accept content={"name": "Ada"}action=decline content=null"#,
        "the agent saw the content, then the decline"
    );
}

#[test]
fn permission_denied_by_fail_safe_and_allowed_by_policy() {
    let ws = tempfile::tempdir().expect("ws");
    let (ev, code) = run(chat(ws.path(), &["perm"], &[]), None);
    assert_eq!(code, Some(0));
    let req = ev
        .iter()
        .find(|e| e["event"]["kind"] == "cap.permission.request")
        .expect("permission request");
    assert_eq!(req["event"]["risk_level"], "high", "execute is high risk");
    assert!(texts(&ev).contains("outcome=no"), "{}", texts(&ev));
    let allow = ["--allow-tool", "rm -rf build", "--max-risk", "high"];
    let (ev, _) = run(chat(ws.path(), &["perm"], &allow), None);
    assert!(texts(&ev).contains("outcome=ok"), "{}", texts(&ev));
}

#[test]
fn cancel_ends_the_turn_cancelled_and_the_next_turn_runs() {
    let ws = tempfile::tempdir().expect("ws");
    let cmd = chat(ws.path(), &["slow", "echo: after"], &[]);
    let (ev, code) = run(cmd, Some(Duration::from_millis(2500)));
    let ends = of_type(&ev, "turn_ended");
    assert_eq!(ends[0]["stop_reason"], "cancelled", "{ends:#?}");
    assert_eq!(ends[1]["stop_reason"], "end_turn");
    assert!(texts(&ev).ends_with("after"));
    assert_eq!(code, Some(0));
}

#[test]
fn crash_mid_prompt_restarts_with_session_load() {
    let ws = tempfile::tempdir().expect("ws");
    let (ev, code) = run(chat(ws.path(), &["crash-once", "echo: again"], &[]), None);
    assert_eq!(code, Some(0), "{ev:#?}");
    assert!(
        ev.iter()
            .any(|e| e["event"]["kind"] == "cap.error" && e["event"]["code"] == "agent_exited")
    );
    assert_eq!(of_type(&ev, "restart").len(), 1);
    let ready: Vec<_> = ev
        .iter()
        .filter(|e| e["event"]["kind"] == "cap.session.ready")
        .map(|e| e["event"]["session_id"].clone())
        .collect();
    assert_eq!(ready.len(), 2);
    assert_eq!(ready[0], ready[1], "the same ACP session, loaded");
    assert!(texts(&ev).contains("[loaded "), "{}", texts(&ev));
}
