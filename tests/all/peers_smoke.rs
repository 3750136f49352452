//! Proves the interop test infrastructure (`tests/all/common`) against the real
//! pinned Claude Code 2.1.337 and the fake LLM, plus the `/proc` helpers.
//! A missing peer fails these tests (run `./tests/run.sh`, which installs it).

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::claude_stream::ClaudeStream;
use common::{
    EnvMarker, FakeLlm, claude_env, descendants, is_alive, kill_group, processes_in_group, rss_kib,
    try_peer, wait_until,
};
use serde_json::{Value, json};

use crate::common;

const POLL: Duration = Duration::from_millis(20);

/// Kills the child's process group if the test panics before reaping it.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            kill_group(self.0.id() as i32);
            let _ = self.0.wait();
        }
    }
}

#[test]
fn claude_code_one_turn_against_the_fake_llm() {
    let t0 = Instant::now();
    let fake = FakeLlm::start();
    let text = "Hello from the scripted fake LLM.";
    fake.script(json!([{ "text": text }]));
    let home = tempfile::Builder::new()
        .prefix("capfleet-claude-home.")
        .tempdir()
        .expect("temp HOME");
    let env = claude_env(&fake, home.path());
    assert!(
        env.iter()
            .any(|(k, v)| k == "ANTHROPIC_BASE_URL" && *v == fake.url()),
        "claude_env must point ANTHROPIC_BASE_URL at the fake: {env:?}"
    );
    assert!(
        home.path().join(".claude.json").is_file(),
        "seeded .claude.json"
    );
    let marker = EnvMarker::new("peers-smoke-claude");
    let (mk, mv) = marker.pair();
    let flags = ["--permission-prompt-tool", "stdio"];
    let mut claude = ClaudeStream::start(env, &marker, home.path(), &flags);
    let frames = claude.turn("Say hello.", Duration::from_secs(20));
    let seen: Vec<&str> = frames
        .iter()
        .map(|f| f["type"].as_str().unwrap_or("?"))
        .collect();
    let result = frames.last().expect("the result frame");
    assert_eq!(result["subtype"], "success", "result: {result:#}");
    assert_eq!(result["is_error"], false, "result: {result:#}");
    assert_eq!(result["result"], text, "result: {result:#}");
    assert!(seen.contains(&"assistant"), "frames: {seen:?}");

    let model_calls = fake.requests_to("/v1/messages");
    assert_eq!(model_calls.len(), 1, "model requests: {model_calls:#?}");
    assert_eq!(model_calls[0]["api"], "anthropic");
    let unknown: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r["api"] == "unknown")
        .collect();
    assert!(unknown.is_empty(), "unexpected requests: {unknown:#?}");

    // EOF when idle: claude exits 0, and nothing carrying the marker survives.
    let (status, err) = claude.close(Duration::from_secs(10));
    assert!(status.success(), "claude exited {status}; stderr:\n{err}");
    assert!(
        wait_until(Duration::from_secs(5), POLL, || marker
            .processes()
            .is_empty()),
        "processes with {mk}={mv} survived claude: {:?}",
        marker.processes()
    );
    eprintln!("claude one turn + exit: {:?}", t0.elapsed());
}

#[test]
fn process_helpers_follow_a_shell_tree() {
    let marker = EnvMarker::new("peers-smoke-sh");
    let (mk, mv) = marker.pair();
    let child = Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30"])
        .env(mk, mv)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let pid = child.id() as i32;
    let mut child = Reap(child);

    // sh may exec the last `sleep` in place of itself: 2 or 3 processes, which come up
    // one by one: the two views are compared once the tree has settled.
    let tree_now = || {
        let mut tree = descendants(pid);
        tree.push(pid);
        tree.sort_unstable();
        tree
    };
    assert!(
        wait_until(Duration::from_secs(5), POLL, || tree_now().len() >= 2
            && marker.processes() == tree_now()),
        "env marker and ppid walk disagree: ppid walk {:?}, marked {:?}",
        tree_now(),
        marker.processes()
    );
    let marked = marker.processes();
    let tree = tree_now();
    assert_eq!(processes_in_group(pid), tree, "process group = the tree");
    assert!(marked.iter().all(|&p| is_alive(p) && rss_kib(p) > 0));
    assert!(!marked.contains(&(std::process::id() as i32)));

    // Kill only the leader: the background sleep is re-parented, out of
    // `descendants`' reach, but the marker still finds it.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = child.0.wait();
    let orphans = marker.processes();
    assert!(
        !orphans.is_empty(),
        "the background sleep should survive its parent"
    );
    assert!(descendants(pid).is_empty());
    kill_group(pid);
    assert!(
        wait_until(Duration::from_secs(5), POLL, || marker
            .processes()
            .is_empty()),
        "survivors after killing the group: {:?}",
        marker.processes()
    );
}

#[test]
fn fake_llm_scripts_answers_and_logs() {
    let fake = FakeLlm::start();
    fake.script(json!([{ "text": "one" }, "two"]));
    let body =
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let call = |b: &Value| {
        let (status, text) = common::http(fake.port(), "POST", "/v1/messages", Some(b)).unwrap();
        assert_eq!(status, 200, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["content"][0]["text"].clone()
    };
    assert_eq!(call(&body), "one");
    assert_eq!(call(&body), "two");
    assert_eq!(call(&body), "ok", "empty queue → default text");
    let reqs = fake.requests_to("/v1/messages");
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["body"]["messages"][0]["content"], "hi");
    let logged = std::fs::read_to_string(fake.log_path()).unwrap();
    assert_eq!(logged.lines().count(), 3, "request log file");
    fake.reset();
    assert!(fake.requests().is_empty());

    let group = fake.pid();
    assert_eq!(processes_in_group(group), vec![group]);
    drop(fake);
    assert!(
        processes_in_group(group).is_empty(),
        "fake_llm survived Drop"
    );
}

#[test]
fn a_missing_peer_fails_with_install_advice() {
    let err = try_peer("no-such-peer").unwrap_err();
    assert!(err.contains("./tests/run.sh"), "{err}");
    assert!(err.contains("install_peers.sh no-such-peer"), "{err}");
    assert!(rss_kib(std::process::id() as i32) > 0);
    assert!(!wait_until(Duration::from_millis(50), POLL, || false));
}
