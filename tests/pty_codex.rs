//! The Codex CLI's interactive TUI (0.171.0) under the PTY driver, offline against
//! the fake LLM (`/v1/responses`). Its TUI starts a `codex app-server
//! --managed-daemon` that leaves the process group and is re-parented to pid 1: the
//! driver's sweep of marked processes must end it with the session.

mod common;

use common::EnvMarker;
use common::chat::{assert_no_survivor, chat_in};

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
    let env: Vec<String> = common::peers::peer_env("codex", fake.port(), home.path(), work.path())
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut args = vec![
        "--task",
        "say hello",
        "--cwd",
        work.path().to_str().expect("utf8"),
    ];
    for kv in &env {
        args.extend(["--env", kv.as_str()]);
    }
    args.extend(["--argv", codex.to_str().expect("utf8")]);
    let run = chat_in("codex-tui", &args, &marker);
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
