//! A turn whose end is a line over the line cap (`[limits] max_line_bytes`, 1 MiB by
//! default) fails at once instead of waiting for the turn timeout (600 s) and being
//! re-issued until the restart budget melts down (issue 34, point 4): the sim's
//! `result` frame made one 2 MiB line (`oversize = N, result = true`).

use std::time::Duration;

use serde_json::Value;

use crate::common::chaos::{
    Chat, Finished, Output, assert_no_agent_left, assert_stream_and_journal, count, error_code,
    lines, position, ty,
};

/// `capfleet chat sim` on `script` (default turn timeout: 600 s) to its end.
fn run(label: &str, script: &str) -> Finished {
    let chat = Chat::start(label, script, Output::Json, &[]);
    let marker = chat.marker.clone();
    let run = chat.finish();
    assert_stream_and_journal(&run.events, &run.journal);
    assert_no_agent_left(&marker);
    run
}

/// The one `cap.error line_too_long` of a run: it names the cap, its size and the
/// manifest key that raises it.
fn lost_end(ev: &[Value]) -> &Value {
    let lost: Vec<&Value> = ev
        .iter()
        .filter(|e| error_code(e) == Some("line_too_long"))
        .collect();
    assert_eq!(lost.len(), 1, "{}", lines(ev));
    let e = &lost[0]["event"];
    let message = e["message"].as_str().unwrap_or("");
    assert!(message.contains("[limits] max_line_bytes"), "{message}");
    assert!(message.contains("1048576 bytes"), "{message}");
    assert_eq!(e["details"]["manifest_key"], "limits.max_line_bytes");
    assert_eq!(e["details"]["max_line_bytes"], 1 << 20);
    e
}

/// One turn, failed, never re-issued: no restart, one prompt, one dropped line.
fn assert_failed_once(ev: &[Value]) {
    assert_eq!(count(ev, |e| ty(e) == "turn_started"), 1, "{}", lines(ev));
    assert_eq!(count(ev, |e| ty(e) == "restart"), 0, "{}", lines(ev));
    assert_eq!(count(ev, |e| error_code(e) == Some("parse_failed")), 1);
    let ended: Vec<&Value> = ev.iter().filter(|e| ty(e) == "turn_ended").collect();
    assert_eq!(ended.len(), 1, "{}", lines(ev));
    assert_eq!(ended[0]["outcome"], "failed");
    let lost = position(ev, |e| error_code(e) == Some("line_too_long")).expect("lost");
    let end = position(ev, |e| ty(e) == "turn_ended").expect("turn_ended");
    assert!(lost < end, "{}", lines(ev));
}

/// A long-lived agent whose `result` is over the cap, then idle: the turn fails once
/// the agent stayed quiet (`session/dropped.rs`), within twice the agent's own time
/// (the same turn with a `result` under the cap) plus 5 s — never by the turn timeout.
#[test]
fn a_result_over_the_line_cap_fails_the_turn_at_once() {
    let base = run("result-under-cap", "result_under_cap.toml");
    base.assert_success();
    assert_eq!(count(&base.events, |e| error_code(e).is_some()), 0);

    let over = run("result-over-cap", "result_over_cap.toml");
    let ev = &over.events;
    assert_eq!(
        over.status.code(),
        Some(1),
        "{}\n{}",
        over.stderr,
        lines(ev)
    );
    assert_failed_once(ev);
    let lost = lost_end(ev);
    let message = lost["message"].as_str().unwrap_or("");
    assert!(message.contains("went quiet"), "{message}");
    assert_eq!(lost["details"]["line_bytes"], 2097152);
    let bound = 2 * base.elapsed + Duration::from_secs(5);
    eprintln!(
        "result over the cap: run ended in {:?} (agent's own: {:?}, bound {bound:?})",
        over.elapsed, base.elapsed
    );
    assert!(over.elapsed < bound, "{:?} >= {bound:?}", over.elapsed);
}

/// An agent whose output ends (it exits 0) after a line over the cap and before its
/// turn's end: the output loop fails the turn at once (not a clean end, no restart).
#[test]
fn a_dropped_line_then_the_agent_exiting_fails_the_turn_at_once() {
    let run = run("dropped-then-exit", "dropped_then_exit.toml");
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    assert_failed_once(ev);
    let message = lost_end(ev)["message"].as_str().unwrap_or("").to_owned();
    assert!(message.contains("ended its output"), "{message}");
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

/// ACP: the turn ends by the `session/prompt` response, which a hung agent never
/// sends after a line over the cap (`hang` reads nothing more): the turn fails once
/// the agent stayed quiet (2 s here), not at the turn timeout.
#[test]
fn an_acp_agent_quiet_after_a_dropped_line_fails_the_turn() {
    let dir = tempfile::tempdir().expect("script dir");
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [{ say = \"before.\" }, { oversize = 2097152 }, { hang = true }]\n",
    )
    .expect("script");
    let agent = crate::common::support("sim-acp.toml");
    let argv = ["--argv", crate::common::BIN, "sim", "--mode", "acp"];
    let chat = Chat::start_agent(
        "acp-dropped-quiet",
        &agent.display().to_string(),
        &script,
        Output::Json,
        &argv,
    );
    let marker = chat.marker.clone();
    let run = chat.finish();
    assert_stream_and_journal(&run.events, &run.journal);
    assert_no_agent_left(&marker);
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    assert_failed_once(ev);
    let message = lost_end(ev)["message"].as_str().unwrap_or("").to_owned();
    assert!(message.contains("went quiet"), "{message}");
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}
