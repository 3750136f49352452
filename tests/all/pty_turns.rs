//! Turn attribution on the PTY binding, end to end with the simulator's TUI: an idle
//! prompt glyph mid-answer is text, not a turn end; text printed after the prompt is
//! back (and before the next prompt) is the ended turn's late output; a manifest idle
//! pattern with a trailing blank before `$` (the spec's own `^> $` form) matches the
//! prompt as rendered; `manifest validate` warns of a pattern no rendered row can match;
//! a full-screen TUI ends its turn on the idle hint row under its input box.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use capfleet_engine::protocol::META_LATE_OUTPUT;
use capfleet_wire::events::TurnOutcome;
use common::EnvMarker;
use common::chaos::{ts, turn_text};
use common::chat::{assert_no_survivor, chat_in, script};

use crate::common;

/// The answer draws the prompt glyph alone on a line, then pauses 600 ms (three
/// times the settle silence) before the rest: the cursor has left the glyph's row,
/// so the turn goes on, and all of the answer is turn 1's, none of it turn 2's.
#[test]
fn a_prompt_glyph_mid_answer_with_a_pause_keeps_the_text_in_its_turn() {
    let dir = tempfile::tempdir().expect("dir");
    let s = script(
        dir.path(),
        r#"
[[turn]]
steps = [{ say = "part one\n❯\npart two", chunk = 13, delay_ms = 600 }]
[[turn]]
steps = [{ say = "second answer" }]
"#,
    );
    let marker = EnvMarker::new("pty-glyph");
    let run = chat_in(
        "sim-tui",
        &[
            "--task",
            "first",
            "--task",
            "second",
            "--script",
            s.to_str().expect("utf8"),
        ],
        &marker,
    );
    assert!(run.status.success(), "{:?}", run.status);
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 2, "{:?}", run.events);
    assert!(
        ended.iter().all(|e| e["outcome"] == "completed"),
        "{ended:?}"
    );
    let (one, two) = (turn_text(&run.events, 1), turn_text(&run.events, 2));
    assert!(
        one.contains("part one") && one.contains("part two"),
        "turn 1: {one:?}"
    );
    assert_eq!(two.trim(), "second answer", "turn 2: {two:?}");
    assert_no_survivor(&marker);
}

/// The TUI prints a notice 1.5 s after its prompt is back (the turn has ended: 200 ms
/// of quiet at the prompt; the margin is for a loaded machine); the next prompt goes
/// out over a second later. The notice is
/// journaled in turn 1, marked `_meta."capfleet.late_output"`, and is not turn 2's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_after_the_prompt_is_the_ended_turns_late_output() {
    let dir = tempfile::tempdir().expect("dir");
    let journal = dir.path().join("journal.jsonl");
    let tree = common::tree("late", &journal).await;
    let marker = EnvMarker::new("pty-late");
    let script = r#"
[[turn]]
steps = [{ say = "the answer" }, { late = "a late notice", delay_ms = 1500 }]
[[turn]]
steps = [{ say = "second answer" }]
"#;
    let spec = common::sim::tui_session_spec(dir.path(), "late", "s", script, &marker);
    let s = tree.spawn_session(spec, vec![]).await.expect("session");
    let first = common::ask(&s, "first").await;
    assert_eq!(first.outcome, TurnOutcome::Completed, "{first:?}");
    tokio::time::sleep(Duration::from_millis(2800)).await;
    let second = common::ask(&s, "second").await;
    assert_eq!(second.outcome, TurnOutcome::Completed, "{second:?}");
    tree.shutdown().await;
    let records = common::journal_records(&journal);
    let text_of = |late: bool, turn: u64| -> String {
        records
            .iter()
            .filter(|r| r["event"]["kind"] == "cap.text_chunk" && r["turn"] == turn)
            .filter(|r| (r["event"]["_meta"][META_LATE_OUTPUT] == true) == late)
            .filter_map(|r| r["event"]["text"].as_str())
            .collect()
    };
    assert!(
        text_of(true, 1).contains("a late notice"),
        "no late output in turn 1: {records:?}"
    );
    assert!(text_of(false, 1).contains("the answer"), "{records:?}");
    assert!(!text_of(false, 1).contains("late notice"), "{records:?}");
    let two = text_of(false, 2);
    assert_eq!(two.trim(), "second answer", "turn 2: {two:?}");
    assert!(text_of(true, 2).is_empty(), "{records:?}");
    assert!(!second.text.contains("late notice"), "{second:?}");
    assert_no_survivor(&marker);
}

/// `config/agents/sim-tui.toml` with its idle pattern replaced by `idle`, written to
/// `dir` (the agent is run with `--argv`, not looked up).
fn sim_tui_manifest(dir: &Path, idle: &str) -> PathBuf {
    let shipped = std::fs::read_to_string(common::repo_root().join("config/agents/sim-tui.toml"))
        .expect("sim-tui manifest");
    let line = shipped
        .lines()
        .find(|l| l.starts_with("idle = "))
        .expect("an idle line");
    let path = dir.join("sim-tui-spaced.toml");
    std::fs::write(&path, shipped.replace(line, &format!("idle = [{idle:?}]"))).expect("write");
    path
}

/// The spec's `^> $` form (a blank before `$`) for the sim's glyph: a rendered row's
/// trailing blanks are trimmed, yet the turn ends on the prompt, promptly.
#[test]
fn an_idle_pattern_with_a_trailing_blank_matches_the_rendered_prompt() {
    let dir = tempfile::tempdir().expect("dir");
    let manifest = sim_tui_manifest(dir.path(), "^❯ $");
    let s = script(dir.path(), "[[turn]]\nsteps = [{ say = \"hello\" }]\n");
    let marker = EnvMarker::new("pty-spaced");
    let run = chat_in(
        manifest.to_str().expect("utf8"),
        &[
            "--task",
            "hi",
            "--script",
            s.to_str().expect("utf8"),
            "--turn-timeout-s",
            "8",
            "--restart",
            "temporary",
            "--argv",
            common::BIN,
            "sim",
            "--mode",
            "tui",
        ],
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:?}", run.status, run.events);
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1, "{:?}", run.events);
    assert_eq!(ended[0]["outcome"], "completed");
    assert!(run.wall < Duration::from_secs(10), "{:?}", run.wall);
    assert_eq!(turn_text(&run.events, 1).trim(), "hello");
    assert_no_survivor(&marker);
}

/// A full-screen TUI (issue 34, point 1): the sim with `--fullscreen` redraws the
/// whole screen by cursor position on every frame, keeps its input box (and the
/// visible cursor) on screen while it works, shows a spinner, goes silent for 600 ms
/// after the answer's first line, and once done draws its dim idle hint
/// `  ? for shortcuts` as the last row, under the box: the manifest's idle pattern
/// matches that row, not the cursor's. Each turn ends promptly (within 3 s of its
/// start against a script of under 1 s, never by the 10 s turn timeout) with its
/// answer and nothing else: no chrome, no earlier turn's rows redrawn.
#[test]
fn a_full_screen_tui_ends_its_turn_on_the_idle_hint_under_its_input_box() {
    let dir = tempfile::tempdir().expect("dir");
    let manifest = sim_tui_manifest(dir.path(), r"^\s*\? for shortcuts\s*$");
    let s = script(
        dir.path(),
        r#"
[[turn]]
steps = [
  { sleep_ms = 300 },
  { say = "Here is the answer.\nIt spans two lines.", chunk = 20, delay_ms = 600 },
]
[[turn]]
steps = [{ sleep_ms = 100 }, { say = "second answer" }]
"#,
    );
    let marker = EnvMarker::new("pty-fullscreen");
    let run = chat_in(
        manifest.to_str().expect("utf8"),
        &[
            "--task",
            "first",
            "--task",
            "second",
            "--script",
            s.to_str().expect("utf8"),
            "--turn-timeout-s",
            "10",
            "--restart",
            "temporary",
            "--argv",
            common::BIN,
            "sim",
            "--mode",
            "tui",
            "--fullscreen",
        ],
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:?}", run.status, run.events);
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 2, "{:?}", run.events);
    assert!(
        ended.iter().all(|e| e["outcome"] == "completed"),
        "{ended:?}"
    );
    assert_eq!(
        turn_text(&run.events, 1).trim(),
        "Here is the answer.\nIt spans two lines."
    );
    assert_eq!(turn_text(&run.events, 2).trim(), "second answer");
    let started = run.session("turn_started");
    assert_eq!(started.len(), 2, "{:?}", run.events);
    for (start, end) in started.iter().zip(&ended) {
        let took = ts(end) - ts(start);
        assert!(took < 3_000, "a turn took {took} ms: {start} .. {end}");
    }
    assert!(run.wall < Duration::from_secs(10), "{:?}", run.wall);
    assert_no_survivor(&marker);
}

/// `manifest validate`: `^❯ $` is fine as rendered (no warning); `^❯\s+$` needs a
/// trailing blank no rendered row has, and is warned about (still valid, exit 0).
#[test]
fn validate_warns_of_a_pattern_no_rendered_row_can_match() {
    let dir = tempfile::tempdir().expect("dir");
    let validate = |path: &Path| {
        let out = Command::new(common::BIN)
            .args(["manifest", "validate"])
            .arg(path)
            .output()
            .expect("validate");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let spaced = sim_tui_manifest(dir.path(), "^❯ $");
    let (code, stderr) = validate(&spaced);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let never = dir.path().join("never.toml");
    std::fs::rename(sim_tui_manifest(dir.path(), "^❯\\s+$"), &never).expect("rename");
    let (code, stderr) = validate(&never);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("parse.idle[0]") && stderr.contains("can never match a rendered row"),
        "{stderr}"
    );
}
