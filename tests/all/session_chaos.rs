//! Chaos end to end: the real `capfleet chat sim` binary against agents that die by
//! SIGKILL mid-turn, hang, flood 200 MB, print malformed and oversize lines, or
//! whose orchestrator is signalled mid-turn. Every run must end (deadlines
//! everywhere) and leave no agent process behind.

use std::time::{Duration, Instant};

use chaos::{
    Chat, Output, assert_no_agent_left, assert_stream_and_journal, cap_kind, count, error_code,
    is_ready, lines, position, ts, turn_text, ty, zombie_children,
};
use common::procs::rss_kib;

use crate::common;
use crate::common::chaos;

const EVENT_WAIT: Duration = Duration::from_secs(15);

/// SIGKILL mid-turn: `cap.error agent_exited` (with the first attempt's partial text
/// before it), then `restart` (signaled 9, attempt 1, no delay), then the turn
/// completes on a new process with the partial output kept; journal == stdout; no
/// zombie while capfleet runs, no agent after it.
#[test]
fn sigkill_mid_turn_restarts_and_completes_the_turn() {
    let mut chat = Chat::start("sigkill", "sigkill_mid_turn.toml", Output::Json, &[]);
    // The restarted agent says its text, then sleeps 400 ms: look at the process
    // table while capfleet still runs.
    chat.wait_event(EVENT_WAIT, |e| {
        turn_text(std::slice::from_ref(e), 1).contains("finished-after-restart.")
    });
    let agents = chat.marker.processes();
    assert_eq!(
        agents.len(),
        1,
        "exactly the restarted agent runs: {agents:?}"
    );
    let zombies = zombie_children(chat.pid);
    assert!(zombies.is_empty(), "unreaped dead agent(s): {zombies:?}");
    let marker = chat.marker.clone();
    let run = chat.finish();
    let ev = &run.events;
    run.assert_success();

    let err = position(ev, |e| error_code(e) == Some("agent_exited"))
        .unwrap_or_else(|| panic!("no agent_exited error:\n{}", lines(ev)));
    let restart = position(ev, |e| ty(e) == "restart").expect("restart event");
    assert!(
        err < restart,
        "cap.error must precede the restart:\n{}",
        lines(ev)
    );
    assert_eq!(count(ev, |e| ty(e) == "restart"), 1);
    let r = &ev[restart];
    assert_eq!(r["cause"]["kind"], "signaled");
    assert_eq!(r["cause"]["signal"], 9);
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["delay_ms"], 0);
    assert_eq!(r["turn"], 1);
    // The first attempt's text arrived before its death was reported.
    let partial = position(ev, |e| {
        turn_text(std::slice::from_ref(e), 1) == "partial-before-kill."
    })
    .expect("partial text");
    assert!(
        partial < err,
        "partial text after the error:\n{}",
        lines(ev)
    );

    // A new agent comes up after the restart and the turn runs again (attempt 2).
    let ready = restart + position(&ev[restart..], is_ready).expect("ready after the restart");
    let attempt2 =
        position(ev, |e| ty(e) == "turn_started" && e["attempt"] == 2).expect("attempt 2");
    assert!(ready < attempt2);
    let latency = ts(&ev[ready]) - ts(&ev[err]);
    eprintln!("restart latency (cap.error -> new cap.session.ready): {latency} ms");
    assert!(latency < 1000, "restart took {latency} ms");

    let ended: Vec<_> = ev.iter().filter(|e| ty(e) == "turn_ended").collect();
    assert_eq!(ended.len(), 1, "{}", lines(ev));
    assert_eq!(ended[0]["outcome"], "completed");
    assert_eq!(ended[0]["turn"], 1);
    let text = turn_text(ev, 1);
    let kept = text
        .find("partial-before-kill.")
        .expect("partial output kept");
    let done = text
        .find("finished-after-restart.")
        .expect("text after restart");
    assert!(kept < done, "{text}");
    assert!(text.ends_with("done."), "{text}");

    assert_stream_and_journal(ev, &run.journal);
    assert_no_agent_left(&marker);
}

/// A hung agent (`hang = true`, every time) with a 1 s turn timeout: killed at the
/// timeout (`cap.error agent_hung`), restarted once, hung again, killed again, and
/// with `--max-restarts 1` the session melts down: exit 1.
#[test]
fn hung_agent_is_killed_at_the_turn_timeout_then_melts_down() {
    let chat = Chat::start(
        "hang",
        "hang.toml",
        Output::Json,
        &["--turn-timeout-s", "1", "--max-restarts", "1"],
    );
    let marker = chat.marker.clone();
    let run = chat.finish();
    let ev = &run.events;
    assert_eq!(run.status.code(), Some(1), "{}\n{}", run.stderr, lines(ev));

    let started: Vec<usize> = (0..ev.len())
        .filter(|&i| ty(&ev[i]) == "turn_started")
        .collect();
    let hung: Vec<usize> = (0..ev.len())
        .filter(|&i| error_code(&ev[i]) == Some("agent_hung"))
        .collect();
    assert_eq!(started.len(), 2, "{}", lines(ev));
    assert_eq!(hung.len(), 2, "{}", lines(ev));
    for (s, h) in started.iter().zip(&hung) {
        let waited = ts(&ev[*h]) - ts(&ev[*s]);
        eprintln!("hung agent killed {waited} ms after its prompt");
        assert!(
            (1000..3000).contains(&waited),
            "killed {waited} ms after the prompt (timeout 1 s)"
        );
        assert_eq!(ev[*h]["event"]["details"]["cause"]["kind"], "hung");
    }
    let restarts: Vec<&serde_json::Value> = ev.iter().filter(|e| ty(e) == "restart").collect();
    assert_eq!(restarts.len(), 1, "{}", lines(ev));
    assert_eq!(restarts[0]["cause"]["kind"], "hung");
    assert_eq!(restarts[0]["cause"]["timeout_ms"], 1000);
    let restart = position(ev, |e| ty(e) == "restart").expect("restart");
    assert!(hung[0] < restart && restart < started[1]);
    let failed = position(ev, |e| ty(e) == "failed").expect("failed event");
    assert!(hung[1] < failed);
    let reason = ev[failed]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("meltdown"), "{reason}");
    assert!(turn_text(ev, 1).contains("about-to-hang."));
    assert!(
        run.elapsed < Duration::from_secs(10),
        "took {:?}",
        run.elapsed
    );

    assert_stream_and_journal(ev, &run.journal);
    assert_no_agent_left(&marker);
}

/// A 200 MB flood in one turn: capfleet's RSS stays bounded while it streams, every
/// byte reaches stdout and the turn completes. Text mode, no journal: the NDJSON of
/// 200 MB costs ~10 s of CPU in a debug build, the flow control is the same.
#[test]
fn flood_of_200_mb_keeps_memory_bounded() {
    const RSS_LIMIT_KIB: u64 = 96 << 10;
    let chat = Chat::start("flood", "flood.toml", Output::Drain, &[]);
    let pid = chat.pid;
    let marker = chat.marker.clone();
    let sampler = std::thread::spawn(move || {
        let (mut peak, mut samples) = (0u64, 0u32);
        let deadline = Instant::now() + chaos::RUN_TIMEOUT;
        while Instant::now() < deadline {
            let rss = rss_kib(pid);
            if rss == 0 {
                break; // gone (or a zombie)
            }
            peak = peak.max(rss);
            samples += 1;
            std::thread::sleep(Duration::from_millis(25));
        }
        (peak, samples)
    });
    let run = chat.finish();
    let (peak, samples) = sampler.join().expect("sampler");
    eprintln!(
        "flood: capfleet RSS peak {} KiB ({:.1} MiB) over {samples} samples; {} bytes out in {:?}",
        peak,
        peak as f64 / 1024.0,
        run.drained.bytes,
        run.elapsed
    );
    run.assert_success();
    assert!(samples >= 10, "too few RSS samples ({samples})");
    assert!(
        peak < RSS_LIMIT_KIB,
        "capfleet RSS peaked at {peak} KiB during a 200 MB flood"
    );
    assert!(
        run.drained.bytes >= 200_000_000,
        "only {} bytes reached stdout",
        run.drained.bytes
    );
    let tail = String::from_utf8_lossy(&run.drained.tail);
    assert!(tail.contains("flood-end."), "turn did not finish: …{tail}");
    assert!(run.stderr.contains("1 turn(s)"), "{}", run.stderr);
    assert_no_agent_left(&marker);
}

/// Ctrl-C (SIGINT to capfleet) during a 200 MB flood cancels the turn: `turn_ended`
/// cancelled within a few seconds, exit 130, no agent left.
#[test]
fn sigint_cancels_a_flooding_turn() {
    let mut chat = Chat::start("flood-int", "flood.toml", Output::Json, &[]);
    // Let the flood get going (a few MB through the pipeline).
    let mut chunks = 0;
    chat.wait_event(EVENT_WAIT, |e| {
        if cap_kind(e) == "cap.text_chunk" {
            chunks += 1;
        }
        chunks >= 200
    });
    let marker = chat.marker.clone();
    let sent = Instant::now();
    chat.signal(libc::SIGINT);
    let ended = chat.wait_event(EVENT_WAIT, |e| ty(e) == "turn_ended");
    let to_end = sent.elapsed();
    let run = chat.finish();
    let to_exit = sent.elapsed();
    eprintln!("flood cancel: turn ended {to_end:?} and capfleet exited {to_exit:?} after SIGINT");
    assert_eq!(ended["outcome"], "cancelled", "{ended}");
    assert_eq!(run.status.code(), Some(130), "{}", run.stderr);
    assert!(to_end < Duration::from_secs(4), "cancel took {to_end:?}");
    assert!(to_exit < Duration::from_secs(8), "exit took {to_exit:?}");
    let text = turn_text(&run.events, 1);
    assert!(!text.contains("flood-end."), "the flood was not cut short");
    assert_no_agent_left(&marker);
}

/// A line that is not JSON and a 2 MB line (cap 1 MiB) each give a `cap.error
/// parse_failed`, nothing panics, and the turn completes with the text around them.
#[test]
fn malformed_and_oversize_lines_are_reported_and_the_turn_completes() {
    let chat = Chat::start("malformed", "malformed.toml", Output::Json, &[]);
    let marker = chat.marker.clone();
    let run = chat.finish();
    let ev = &run.events;
    run.assert_success();
    assert!(!run.stderr.contains("panick"), "{}", run.stderr);
    let errors: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| error_code(e) == Some("parse_failed"))
        .collect();
    assert_eq!(errors.len(), 2, "{}", lines(ev));
    assert!(
        errors[0]["event"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid")),
        "{}",
        errors[0]
    );
    assert!(
        errors[1]["event"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("2000000 bytes")),
        "{}",
        errors[1]
    );
    assert_eq!(count(ev, |e| ty(e) == "restart"), 0);
    let ended = ev
        .iter()
        .find(|e| ty(e) == "turn_ended")
        .expect("turn_ended");
    assert_eq!(ended["outcome"], "completed");
    assert_eq!(turn_text(ev, 1), "before-bad-lines.after-bad-lines.");
    assert_stream_and_journal(ev, &run.journal);
    assert_no_agent_left(&marker);
}

/// SIGTERM, SIGHUP or SIGINT to capfleet mid-turn (the agent in a long sleep, or hung
/// and deaf to its input): capfleet exits with 128 + the signal, the journal is
/// complete, and no agent survives.
#[test]
fn signals_to_capfleet_mid_turn_leave_no_agent_behind() {
    let cases = [
        (libc::SIGTERM, "slow_turn.toml", 143),
        (libc::SIGTERM, "hang.toml", 143),
        (libc::SIGHUP, "slow_turn.toml", 129),
        (libc::SIGINT, "slow_turn.toml", 130),
    ];
    // Run them side by side: most of their time is waiting.
    let chats: Vec<_> = cases
        .iter()
        .map(|&(sig, script, code)| {
            let mut chat = Chat::start("signal", script, Output::Json, &[]);
            chat.wait_event(EVENT_WAIT, |e| {
                !turn_text(std::slice::from_ref(e), 1).is_empty()
            });
            assert_eq!(chat.marker.processes().len(), 1, "the agent runs");
            (sig, script, code, chat)
        })
        .collect();
    for (sig, _, _, chat) in &chats {
        chat.signal(*sig);
    }
    let sent = Instant::now();
    for (sig, script, code, chat) in chats {
        let marker = chat.marker.clone();
        let run = chat.finish();
        eprintln!(
            "signal {sig} on {script}: exit {:?} within {:?}",
            run.status.code(),
            sent.elapsed()
        );
        assert_eq!(
            run.status.code(),
            Some(code),
            "signal {sig} on {script}: {}\n{}",
            run.stderr,
            lines(&run.events)
        );
        assert_stream_and_journal(&run.events, &run.journal);
        assert_no_agent_left(&marker);
    }
}
