//! The sim's lifecycle over pipes: crashes, hangs, floods, malformed lines, resume,
//! partial messages, error results and script validation.

use super::*;

#[test]
fn crash_exits_with_code() {
    let mut sim = Sim::script(
        r#"turn = [{ steps = [{ say = "bye" }, { crash = 3 }] }]"#,
        &[],
    );
    sim.init();
    sim.prompt("go");
    assert_eq!(sim.frame()["message"]["content"][0]["text"], "bye");
    assert_eq!(sim.wait_exit().code(), Some(3));
}

#[test]
fn crash_once_does_not_recur_with_same_state_dir() {
    let dir = state_dir("once");
    let script = r#"turn = [{ steps = [{ crash = 7, once = true }, { say = "survived" }] }]"#;
    let dir_arg = dir.to_str().expect("utf-8 path");
    let mut first = Sim::script(script, &["--state-dir", dir_arg]);
    first.init();
    first.prompt("go");
    assert_eq!(first.wait_exit().code(), Some(7));
    let mut second = Sim::script(script, &["--state-dir", dir_arg]);
    second.init();
    second.prompt("go");
    let frames = second.until_result();
    assert_eq!(frames[1]["result"], "survived");
    assert_eq!(second.wait_exit().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn once_without_state_dir_is_a_usage_error() {
    let mut sim = Sim::script(r#"turn = [{ steps = [{ crash = 1, once = true }] }]"#, &[]);
    assert_eq!(sim.wait_exit().code(), Some(2));
}

#[test]
fn sigkill_self() {
    let mut sim = Sim::script(r#"turn = [{ steps = [{ crash = "sigkill" }] }]"#, &[]);
    sim.init();
    sim.prompt("die");
    assert_eq!(sim.wait_exit().signal(), Some(libc::SIGKILL));
}

#[test]
fn hang_keeps_running_until_killed() {
    let mut sim = Sim::script(
        r#"turn = [{ steps = [{ say = "before" }, { hang = true }] }]"#,
        &[],
    );
    sim.init();
    sim.prompt("go");
    assert_eq!(sim.frame()["message"]["content"][0]["text"], "before");
    std::thread::sleep(Duration::from_millis(300));
    sim.stdin = None;
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        sim.child.try_wait().expect("try_wait").is_none(),
        "a hung sim must still run"
    );
    assert!(sim.lines.try_recv().is_err(), "a hung sim says nothing");
    sim.child.kill().expect("kill");
    assert_eq!(
        sim.child.wait().expect("wait").signal(),
        Some(libc::SIGKILL)
    );
}

#[test]
fn flood_arrives_complete() {
    const BYTES: u64 = 5_000_000;
    let mut sim = Sim::script(
        &format!("turn = [{{ steps = [{{ flood = {BYTES}, chunk = 65536 }}] }}]"),
        &[],
    );
    sim.init();
    sim.prompt("flood");
    let (mut total, mut frames) = (0u64, 0u64);
    loop {
        let frame = sim.frame();
        if frame["type"] == "result" {
            assert_eq!(frame["subtype"], "success");
            break;
        }
        let text = frame["message"]["content"][0]["text"]
            .as_str()
            .expect("flood text");
        assert!(text.len() <= 65536);
        total += text.len() as u64;
        frames += 1;
    }
    assert_eq!(total, BYTES);
    assert_eq!(frames, BYTES.div_ceil(65536));
}

#[test]
fn malformed_and_oversize_lines_are_verbatim() {
    let script = r#"turn = [{ steps = [{ raw = "{not json" }, { oversize = 2000000 }, { say = "after" }] }]"#;
    let mut sim = Sim::script(script, &[]);
    sim.init();
    sim.prompt("go");
    assert_eq!(sim.line(), "{not json");
    let big = sim.line();
    assert_eq!(big.len(), 2_000_000);
    let frame: Value = serde_json::from_str(&big).expect("oversize line is a valid frame");
    assert_eq!(frame["type"], "assistant");
    assert_eq!(sim.frame()["message"]["content"][0]["text"], "after");
}

#[test]
fn echo_after_script_exhaustion_and_text_blocks() {
    let mut sim = Sim::script(r#"turn = [{ steps = [{ say = "scripted" }] }]"#, &[]);
    sim.init();
    sim.prompt("one");
    assert_eq!(sim.until_result()[1]["result"], "scripted");
    sim.send(json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "two"}]}}));
    assert_eq!(sim.until_result()[1]["result"], "echo: two");
}

#[test]
fn resume_keeps_session_id() {
    let mut sim = Sim::spawn(&[
        "--mode",
        "stream-json",
        "--resume",
        "sess-resumed",
        "--model",
        "m-x",
    ]);
    let init = sim.init();
    assert_eq!(
        (init["session_id"].as_str(), init["model"].as_str()),
        (Some("sess-resumed"), Some("m-x"))
    );
    sim.prompt("hi");
    let frames = sim.until_result();
    assert!(frames.iter().all(|f| f["session_id"] == "sess-resumed"));
}

#[test]
fn partial_messages_stream_deltas_then_snapshot() {
    let mut sim = Sim::script(
        r#"turn = [{ steps = [{ say = "abcdefg", chunk = 3 }] }]"#,
        &["--include-partial-messages"],
    );
    sim.init();
    sim.prompt("go");
    let frames = sim.until_result();
    assert_eq!(
        kinds(&frames),
        [
            "event/message_start",
            "event/content_block_start",
            "event/content_block_delta",
            "event/content_block_delta",
            "event/content_block_delta",
            "event/content_block_stop",
            "assistant/text",
            "event/message_delta",
            "event/message_stop",
            "result"
        ]
    );
    let deltas: Vec<&str> = frames[2..5]
        .iter()
        .filter_map(|f| f["event"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(deltas, ["abc", "def", "g"]);
    assert_eq!(frames[6]["message"]["content"][0]["text"], "abcdefg");
}

#[test]
fn error_step_gives_error_result() {
    let mut sim = Sim::script(
        r#"turn = [{ steps = [{ error = "rate_limit_error: slow down" }, { say = "never" }] }]"#,
        &[],
    );
    sim.init();
    sim.prompt("go");
    let frames = sim.until_result();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (
            frames[0]["subtype"].as_str(),
            frames[0]["is_error"].as_bool()
        ),
        (Some("error_during_execution"), Some(true))
    );
    assert_eq!(frames[0]["error"], "rate_limit_error: slow down");
}

#[test]
fn bad_script_names_turn_step_and_key() {
    for (script, expected) in [
        (
            r#"turn = [{ steps = [{ say = "ok" }, { say = 3 }] }]"#,
            "<inline>: turn 1 step 2: key `say`",
        ),
        (
            r#"turn = [{ steps = [{ tool = "Bash", colour = "red" }] }]"#,
            "turn 1 step 1: key `colour`: unknown key",
        ),
        (
            r#"turn = [{ steps = [{ say = "a", think = "b" }] }]"#,
            "turn 1 step 1: key `think`",
        ),
        ("bogus = 1", "<inline>: key `bogus`"),
        ("[[turn", "invalid TOML"),
    ] {
        let mut sim = Sim::script(script, &[]);
        let status = sim.wait_exit();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut sim.child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert_eq!(status.code(), Some(2), "{script}: {stderr}");
        assert!(stderr.contains(expected), "{script}: {stderr}");
    }
    let mut missing = Sim::spawn(&["--script", "/nonexistent/sim.toml"]);
    assert_eq!(missing.wait_exit().code(), Some(2));
}

#[test]
fn shipped_demo_scripts_are_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/sim");
    let state = state_dir("demo");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("config/sim") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let args = [
                "--script",
                path.to_str().expect("utf-8"),
                "--state-dir",
                state.to_str().expect("utf-8"),
            ];
            let mut sim = Sim::spawn(&args);
            sim.init();
            assert_eq!(sim.wait_exit().code(), Some(0), "{}", path.display());
            count += 1;
        }
    }
    assert!(count >= 3);
    let _ = std::fs::remove_dir_all(&state);
}

/// At the end of its input mid-turn the sim finishes the turn (as Claude Code does),
/// then exits 0; with `exit_at_eof = true` it exits 0 at once, the turn unfinished.
#[test]
fn end_of_input_mid_turn_finishes_the_turn_or_with_exit_at_eof_exits_at_once() {
    let steps = r#"[[turn]]
steps = [{ say = "before" }, { sleep_ms = 1500 }, { say = "after" }]"#;
    for exit_at_eof in [false, true] {
        let mut sim = Sim::script(&format!("exit_at_eof = {exit_at_eof}\n{steps}"), &[]);
        sim.init();
        sim.prompt("go");
        assert_eq!(sim.frame()["message"]["content"][0]["text"], "before");
        let t0 = Instant::now();
        assert_eq!(sim.wait_exit().code(), Some(0));
        // Every line it wrote: its stdout has ended with it.
        let rest: Vec<String> = sim.lines.iter().collect();
        if exit_at_eof {
            assert!(
                t0.elapsed() < Duration::from_millis(1000),
                "{:?}",
                t0.elapsed()
            );
            assert!(rest.is_empty(), "nothing after the end of input: {rest:?}");
        } else {
            assert!(
                t0.elapsed() >= Duration::from_millis(1000),
                "{:?}",
                t0.elapsed()
            );
            let result = rest.iter().find(|l| l.contains("\"type\":\"result\""));
            assert!(result.is_some_and(|l| l.contains("after")), "{rest:?}");
        }
    }
}
