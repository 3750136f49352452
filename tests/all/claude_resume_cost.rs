//! A turn's cost across a restart of the real Claude Code (2.1.337) over stream-json,
//! through `capfleet chat` with the shipped manifest, against the fake LLM. Turn 1
//! answers; during turn 2 the Claude process is stopped by SIGTERM mid-answer (it exits
//! 143, keeping the session's cost for a later `--resume`, as on any orderly exit; a
//! SIGKILL loses it), capfleet starts it again with `--resume` (the same Claude
//! session) and re-issues the turn, which answers. Since 2.1.337 a resumed process's
//! first `total_cost_usd` also holds the conversation's earlier cost (turn 1's), so a
//! cost taken as the rise of that total charges turn 1 twice (measured: turn 2 charged
//! 0.094648 = 0.04728 of turn 1 + its own 0.047368): each turn's `cap.usage` must be the
//! price of its own answered model request, and the chat's costs add up to every
//! answered request's price once (the request cut by the stop was never answered, so
//! never billed).

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::codex::processes_with;
use crate::common::fake_llm::claude_cost;
use crate::common::{self, EnvMarker, FakeLlm, claude_env_on_path, kill_group, wait_until};

const POLL: Duration = Duration::from_millis(20);
/// Two turns, one of them started twice, on a loaded machine.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// The argument only Claude's own command line has (capfleet's names the agent).
const CLAUDE_ARGV_WORD: &str = "--permission-prompt-tool";

#[test]
fn a_resumed_claude_process_does_not_charge_the_earlier_turns_again() {
    let fake = FakeLlm::start();
    // The cut answer streams for ~10 s: the stop lands in the middle of it.
    let slow = "cut ".repeat(100);
    fake.script(json!([
        {"text": "First answer."},
        {"text": slow, "chunk": 4, "delay": 0.1},
        {"text": "Second answer."},
    ]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let out_dir = tempfile::tempdir().expect("output dir");
    let stdout_path = out_dir.path().join("stdout.ndjson");
    let env = claude_env_on_path(&fake, home.path(), work.path());
    let marker = EnvMarker::new("claude-resume-cost");
    let (mk, mv) = marker.pair();
    let mut child = Command::new(common::BIN)
        .args(["chat", "claude-code", "--json", "--turn-timeout-s", "60"])
        .args(["--cwd", work.path().to_str().expect("UTF-8 temp path")])
        .args(["--task", "Say something.", "--task", "And now?"])
        .env_clear()
        .envs(env)
        .env(mk, mv)
        .current_dir(work.path())
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn capfleet chat");
    let stop = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
        for pid in marker.processes() {
            kill_group(pid);
        }
    };

    // Turn 2's answer is streaming: stop Claude (not capfleet).
    let streaming = wait_until(RUN_TIMEOUT, POLL, || {
        fake.requests_to("/v1/messages").len() >= 2
    });
    if !streaming {
        stop(&mut child);
        panic!("turn 2 never reached the model: {:#?}", fake.requests());
    }
    std::thread::sleep(Duration::from_millis(500));
    let claude = processes_with(&marker, CLAUDE_ARGV_WORD);
    assert_eq!(claude.len(), 1, "one Claude process: {claude:?}");
    // SAFETY: kill(2) of a process this test's capfleet started, found by its marker.
    unsafe { libc::kill(claude[0].0, libc::SIGTERM) };

    let exited = wait_until(RUN_TIMEOUT, POLL, || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    let stdout = fs::read_to_string(&stdout_path).unwrap_or_default();
    if !exited {
        stop(&mut child);
        panic!("capfleet chat did not finish within {RUN_TIMEOUT:?}\n{stdout}");
    }
    let status = child.wait().expect("wait capfleet");
    assert!(status.success(), "capfleet chat exited {status}\n{stdout}");
    common::chat::assert_no_survivor(&marker);
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("an NDJSON line"))
        .collect();
    let cap = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["type"] == "cap" && e["event"]["kind"] == kind)
            .collect()
    };

    // The restart resumed the Claude session turn 1 made known.
    let learned: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "resume_id")
        .map(|e| &e["id"])
        .collect();
    let ready = cap("cap.session.ready");
    assert_eq!(ready.len(), 2, "a ready per process\n{stdout}");
    assert_eq!(learned.len(), 1, "Claude's session id, once\n{stdout}");
    assert_eq!(
        &ready[1]["event"]["session_id"], learned[0],
        "the same session, resumed\n{stdout}"
    );

    // Three model requests: turn 1, turn 2 cut by the stop, turn 2 again; the last
    // carries the conversation (turn 1's answer) that `--resume` restored.
    let model = fake.requests_to("/v1/messages");
    assert_eq!(model.len(), 3, "model requests: {model:#?}");
    assert_eq!(model[1]["disconnected"], true, "{:#}", model[1]);
    assert!(
        model[2]["body"]["messages"]
            .to_string()
            .contains("First answer."),
        "the resumed process sent turn 1 again: {:#}",
        model[2]["body"]
    );

    // Each turn's cost is its own answered request's price, turn 1 counted once.
    let usage = cap("cap.usage");
    assert_eq!(usage.len(), 2, "a usage per answered turn\n{stdout}");
    let cost = |u: &Value| u["event"]["cost_usd_estimate"].as_f64().expect("a cost");
    for (u, (turn, req)) in usage.iter().zip([(1, &model[0]), (2, &model[2])]) {
        assert_eq!(u["turn"], turn, "{u}");
        let own = claude_cost([req]);
        assert!(
            (cost(u) - own).abs() < 1e-9,
            "turn {turn}: cost {} != its request's {own}\n{stdout}",
            cost(u)
        );
        assert_eq!(u["event"]["input_tokens"], req["usage"]["input_tokens"]);
    }
    let total: f64 = usage.iter().map(|u| cost(u)).sum();
    let answered = claude_cost([&model[0], &model[2]]);
    assert!(
        (total - answered).abs() < 1e-9,
        "the chat's cost {total} != the answered requests' {answered}"
    );
}
