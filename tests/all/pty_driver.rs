//! End-to-end tests of the PTY driver: `capfleet chat` driving the simulator's TUI
//! (and python3 as a plain REPL) under a real pseudo-terminal; the real third-party
//! TUIs are in `pty_peers.rs`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::chat::{Run, assert_no_survivor, chat, script};
use common::{EnvMarker, rss_kib};

use crate::common;

/// `capfleet chat <agent> --task go` on a sim script of `body`, SIGINT sent after
/// `interrupt` if given.
fn go(agent: &str, body: &str, marker: &EnvMarker, interrupt: Option<Duration>) -> Run {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(dir.path(), body);
    let args = ["--task", "go", "--script", s.to_str().expect("utf8")];
    chat(agent, &args, marker, interrupt)
}

#[test]
fn scripted_turn_yields_exactly_its_events() {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(
        dir.path(),
        r#"
banner = "Welcome to the banner"
[[turn]]
steps = [
  { say = "Hello there\nSecond line", chunk = 3, delay_ms = 5 },
  { think = "pondering deeply" },
  { tool = "Bash", input = { command = "ls -la" }, deltas = ["a\n", "b\n"], duration_ms = 60 },
  { plan = [{ id = "p1", content = "Design", status = "in_progress", priority = "high" },
            { id = "p2", content = "Build", status = "pending" }] },
  { ask = "Do you want me to continue?" },
  { say = "Done" },
  { error = "rate_limit_error: slow down", subtype = "error_during_execution" },
]
"#,
    );
    let marker = EnvMarker::new("pty-scripted");
    let run = chat(
        "sim-tui",
        // The rate-limit error fails the turn (by default it would pause it).
        &[
            "--task",
            "hi there",
            "--script",
            s.to_str().expect("utf8"),
            "--on-rate-limit",
            "fail",
        ],
        &marker,
        None,
    );
    assert_eq!(
        run.texts(),
        ["Hello there\n", "Second line\n", "Done\n"],
        "no banner, spinner, prompt, echoed input or answer in the text"
    );
    let starts = run.kinds("cap.tool_call.start");
    let ends = run.kinds("cap.tool_call.end");
    assert_eq!(starts.len(), 1);
    assert_eq!(ends.len(), 1);
    assert_eq!(starts[0]["call_id"], ends[0]["call_id"]);
    assert_eq!(starts[0]["name"], "Bash");
    assert_eq!(starts[0]["input"]["args"], "ls -la");
    assert_eq!(ends[0]["output"], "a\nb\n");
    let plan = run.kinds("cap.plan");
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0]["entries"][0]["id"], "p1");
    assert_eq!(plan[0]["entries"][0]["status"], "in_progress");
    assert_eq!(plan[0]["entries"][0]["priority"], "high");
    assert_eq!(plan[0]["entries"][1]["content"], "Build");
    assert_eq!(run.kinds("cap.thought")[0]["text"], "pondering deeply");
    let asks = run.kinds("cap.ask_user");
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0]["prompt"], "Do you want me to continue? (y/n)");
    assert_eq!(
        run.kinds("cap.ask_user.answer").len(),
        1,
        "fail-safe answer"
    );
    let errors = run.kinds("cap.error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["code"], "rate_limit");
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["stop_reason"], "error");
    assert_no_survivor(&marker);
}

#[test]
fn a_spinner_pause_is_not_a_turn_end_and_turns_end_fast() {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(
        dir.path(),
        r#"
[[turn]]
steps = [{ say = "before" }, { sleep_ms = 2000 }, { say = "after" }]
[[turn]]
steps = [{ sleep_ms = 100 }, { say = "quick" }]
"#,
    );
    let marker = EnvMarker::new("pty-pause");
    let run = chat(
        "sim-tui",
        &[
            "--task",
            "one",
            "--task",
            "two",
            "--script",
            s.to_str().expect("utf8"),
        ],
        &marker,
        None,
    );
    assert!(run.status.success(), "{:?}", run.status);
    assert_eq!(
        run.texts(),
        ["before\n", "after\n", "quick\n"],
        "{:#?}",
        run.events
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 2, "one end per turn, none during the pause");
    let first = ended[0]["duration_ms"].as_u64().expect("duration");
    assert!(first >= 2000, "ended during the pause: {first} ms");
    let second = ended[1]["duration_ms"].as_u64().expect("duration");
    assert!(second < 700, "a 100 ms turn took {second} ms to end");
    assert_no_survivor(&marker);
}

#[test]
fn a_crash_reports_pty_died_then_restarts() {
    let marker = EnvMarker::new("pty-crash");
    let run = go(
        "sim-tui",
        r#"
[[turn]]
steps = [{ say = "about to crash" }, { crash = 3, once = true }]
"#,
        &marker,
        None,
    );
    let died = run
        .events
        .iter()
        .position(|e| e["event"]["kind"] == "cap.error" && e["event"]["code"] == "pty_died")
        .expect("a pty_died error");
    let restart = run
        .events
        .iter()
        .position(|e| e["type"] == "restart")
        .expect("a restart");
    assert!(died < restart, "pty_died comes before the restart");
    let ended = run.session("turn_ended");
    assert_eq!(ended.last().expect("turn end")["outcome"], "completed");
    assert_eq!(run.texts(), ["about to crash\n", "about to crash\n"]);
    assert_no_survivor(&marker);
}

#[test]
fn a_tui_ignoring_ctrl_c_is_cancelled_hard() {
    let marker = EnvMarker::new("pty-hard");
    let run = go(
        "sim-tui",
        r#"
ignore_sigint = true
[[turn]]
steps = [{ say = "working" }, { hang = true }]
"#,
        &marker,
        Some(Duration::from_millis(1500)),
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1, "{:?}", run.events);
    assert_eq!(ended[0]["outcome"], "cancelled");
    assert!(run.wall < Duration::from_secs(15), "{:?}", run.wall);
    assert_no_survivor(&marker);
}

#[test]
fn fifty_megabytes_keep_memory_bounded() {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(
        dir.path(),
        r#"
[[turn]]
steps = [{ flood = 52428800, chunk = 16384 }, { say = "the end" }]
"#,
    );
    let marker = EnvMarker::new("pty-flood");
    let state = tempfile::tempdir().expect("state dir");
    let mut child = Command::new(common::BIN)
        .args(["chat", "sim-tui", "--task", "flood", "--script"])
        .arg(&s)
        .env("CAPFLEET_SIM_STATE", state.path())
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chat");
    let pid = i32::try_from(child.id()).expect("pid");
    let stdout = child.stdout.take().expect("stdout");
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while common::is_alive(pid) {
            peak = peak.max(rss_kib(pid));
            std::thread::sleep(Duration::from_millis(100));
        }
        peak
    });
    let mut tail = String::new();
    let mut bytes = 0usize;
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        bytes += line.len() + 1;
        tail = line;
    }
    let status = child.wait().expect("wait");
    let peak = sampler.join().expect("sampler");
    assert!(status.success(), "{status:?}");
    assert!(
        bytes > 50_000_000,
        "the flood came through as text: {bytes} bytes"
    );
    assert!(
        tail.contains("the end"),
        "the screen stayed correct: {tail:?}"
    );
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");
    assert_no_survivor(&marker);
}

#[test]
fn python_repl_two_turns() {
    let marker = EnvMarker::new("pty-python");
    let run = chat(
        "repl",
        &[
            "--task",
            "for i in range(3):\n    print(i * 10)\n",
            "--task",
            "print(6 * 7)",
        ],
        &marker,
        None,
    );
    assert!(run.status.success(), "{:?}", run.status);
    assert_eq!(run.texts(), ["0\n", "10\n", "20\n", "42\n"]);
    assert_eq!(run.session("turn_ended").len(), 2);
    assert_no_survivor(&marker);
}

#[test]
fn ctrl_c_cancels_gracefully_and_keeps_the_session() {
    let marker = EnvMarker::new("pty-graceful");
    let run = go(
        "sim-tui",
        r#"
[[turn]]
steps = [{ say = "working" }, { sleep_ms = 30000 }, { say = "never" }]
"#,
        &marker,
        Some(Duration::from_millis(1500)),
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1, "{:#?}", run.events);
    assert_eq!(ended[0]["outcome"], "cancelled");
    assert!(run.session("restart").is_empty(), "Ctrl-C kept the agent");
    assert!(run.wall < Duration::from_secs(4), "{:?}", run.wall);
    assert_eq!(run.texts(), ["working\n"]);
    assert_no_survivor(&marker);
}

#[test]
fn cancel_none_is_rejected_with_cap_cancel_unsupported() {
    let dir = tempfile::tempdir().expect("dir");
    let script_body = r#"
[[turn]]
steps = [{ say = "working" }, { sleep_ms = 30000 }]
"#;
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents/sim-tui.toml"),
    )
    .expect("sim-tui manifest")
    .replace(
        "mid_turn_cancel = \"graceful\"",
        "mid_turn_cancel = \"none\"",
    );
    let path = dir.path().join("sim-tui-nocancel.toml");
    std::fs::write(&path, manifest).expect("write manifest");
    let marker = EnvMarker::new("pty-nocancel");
    let run = go(
        path.to_str().expect("utf8"),
        script_body,
        &marker,
        Some(Duration::from_millis(1500)),
    );
    let errors = run.kinds("cap.error");
    assert!(
        errors.iter().any(|e| e["code"] == "cap_cancel_unsupported"),
        "{errors:?}"
    );
    assert_no_survivor(&marker);
}
