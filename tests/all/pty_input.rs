//! What reaches a PTY agent's terminal besides prompts: a paste far larger than the
//! terminal's buffer (to an agent echoing it), and the viewer's resizes.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use common::EnvMarker;
use common::chat::{assert_no_survivor, chat_reading, script};
use serde_json::Value;

use crate::common;

/// A 256 KiB, 2,600-line prompt typed into `python3 -i`, which echoes every key:
/// written at once, the agent blocks on its echo while we block on our write.
#[test]
fn a_quarter_megabyte_paste_does_not_deadlock_an_echoing_agent() {
    const LINES: usize = 2600;
    let item = "a".repeat(96);
    let mut prompt = String::from("xs = [\n");
    for _ in 0..LINES {
        prompt.push_str(&format!("    \"{item}\",\n"));
    }
    prompt.push_str("]\nprint(len(xs), sum(map(len, xs)))");
    assert!(prompt.len() > 256 * 1024, "{} bytes", prompt.len());
    let marker = EnvMarker::new("pty-paste");
    // Too long for an argument: the task comes on stdin. The interrupt is only a
    // watchdog: a deadlocked write ends as a cancelled turn.
    let run = chat_reading(
        "repl",
        &[],
        &marker,
        Some(Duration::from_secs(45)),
        Some(prompt),
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1, "{:?}", run.wall);
    assert_eq!(ended[0]["outcome"], "completed", "{:?}", run.wall);
    let expected = format!("{LINES} {}\n", LINES * 96);
    assert_eq!(
        run.texts().last().map(String::as_str),
        Some(expected.as_str()),
        "the answer came through after the paste"
    );
    assert!(run.wall < Duration::from_secs(30), "{:?}", run.wall);
    assert_no_survivor(&marker);
}

/// `capfleet chat` on a terminal: resizing that terminal resizes the agent's.
#[test]
fn a_resize_of_the_viewers_terminal_reaches_the_agent() {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(
        dir.path(),
        r#"
[[turn]]
steps = [{ say = "waiting" }, { sleep_ms = 2500 }, { say = "done" }]
"#,
    );
    let marker = EnvMarker::new("pty-resize");
    let state = tempfile::tempdir().expect("state dir");
    let (pty, pts) = pty_process::blocking::open().expect("open a pty");
    pty.resize(pty_process::Size::new(40, 120)).expect("size");
    let mut child = pty_process::blocking::Command::new(common::BIN)
        .args(["chat", "sim-tui", "--json", "--task", "go", "--script"])
        .arg(&s)
        .env("CAPFLEET_SIM_STATE", state.path())
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn(pts)
        .expect("spawn chat on a pty");
    let t0 = Instant::now();
    let mut texts = Vec::new();
    let mut resized = false;
    // The master reads EIO once chat (the terminal's last user) exits.
    for line in BufReader::new(&pty).lines().map_while(Result::ok) {
        let Ok(event) = serde_json::from_str::<Value>(line.trim_end()) else {
            continue;
        };
        if event["type"] != "cap" || event["event"]["kind"] != "cap.text_chunk" {
            continue;
        }
        texts.push(
            event["event"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        if !resized {
            resized = true;
            pty.resize(pty_process::Size::new(30, 100)).expect("resize");
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{texts:?}");
    }
    let status = child.wait().expect("wait chat");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        texts,
        ["waiting\n", "terminal resized to 30x100\n", "done\n"],
        "the agent saw the new size mid-turn"
    );
    assert_no_survivor(&marker);
}
