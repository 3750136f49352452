//! Real terminal agents under the PTY driver, offline against the fake LLM: aider,
//! Claude Code's TUI and the Codex CLI's TUI, each answering, its turn ends
//! detected, its text without chrome, and nothing of it left behind (Codex's TUI
//! starts a `codex app-server --managed-daemon` that leaves the process group and is
//! re-parented to pid 1: the driver's sweep of marked processes must end it).

use std::path::Path;

use common::EnvMarker;
use common::chat::{Run, assert_no_survivor, chat_in};

use crate::common;

/// `capfleet chat AGENT --json` on `tasks` in `work`, the peer `program` run with `env`
/// and the arguments of the shipped manifest's command (`--argv` replaces it whole).
fn chat_peer(
    agent: &str,
    tasks: &[&str],
    work: &Path,
    env: &[(String, String)],
    program: &Path,
    marker: &EnvMarker,
) -> Run {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = Vec::new();
    for t in tasks {
        args.extend(["--task", t]);
    }
    args.extend(["--cwd", work.to_str().expect("utf8")]);
    for kv in &env {
        args.extend(["--env", kv.as_str()]);
    }
    let shipped = common::sim::shipped(&format!("{agent}.toml"));
    args.extend(["--argv", program.to_str().expect("utf8")]);
    args.extend(shipped.startup.command[1..].iter().map(String::as_str));
    chat_in(agent, &args, marker)
}

#[test]
fn aider_two_turns_against_the_fake_llm() {
    let aider = common::peer("aider");
    let fake = common::FakeLlm::start();
    fake.script(serde_json::json!([
        { "text": "Hello from the fake model." },
        { "text": "Second answer here." }
    ]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let marker = EnvMarker::new("pty-aider");
    let base = format!("{}/v1", fake.url());
    let run = chat_in(
        "aider",
        &[
            "--task",
            "say hello",
            "--task",
            "again",
            "--cwd",
            work.path().to_str().expect("utf8"),
            "--env",
            &format!("HOME={}", home.path().display()),
            "--env",
            "LITELLM_LOCAL_MODEL_COST_MAP=True",
            "--argv",
            aider.to_str().expect("utf8"),
            "--model",
            "openai/fake-model",
            "--openai-api-base",
            &base,
            "--openai-api-key",
            "dummy",
            "--no-git",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--no-show-release-notes",
            "--no-fancy-input",
            "--no-pretty",
        ],
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:#?}", run.status, run.events);
    assert_eq!(
        run.texts(),
        ["Hello from the fake model.\n", "Second answer here.\n"],
        "text without banner, echo, token counts or prompt"
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 2);
    assert!(ended.iter().all(|e| e["outcome"] == "completed"));
    assert_no_survivor(&marker);
}

#[test]
fn claude_code_tui_two_turns_against_the_fake_llm() {
    let claude = common::peer("claude-code");
    let fake = common::FakeLlm::start();
    fake.script(serde_json::json!([
        { "text": "Hello from the fake model." },
        { "text": "Second answer." }
    ]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let marker = EnvMarker::new("pty-claude-tui");
    let env = common::claude_env_in(&fake, home.path(), work.path());
    let run = chat_peer(
        "claude-code-tui",
        &["say hello", "again"],
        work.path(),
        &env,
        &claude,
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:#?}", run.status, run.events);
    assert_eq!(
        run.texts(),
        ["Hello from the fake model.\n", "Second answer.\n"],
        "the answers only: no banner, input box, tips, spinner or echo"
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 2);
    assert!(ended.iter().all(|e| e["outcome"] == "completed"));
    assert_no_survivor(&marker);
}

#[test]
fn codex_tui_one_turn_against_the_fake_llm() {
    let codex = common::peer("codex");
    let fake = common::FakeLlm::start();
    // Codex names the thread with a side request quoting the prompt: it takes the
    // matching turn, never the answer.
    fake.script(serde_json::json!([
        { "text": "Greeting", "match": "Do not answer the request" },
        { "text": "Hello from the fake model." }
    ]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let marker = EnvMarker::new("pty-codex-tui");
    let env = common::peers::peer_env("codex", fake.port(), home.path(), work.path());
    let run = chat_peer(
        "codex-tui",
        &["say hello"],
        work.path(),
        &env,
        &codex,
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:#?}", run.status, run.events);
    assert_eq!(
        run.texts(),
        ["Hello from the fake model.\n"],
        "the answer only: no banner, composer, status rows, footer or echo"
    );
    let ended = run.session("turn_ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["outcome"], "completed");
    assert!(
        fake.requests_to("/v1/responses")
            .iter()
            .any(|r| r["body"].to_string().contains("say hello")),
        "the prompt reached the model"
    );
    assert_no_survivor(&marker);
}
