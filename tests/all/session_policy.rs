//! Restart policies end to end, through `capfleet chat sim --restart …`: which exits
//! are restarted (temporary, transient, permanent), the meltdown past
//! `--max-restarts`, and a poison turn (failing twice the same way) not re-issued. Every run checks its NDJSON against its journal and that no
//! agent survives.

use serde_json::Value;

use chaos::{
    Chat, Finished, Output, assert_no_agent_left, assert_stream_and_journal, count, error_code,
    lines, position, turn_text, ty,
};

use crate::common::chaos;

fn run(label: &str, script: &str, extra: &[&str]) -> Finished {
    let chat = Chat::start(label, script, Output::Json, extra);
    let marker = chat.marker.clone();
    let run = chat.finish();
    assert_stream_and_journal(&run.events, &run.journal);
    assert_no_agent_left(&marker);
    run
}

fn restarts(ev: &[Value]) -> Vec<&Value> {
    ev.iter().filter(|e| ty(e) == "restart").collect()
}

fn outcome(ev: &[Value]) -> Option<&str> {
    ev.iter()
        .find(|e| ty(e) == "turn_ended")
        .and_then(|e| e["outcome"].as_str())
}

/// `temporary` never restarts: an exit 3 mid-turn fails the session (`failed`, exit 1).
#[test]
fn temporary_never_restarts() {
    let run = run("temporary", "crash_once.toml", &["--restart", "temporary"]);
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    assert!(restarts(ev).is_empty(), "{}", lines(ev));
    let err = position(ev, |e| error_code(e) == Some("agent_exited")).expect("cap.error");
    assert_eq!(ev[err]["event"]["details"]["cause"]["code"], 3);
    let failed = position(ev, |e| ty(e) == "failed").expect("failed event");
    assert!(err < failed);
    let reason = ev[failed]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("status 3"), "{reason}");
    assert!(reason.contains("Temporary"), "{reason}");
    assert_eq!(
        outcome(ev),
        Some("failed"),
        "the turn ends failed, not completed"
    );
    assert!(!turn_text(ev, 1).contains("second-try-done."));
    assert_eq!(ev.last().map(|e| e["to"].clone()), Some("failed".into()));
}

/// `transient` (the default) restarts an abnormal exit (status 3): the turn
/// completes on the second process, exit 0.
#[test]
fn transient_restarts_an_abnormal_exit() {
    let run = run(
        "transient-abnormal",
        "crash_once.toml",
        &["--restart", "transient"],
    );
    let ev = &run.events;
    assert!(run.status.success(), "{}\n{}", run.stderr, lines(ev));
    let r = restarts(ev);
    assert_eq!(r.len(), 1, "{}", lines(ev));
    assert_eq!(r[0]["cause"]["kind"], "exited");
    assert_eq!(r[0]["cause"]["code"], 3);
    assert_eq!(r[0]["attempt"], 1);
    assert_eq!(outcome(ev), Some("completed"));
    let text = turn_text(ev, 1);
    assert!(text.starts_with("first-try."), "{text}");
    assert!(text.ends_with("second-try-done."), "{text}");
    assert_eq!(count(ev, |e| ty(e) == "failed"), 0);
}

/// `transient` does not restart a normal exit (status 0 mid-turn): no `cap.error`, no
/// restart, the session closes, the turn is lost (exit 1, "closed"), not failed.
#[test]
fn transient_does_not_restart_a_normal_exit() {
    let run = run(
        "transient-normal",
        "exit_zero_once.toml",
        &["--restart", "transient"],
    );
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    assert!(restarts(ev).is_empty(), "{}", lines(ev));
    assert_eq!(count(ev, |e| error_code(e).is_some()), 0, "{}", lines(ev));
    assert_eq!(count(ev, |e| ty(e) == "failed"), 0, "{}", lines(ev));
    assert_eq!(
        outcome(ev),
        Some("failed"),
        "the lost turn is reported ended"
    );
    assert_eq!(ev.last().map(|e| e["to"].clone()), Some("closed".into()));
    assert!(run.stderr.contains("closed"), "{}", run.stderr);
}

/// `permanent` restarts even a normal exit: the same script completes, exit 0.
#[test]
fn permanent_restarts_a_normal_exit() {
    let run = run(
        "permanent-normal",
        "exit_zero_once.toml",
        &["--restart", "permanent"],
    );
    let ev = &run.events;
    assert!(run.status.success(), "{}\n{}", run.stderr, lines(ev));
    let r = restarts(ev);
    assert_eq!(r.len(), 1, "{}", lines(ev));
    assert_eq!(r[0]["cause"]["kind"], "normal");
    assert_eq!(outcome(ev), Some("completed"));
    assert!(turn_text(ev, 1).ends_with("back-and-done."));
}

/// An agent that crashes every time, `--max-restarts 2`: exactly two restarts
/// (attempts 1 and 2, backoff 0 then 100 ms), then `failed` with a meltdown, exit 1.
/// It exits with another status each time: the same failure twice in a row would be a
/// poison turn (below).
#[test]
fn crashing_every_time_melts_down_after_max_restarts() {
    let run = run(
        "meltdown",
        "crash_differently.toml",
        &["--max-restarts", "2", "--restart-window-s", "60"],
    );
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    let r = restarts(ev);
    assert_eq!(r.len(), 2, "{}", lines(ev));
    assert_eq!(
        (r[0]["attempt"].clone(), r[0]["delay_ms"].clone()),
        (1.into(), 0.into())
    );
    assert_eq!(
        (r[1]["attempt"].clone(), r[1]["delay_ms"].clone()),
        (2.into(), 100.into())
    );
    assert_eq!(count(ev, |e| error_code(e) == Some("agent_exited")), 3);
    assert_eq!(count(ev, |e| ty(e) == "turn_started"), 3);
    let failed: Vec<&Value> = ev.iter().filter(|e| ty(e) == "failed").collect();
    assert_eq!(failed.len(), 1);
    let reason = failed[0]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("meltdown: 2 restarts"), "{reason}");
    let last_restart = ev
        .iter()
        .rposition(|e| ty(e) == "restart")
        .expect("restart");
    let failed_at = position(ev, |e| ty(e) == "failed").expect("failed");
    assert!(last_restart < failed_at);
    assert_eq!(outcome(ev), Some("failed"));
}

/// A turn whose attempts fail twice in a row the same way (exit 3 after `doomed.`,
/// `cap.error agent_exited`) is a poison turn: not re-issued a third time although the
/// policy (3 restarts in 60 s) would allow it. The session reports it (`cap.error
/// poison_turn`: the turn, the attempts, the code and the cause), ends the turn failed
/// (exit 1) and does not fail itself; the agent comes back for the turns after it.
#[test]
fn a_turn_failing_twice_the_same_way_is_a_poison_turn() {
    let run = run("poison", "crash_always.toml", &[]);
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));
    assert_eq!(count(ev, |e| ty(e) == "turn_started"), 2, "{}", lines(ev));
    assert_eq!(count(ev, |e| error_code(e) == Some("agent_exited")), 2);
    let poison: Vec<&Value> = ev
        .iter()
        .filter(|e| error_code(e) == Some("poison_turn"))
        .collect();
    assert_eq!(poison.len(), 1, "{}", lines(ev));
    let details = &poison[0]["event"]["details"];
    assert_eq!(details["turn"], 1);
    assert_eq!(details["attempts"], 2);
    assert_eq!(details["code"], "agent_exited");
    assert_eq!(details["cause"]["kind"], "exited");
    assert_eq!(details["cause"]["code"], 3);
    let message = poison[0]["event"]["message"].as_str().unwrap_or("");
    assert!(message.contains("on_error"), "{message}");
    assert_eq!(poison[0]["turn"], 1, "reported in the turn");
    assert_eq!(outcome(ev), Some("failed"));
    let ended = position(ev, |e| ty(e) == "turn_ended").expect("turn_ended");
    let reported = position(ev, |e| error_code(e) == Some("poison_turn")).expect("poison");
    assert!(reported < ended);
    assert_eq!(
        count(ev, |e| ty(e) == "failed"),
        0,
        "the session itself goes on"
    );
    // One restart re-issued the turn; the one after the poison brings the agent back
    // idle: no third prompt.
    let r = restarts(ev);
    assert_eq!(r.len(), 2, "{}", lines(ev));
    assert!(position(ev, |e| ty(e) == "restart" && e["attempt"] == 2).unwrap() > reported);
}
