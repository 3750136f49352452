//! The A2A binding end to end on the simulator (`capfleet sim --mode a2a`): `capfleet
//! chat` drives a manifest whose `fast_path.a2a_serve_at` names the sim's URL, in
//! both spellings — text, tool calls and usage as marked data parts, a permission
//! round trip through `input-required`, a dropped stream resumed, a card without the
//! CAP extension refused, a 401 reported as `auth_error` naming the scheme and never
//! the token, a cancel sent as `CancelTask` / `tasks/cancel`, and `resolve` showing
//! the card and the negotiated spelling; a peer that dies mid-turn is one restart and
//! the turn completes on its next incarnation.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::a2a::{chat, manifest, sim as peer};
use crate::common::{self, of_kind, texts};

const TURN: &str = r#"
[[turn]]
steps = [
  { say = "Hello from A2A", chunk = 4 },
  { tool = "Read", input = { path = "x" }, output = "contents" },
  { usage = { input_tokens = 12, output_tokens = 3 } },
]
"#;

fn drives_a_turn_in(spelling: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = peer(dir.path(), TURN, &["--spelling", spelling]);
    let m = manifest(dir.path(), &sim.url, "");
    let (events, code) = chat(dir.path(), &m, &["hi"], &[]);
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(texts(&events), "Hello from A2A");
    let start = of_kind(&events, "cap.tool_call.start");
    assert_eq!(start[0]["event"]["name"], "Read", "{events:#?}");
    assert_eq!(
        of_kind(&events, "cap.tool_call.end")[0]["event"]["output"],
        "contents"
    );
    let usage = of_kind(&events, "cap.usage");
    assert_eq!(usage[0]["event"]["input_tokens"], 12, "{events:#?}");
    let ready = of_kind(&events, "cap.session.ready");
    assert_eq!(
        ready[0]["event"]["_meta"]["capfleet.a2a"]["spelling"], spelling,
        "{ready:#?}"
    );
    let log = sim.requests();
    let method = if spelling == "1.0" {
        "SendStreamingMessage a2a-version=1.0"
    } else {
        "message/stream a2a-version=-"
    };
    assert!(log.contains(method), "{log}");
}

#[test]
fn a_turn_over_a2a_1_0() {
    drives_a_turn_in("1.0");
}

#[test]
fn a_turn_over_a2a_0_3() {
    drives_a_turn_in("0.3");
}

#[test]
fn a_permission_goes_through_input_required_and_the_answerer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = r#"
[[turn]]
steps = [{ permission = "Bash", input = { command = "ls" }, risk = "low", output = "listed" }, { say = "after" }]
"#;
    for spelling in ["1.0", "0.3"] {
        let sim = peer(dir.path(), script, &["--spelling", spelling]);
        let m = manifest(dir.path(), &sim.url, "");
        let (events, code) = chat(dir.path(), &m, &["go"], &["--allow-tool", "Bash"]);
        assert_eq!(code, Some(0), "{events:#?}");
        assert_eq!(
            of_kind(&events, "cap.permission.request")[0]["event"]["tool"],
            "Bash"
        );
        let end = of_kind(&events, "cap.tool_call.end");
        assert_eq!(
            end.first().map(|e| e["event"]["output"].clone()),
            Some(Value::from("listed")),
            "{spelling}: {events:#?}"
        );
        assert!(texts(&events).ends_with("after"), "{events:#?}");
    }
}

#[test]
fn a_dropped_stream_is_resumed_and_the_turn_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = r#"
[[turn]]
steps = [{ say = "before " }, { drop_stream = true }, { sleep_ms = 200 }, { say = "after" }]
"#;
    let sim = peer(dir.path(), script, &[]);
    let m = manifest(dir.path(), &sim.url, "");
    let (events, code) = chat(dir.path(), &m, &["go"], &[]);
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(texts(&events), "before after");
    let log = sim.requests();
    assert!(log.contains("SubscribeToTask"), "{log}");
}

#[test]
fn a_card_without_the_cap_extension_is_refused_unless_opted_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = peer(dir.path(), TURN, &["--no-cap-extension"]);
    let m = manifest(dir.path(), &sim.url, "");
    let mut c = common::sandboxed(dir.path());
    let out = c
        .arg("chat")
        .arg(&m)
        .args(["--json", "--task", "hi"])
        .output()
        .expect("chat");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("cap-protocol/v1"), "{all}");
    assert!(
        all.contains(&format!("{}.well-known/agent-card.json", sim.url)),
        "{all}"
    );
    let plain = manifest(dir.path(), &sim.url, "\n[x-a2a]\nplain = true\n");
    let (events, code) = chat(dir.path(), &plain, &["hi"], &[]);
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(texts(&events), "Hello from A2A");
    assert!(
        of_kind(&events, "cap.tool_call.start").is_empty(),
        "plain agents map text only"
    );
}

#[test]
fn a_401_is_an_auth_error_naming_the_scheme_and_never_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = "tok-SECRET-4f1c9";
    let sim = peer(dir.path(), TURN, &["--bearer-token", token]);
    let wrong = manifest(
        dir.path(),
        &sim.url,
        "\n[x-a2a]\nsecret_env = \"A2A_TEST_TOKEN\"\n",
    );
    let mut c = common::sandboxed(dir.path());
    c.env("A2A_TEST_TOKEN", "not-the-token");
    c.arg("chat")
        .arg(&wrong)
        .args(["--json", "--task", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (events, _) = common::run_chat(c, None, Duration::from_secs(60));
    let errors = of_kind(&events, "cap.error");
    let auth: Vec<_> = errors
        .iter()
        .filter(|e| e["event"]["code"] == "auth_error")
        .collect();
    assert!(!auth.is_empty(), "{events:#?}");
    let message = auth[0]["event"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("401") && message.contains("token"),
        "{message}"
    );
    assert!(message.contains("A2A_TEST_TOKEN"), "{message}");
    let mut c = common::sandboxed(dir.path());
    c.env("A2A_TEST_TOKEN", token);
    c.arg("chat")
        .arg(&wrong)
        .args(["--json", "--task", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (events, code) = common::run_chat(c, None, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{events:#?}");
    assert_eq!(texts(&events), "Hello from A2A");
    let all = serde_json::to_string(&events).expect("json");
    assert!(!all.contains(token), "the token leaked into the events");
}

#[test]
fn cancel_is_cancel_task_and_ends_the_turn_cancelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = r#"
[[turn]]
match = "slow"
steps = [{ say = "working" }, { sleep_ms = 30000 }, { say = "never" }]
"#;
    for spelling in ["1.0", "0.3"] {
        let sim = peer(dir.path(), script, &["--spelling", spelling]);
        let m = manifest(dir.path(), &sim.url, "");
        let mut c = common::sandboxed(dir.path());
        c.arg("chat")
            .arg(&m)
            .arg("--json")
            .arg("--cwd")
            .arg(dir.path());
        c.args(["--task", "slow", "--task", "echo me"]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let (events, code) = common::run_chat(
            c,
            Some(Duration::from_millis(1500)),
            Duration::from_secs(60),
        );
        let ends = common::of_type(&events, "turn_ended");
        assert_eq!(ends[0]["stop_reason"], "cancelled", "{ends:#?}");
        assert_eq!(ends[1]["stop_reason"], "end_turn", "{ends:#?}");
        let t = texts(&events);
        assert!(!t.contains("never") && t.ends_with("echo: echo me"), "{t}");
        assert_eq!(code, Some(0));
        let log = sim.requests();
        let cancel = if spelling == "1.0" {
            "CancelTask"
        } else {
            "tasks/cancel"
        };
        assert!(log.contains(cancel), "{log}");
    }
}

#[test]
fn resolve_shows_the_card_and_the_negotiated_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = peer(
        dir.path(),
        TURN,
        &["--spelling", "0.3", "--bearer-token", "tok-9"],
    );
    let m = manifest(dir.path(), &sim.url, "");
    let out = common::sandboxed(dir.path())
        .arg("resolve")
        .arg(&m)
        .arg("--json")
        .output()
        .expect("resolve");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["binding"], "a2a");
    assert_eq!(v["a2a"]["spelling"], "0.3", "{v:#}");
    assert_eq!(v["a2a"]["card"]["name"], "capfleet-sim");
    assert_eq!(v["a2a"]["card"]["skills"][0], "scripted turns");
    assert_eq!(v["a2a"]["card"]["interfaces"][0]["binding"], "JSONRPC");
    assert_eq!(v["a2a"]["card"]["schemes"][0]["kind"]["type"], "bearer");
    let text = common::sandboxed(dir.path())
        .arg("resolve")
        .arg(&m)
        .output()
        .expect("resolve");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("spelling  0.3") && text.contains("capfleet-sim"),
        "{text}"
    );
    assert!(!text.contains("tok-9"));
}

/// A sim that comes back on the same port `after` it exits (a peer restarted by its
/// own supervisor, a while later), until dropped.
struct Respawning {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Respawning {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn respawning(dir: &Path, script: &str, state: &Path, after: Duration) -> (Respawning, String) {
    let state = state.display().to_string();
    let first = peer(dir, script, &["--state-dir", &state]);
    let url = first.url.clone();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let script_path = dir.join("a2a-script.toml");
    let thread = std::thread::spawn(move || {
        let mut first = first;
        let current = &mut first.child;
        loop {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(Some(_)) = current.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = current.kill();
            let _ = current.wait();
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(after);
            let spawned = Command::new(common::BIN)
                .args([
                    "sim",
                    "--mode",
                    "a2a",
                    "--listen",
                    &addr,
                    "--state-dir",
                    &state,
                ])
                .arg("--script")
                .arg(&script_path)
                .stdout(Stdio::null())
                .spawn();
            match spawned {
                Ok(child) => *current = child,
                Err(_) => return,
            }
        }
    });
    let peer = Respawning {
        stop,
        thread: Some(thread),
    };
    (peer, url)
}

#[test]
fn a_peer_that_dies_mid_turn_is_a_restart_and_the_turn_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let script = r#"
[[turn]]
steps = [{ say = "partial " }, { crash = 3, once = true }, { say = "done" }]
"#;
    // Back only after the resubscribes (1.5 s) gave up and capfleet restarted at once,
    // finding nobody listening: that start waits for the peer (within the init timeout)
    // instead of counting a crash per try.
    let (_peer, url) = respawning(dir.path(), script, &state, Duration::from_millis(2500));
    let m = manifest(dir.path(), &url, "");
    let (events, code) = chat(dir.path(), &m, &["go"], &[]);
    assert_eq!(code, Some(0), "{events:#?}");
    let restarts = common::of_type(&events, "restarted");
    assert!(
        !restarts.is_empty()
            || !common::of_type(&events, "driver_restarted").is_empty()
            || texts(&events).contains("done"),
        "{events:#?}"
    );
    assert_eq!(common::of_type(&events, "restart").len(), 1, "{events:#?}");
    assert!(texts(&events).ends_with("done"), "{events:#?}");
}
