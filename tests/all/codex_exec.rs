//! The Codex CLI (0.171.0) headless under the `codex_exec` binding, offline against
//! the fake LLM (Responses API): one `codex exec --json` process per turn, the next
//! turn resuming the thread, a shell command as a tool call, usage reported per turn
//! (Codex counts it over the thread), a cancel mid-turn, a failed turn that is an
//! error and not a crash, a turn process killed mid-turn that is a restart of that
//! turn resuming the thread, and nothing left running.

use std::time::Duration;

use serde_json::{Value, json};

use common::EnvMarker;
use common::chat::Run;
use common::codex::Via;

use crate::common;

/// `capfleet chat codex --json` on `codex exec` with these tasks against `fake`;
/// SIGINT after `interrupt` if given.
fn codex_chat(fake: &common::FakeLlm, tasks: &[&str], interrupt: Option<Duration>) -> Run {
    codex_chat_marked(fake.port(), tasks, interrupt, &EnvMarker::new("codex-exec"))
}

/// [`codex_chat`] with the fake LLM's port and the agents' marker given.
fn codex_chat_marked(
    port: u16,
    tasks: &[&str],
    interrupt: Option<Duration>,
    marker: &EnvMarker,
) -> Run {
    let work = tempfile::tempdir().expect("work");
    common::codex::codex_chat(Via::Exec, port, work.path(), tasks, &[], interrupt, marker)
}

fn outcomes(run: &Run) -> Vec<&str> {
    run.session("turn_ended")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or_default())
        .collect()
}

/// What the fake LLM served, summed over its Responses requests: (input, output).
fn served(fake: &common::FakeLlm) -> (u64, u64) {
    let n = |r: &Value, k: &str| r["usage"][k].as_u64().unwrap_or(0);
    fake.requests_to("/v1/responses")
        .iter()
        .fold((0, 0), |(i, o), r| {
            (i + n(r, "input_tokens"), o + n(r, "output_tokens"))
        })
}

#[test]
fn two_turns_a_command_and_per_turn_usage() {
    let fake = common::FakeLlm::start();
    fake.script(json!([
        { "tool": { "name": "exec_command", "input": { "cmd": "echo hi from shell" } } },
        { "text": "Done: it said hi." },
        { "text": "Second turn answer." }
    ]));
    let run = codex_chat(&fake, &["run echo please", "and again"], None);
    assert!(run.status.success(), "{:?}\n{:#?}", run.status, run.events);
    assert_eq!(outcomes(&run), ["completed", "completed"]);
    assert_eq!(run.texts(), ["Done: it said hi.", "Second turn answer."]);
    let start = &run.kinds("cap.tool_call.start")[0];
    assert_eq!(start["name"], "command_execution");
    assert!(
        start["input"]["command"]
            .as_str()
            .expect("command")
            .contains("echo hi from shell")
    );
    let deltas: Vec<&str> = run
        .kinds("cap.tool_call.delta")
        .iter()
        .filter_map(|d| d["output_chunk"].as_str())
        .collect();
    assert_eq!(deltas.concat(), "hi from shell\n");
    let end = &run.kinds("cap.tool_call.end")[0];
    assert_eq!(
        (end["is_error"].as_bool(), &end["output"]["exit_code"]),
        (Some(false), &json!(0))
    );
    // The second process resumed the thread: its request carries the first turn.
    let requests = fake.requests_to("/v1/responses");
    let last = requests.last().expect("requests")["body"].to_string();
    assert!(
        last.contains("run echo please") && last.contains("and again"),
        "{last}"
    );
    // Usage per turn, whose sum is what the fake served (Codex reports running totals).
    let usage = run.kinds("cap.usage");
    assert_eq!(usage.len(), 2, "{usage:?}");
    let sum = |k: &str| {
        usage
            .iter()
            .map(|u| u[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(
        (
            sum("input_tokens") + sum("cache_read_tokens"),
            sum("output_tokens")
        ),
        served(&fake)
    );
    assert!(usage[1]["input_tokens"].as_u64() < usage[0]["input_tokens"].as_u64().map(|n| n * 2));
    // Codex names no model and reports no cost: the fake model has no price.
    for u in &usage {
        assert_eq!(
            u["_meta"]["capfleet.cost_estimated"], "unknown model",
            "{u}"
        );
    }
}

#[test]
fn a_cancel_mid_turn_ends_the_turn_cancelled() {
    let fake = common::FakeLlm::start();
    fake.script(
        json!([{ "text": "slow slow slow slow slow slow slow slow", "delay": 1.0, "chunk": 4 }]),
    );
    let run = codex_chat(&fake, &["slow please"], Some(Duration::from_secs(4)));
    assert_eq!(outcomes(&run), ["cancelled"], "{:#?}", run.events);
    assert!(run.wall < Duration::from_secs(30), "{:?}", run.wall);
    assert!(run.session("restart").is_empty(), "a cancel is no crash");
}

#[test]
fn a_failed_turn_is_an_error_not_a_crash_and_the_thread_goes_on() {
    let fake = common::FakeLlm::start();
    fake.script(json!([
        { "error": { "status": 400, "type": "invalid_request_error",
                     "message": "context length exceeded: prompt too long" } },
        { "text": "Better now." }
    ]));
    let run = codex_chat(&fake, &["too much", "try again"], None);
    assert_eq!(outcomes(&run), ["failed", "completed"], "{:#?}", run.events);
    let codes: Vec<&Value> = run.kinds("cap.error").iter().map(|e| &e["code"]).collect();
    assert!(codes.contains(&&json!("context_overflow")), "{codes:?}");
    assert!(run.session("restart").is_empty(), "{:#?}", run.events);
    assert_eq!(run.texts(), ["Better now."]);
}

/// The command lines of the marked processes that are Codex turns (`codex exec`).
fn codex_turns(marker: &EnvMarker) -> Vec<(i32, String)> {
    common::codex::processes_with(marker, " exec ")
}

/// A Codex turn process killed mid-turn (SIGKILL to its group while the fake LLM is
/// streaming its answer slowly) is a restart of that turn, not a meltdown of the
/// session: the turn is re-issued by a new `codex exec resume <thread_id>` process on
/// the same thread, and completes; the session goes on to its end.
#[test]
fn a_crashed_turn_process_restarts_the_turn_and_the_thread_resumes() {
    let fake = common::FakeLlm::start();
    fake.script(json!([
        { "text": "First answer." },
        { "text": "slow slow slow slow slow slow slow slow slow slow", "delay": 1.0, "chunk": 5 },
        { "text": "Recovered answer." }
    ]));
    let marker = EnvMarker::new("codex-crash");
    let chat_marker = marker.clone();
    let port = fake.port();
    let chat = std::thread::spawn(move || {
        codex_chat_marked(port, &["first", "second"], None, &chat_marker)
    });
    // Wait for the second turn's request to be streaming, then kill its process.
    assert!(
        common::wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
            fake.requests_to("/v1/responses").len() >= 2
        }),
        "the second turn never reached the model"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let turns = codex_turns(&marker);
    let (victim, line) = turns
        .iter()
        .find(|(_, l)| l.contains("resume"))
        .cloned()
        .unwrap_or_else(|| panic!("no resumed turn process: {turns:?}"));
    let pgid = common::procs::stat(victim).expect("stat").pgrp;
    common::procs::kill_group(pgid);
    let thread_id = line
        .split_whitespace()
        .skip_while(|w| *w != "resume")
        .nth(1)
        .expect("resume <thread_id>")
        .to_owned();
    // The restarted turn's process resumes the same thread.
    let mut restarted = None;
    common::wait_until(Duration::from_secs(60), Duration::from_millis(20), || {
        restarted = codex_turns(&marker)
            .into_iter()
            .find(|(pid, l)| *pid != victim && l.contains("resume"));
        restarted.is_some() || chat.is_finished()
    });
    let run = chat.join().expect("chat thread");
    let (_, again) = restarted.expect("a restarted turn process");
    assert!(
        again.contains(&format!("resume {thread_id}")),
        "{again} (thread {thread_id})"
    );
    assert_eq!(
        outcomes(&run),
        ["completed", "completed"],
        "{:#?}",
        run.events
    );
    assert_eq!(run.session("restart").len(), 1, "one restart, no meltdown");
    assert!(run.status.success(), "{:?}", run.status);
    assert!(
        run.texts().concat().contains("Recovered answer."),
        "{:?}",
        run.texts()
    );
    assert_eq!(fake.requests_to("/v1/responses").len(), 3);
}
