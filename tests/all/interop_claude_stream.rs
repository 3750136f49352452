//! The real Claude Code 2.1.337 end to end THROUGH capfleet: `capfleet chat` with the
//! shipped `config/agents/claude-code.toml` (stream-json fast path) against the fake
//! LLM. Turn 1 is a text, a `Bash` tool call that needs permission, and a final text;
//! turn 2 is plain text. The permission request is answered by capfleet: by its policy
//! (`--allow-tool Bash`), by a human at a terminal (`y`, chat under a PTY), or
//! fail-safe (no terminal, no policy: denied).
//! A missing peer fails these tests (run `./tests/run.sh`, which installs it).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::fake_llm::claude_cost;
use common::{EnvMarker, FakeLlm, claude_env_on_path, kill_group, wait_until};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;

const POLL: Duration = Duration::from_millis(20);
/// The whole `capfleet chat` run (two turns, one of them with two model requests).
const RUN_TIMEOUT: Duration = Duration::from_secs(12);

const TEXT_BEFORE_TOOL: &str = "I will write the file now.";
const TEXT_AFTER_TOOL: &str = "Finished with out.txt.";
const TEXT_TURN_2: &str = "Second turn: plain text only.";
const COMMAND: &str = "echo hello > out.txt";
const TASK_1: &str = "Create out.txt containing hello.";
const TASK_2: &str = "Anything else?";

/// One scenario's world: the fake LLM (scripted), HOME, workdir, env, env marker.
struct World {
    fake: FakeLlm,
    _home: tempfile::TempDir,
    work: tempfile::TempDir,
    env: Vec<(String, String)>,
    marker: EnvMarker,
    t0: Instant,
}

impl World {
    fn new(label: &str) -> World {
        let t0 = Instant::now();
        let fake = FakeLlm::start();
        fake.script(json!([
            {
                "text": TEXT_BEFORE_TOOL,
                "tool": {"name": "Bash", "input": {"command": COMMAND, "description": "Write hello to out.txt"}}
            },
            {"text": TEXT_AFTER_TOOL},
            {"text": TEXT_TURN_2},
        ]));
        let home = temp_dir("capfleet-claude-home.");
        let work = temp_dir("capfleet-claude-work.");
        // `claude` (the manifest's binary) must resolve on capfleet's PATH.
        let env = claude_env_on_path(&fake, home.path(), work.path());
        World {
            fake,
            _home: home,
            work,
            env,
            marker: EnvMarker::new(label),
            t0,
        }
    }

    fn workdir(&self) -> &Path {
        self.work.path()
    }

    /// `capfleet chat AGENT --json --cwd WORK --task T1 --task T2`.
    fn chat_args(&self, agent: &Agent) -> Vec<String> {
        let manifest = common::repo_root().join("config/agents/claude-code.toml");
        let agent = match agent {
            Agent::ManifestPath => manifest.to_str().expect("UTF-8 repo path"),
            Agent::ShippedName => "claude-code",
        };
        [
            "chat",
            agent,
            "--json",
            "--cwd",
            self.workdir().to_str().expect("UTF-8 temp path"),
            "--turn-timeout-s",
            "10",
            "--task",
            TASK_1,
            "--task",
            TASK_2,
        ]
        .map(String::from)
        .to_vec()
    }

    /// No process carrying this world's marker (capfleet, claude, its children) survives.
    fn assert_no_survivors(&self) {
        let (k, v) = self.marker.pair();
        assert!(
            wait_until(Duration::from_secs(3), POLL, || self
                .marker
                .processes()
                .is_empty()),
            "processes with {k}={v} survived capfleet's exit: {:?}",
            self.marker.processes()
        );
    }
}

/// How `capfleet chat` is told the agent.
enum Agent {
    /// `config/agents/claude-code.toml` by path.
    ManifestPath,
    /// `claude-code`: the manifest embedded in capfleet (shipped).
    ShippedName,
}

fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("temp dir")
}

fn parse_ndjson(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("non-JSON line ({e}): {l}")))
        .collect()
}

/// The CAP events (`type: "cap"`) of kind `kind`, with their session turn.
fn cap<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "cap" && e["event"]["kind"] == kind)
        .collect()
}

/// The assistant's text per message, in order, for turn `turn`.
fn texts(events: &[Value], turn: u64) -> Vec<String> {
    let mut out: Vec<(Value, String)> = Vec::new();
    for e in cap(events, "cap.text_chunk") {
        if e["turn"] != turn || e["event"]["channel"] != "assistant" {
            continue;
        }
        let id = e["event"]["message_id"].clone();
        let text = e["event"]["text"].as_str().expect("chunk text");
        match out.last_mut() {
            Some((last, acc)) if *last == id => acc.push_str(text),
            _ => out.push((id, text.to_owned())),
        }
    }
    out.into_iter().map(|(_, t)| t).collect()
}

/// What a scenario expects of the permission answer.
struct Expect {
    decision: &'static str,
    rule: &'static str,
}

/// The assertions both scenarios share; `dump` is the run's output for messages.
fn check_events(w: &World, events: &[Value], expect: &Expect, dump: &str) {
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e["type"].as_str() {
            Some("cap") => e["event"]["kind"].as_str().unwrap_or("?").to_owned(),
            other => other.unwrap_or("?").to_owned(),
        })
        .collect();
    let ctx = format!("events: {kinds:?}\n--- output ---\n{dump}");

    // Ready first.
    assert_eq!(
        events.first().map(|e| &e["event"]["kind"]),
        Some(&json!("cap.session.ready")),
        "{ctx}"
    );

    // The scripted text, verbatim, per turn.
    assert_eq!(
        texts(events, 1),
        [TEXT_BEFORE_TOOL, TEXT_AFTER_TOOL],
        "turn 1 text; {ctx}"
    );
    assert_eq!(texts(events, 2), [TEXT_TURN_2], "turn 2 text; {ctx}");

    // Tool call → permission request → answer → tool end, in that order, one each.
    let starts = cap(events, "cap.tool_call.start");
    assert_eq!(starts.len(), 1, "one tool call; {ctx}");
    let start = &starts[0]["event"];
    assert_eq!(start["name"], "Bash", "{ctx}");
    assert_eq!(start["input"]["command"], COMMAND, "{ctx}");
    assert_eq!(starts[0]["turn"], 1, "{ctx}");
    let call_id = start["call_id"].as_str().expect("call_id").to_owned();

    let reqs = cap(events, "cap.permission.request");
    assert_eq!(reqs.len(), 1, "one permission request; {ctx}");
    let req = &reqs[0]["event"];
    assert_eq!(req["tool"], "Bash", "{ctx}");
    assert_eq!(req["intent"]["command"], COMMAND, "{ctx}");
    assert_eq!(req["scope"], "execute", "{ctx}");
    assert!(
        matches!(req["risk_level"].as_str(), Some("low" | "medium" | "high")),
        "permission request carries a risk level; {ctx}"
    );
    assert_eq!(
        req["_meta"]["claude.tool_use_id"],
        call_id.as_str(),
        "{ctx}"
    );
    let req_id = req["req_id"].as_str().expect("req_id");

    let resps = cap(events, "cap.permission.response");
    assert_eq!(resps.len(), 1, "one permission response; {ctx}");
    let resp = &resps[0]["event"];
    assert_eq!(resp["req_id"], req_id, "{ctx}");
    assert_eq!(resp["decision"], expect.decision, "{ctx}");
    assert_eq!(resp["_meta"]["capfleet.rule"], expect.rule, "{ctx}");

    let ends = cap(events, "cap.tool_call.end");
    assert_eq!(ends.len(), 1, "one tool end; {ctx}");
    let end = &ends[0]["event"];
    assert_eq!(end["call_id"], call_id.as_str(), "{ctx}");
    let denied = expect.decision == "deny";
    assert_eq!(end["is_error"], denied, "tool end is_error; {ctx}");

    let seq = |e: &Value| e["seq"].as_u64().expect("seq");
    assert!(
        seq(starts[0]) < seq(reqs[0])
            && seq(reqs[0]) < seq(resps[0])
            && seq(resps[0]) < seq(ends[0]),
        "tool start < permission request < response < tool end; {ctx}"
    );

    // The fake LLM: 2 model requests in turn 1 (tool, then after the tool result), 1 in turn 2.
    let model = w.fake.requests_to("/v1/messages");
    assert_eq!(model.len(), 3, "model requests: {model:#?}");
    let tool_result = model[1]["body"]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .and_then(|c| c.iter().find(|b| b["type"] == "tool_result"))
        .cloned()
        .unwrap_or_else(|| panic!("2nd model request carries the tool result: {:#}", model[1]));
    assert_eq!(tool_result["tool_use_id"], call_id.as_str());
    assert_eq!(tool_result["is_error"], denied, "{tool_result:#}");

    // Usage per turn = the fake's deterministic usage of that turn's requests.
    let usage_of = |reqs: &[Value]| -> (u64, u64) {
        reqs.iter().fold((0, 0), |(i, o), r| {
            (
                i + r["usage"]["input_tokens"].as_u64().expect("fake usage"),
                o + r["usage"]["output_tokens"].as_u64().expect("fake usage"),
            )
        })
    };
    let usages = cap(events, "cap.usage");
    assert_eq!(usages.len(), 2, "one cap.usage per turn; {ctx}");
    for (turn, (u, reqs)) in usages.iter().zip([&model[..2], &model[2..]]).enumerate() {
        let (input, output) = usage_of(reqs);
        let ev = &u["event"];
        assert_eq!(u["turn"], turn as u64 + 1, "{ctx}");
        assert_eq!(ev["input_tokens"], input, "turn {} usage; {ctx}", turn + 1);
        assert_eq!(
            ev["output_tokens"],
            output,
            "turn {} usage; {ctx}",
            turn + 1
        );
        let cost = ev["cost_usd_estimate"].as_f64().expect("cost_usd_estimate");
        let priced = claude_cost(reqs);
        assert!(cost > 0.0, "turn {} cost; {ctx}", turn + 1);
        // Per turn, not Claude's cumulative total_cost_usd.
        assert!(
            (cost - priced).abs() < 1e-6,
            "turn {} cost {cost} != {priced} (per-turn price of its requests); {ctx}",
            turn + 1
        );
    }

    // Two turns, both completed.
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn_ended")
        .collect();
    assert_eq!(ended.len(), 2, "{ctx}");
    for e in ended {
        assert_eq!(e["outcome"], "completed", "{ctx}");
        assert_eq!(e["stop_reason"], "end_turn", "{ctx}");
    }
}

/// Runs `capfleet chat` with no terminal (stdin /dev/null, output to files) plus
/// `extra` arguments; waits for it to exit 0 and checks nothing of it survives.
/// Returns the NDJSON events and a dump of stdout + stderr for messages.
fn run_without_terminal(w: &World, agent: &Agent, extra: &[&str]) -> (Vec<Value>, String) {
    let (mk, mv) = w.marker.pair();
    let out_dir = temp_dir("capfleet-chat-out.");
    let stdout_path = out_dir.path().join("stdout.ndjson");
    let stderr_path = out_dir.path().join("stderr.txt");
    let mut child = Command::new(common::BIN)
        .args(w.chat_args(agent))
        .args(extra)
        .env_clear()
        .envs(w.env.iter().cloned())
        .env(mk, mv)
        .current_dir(w.workdir())
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("spawn capfleet chat");
    let exited = wait_until(RUN_TIMEOUT, POLL, || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    let dump = || {
        format!(
            "{}\n--- stderr ---\n{}",
            fs::read_to_string(&stdout_path).unwrap_or_default(),
            fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    };
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        for pid in w.marker.processes() {
            kill_group(pid);
        }
        panic!(
            "capfleet chat did not finish within {RUN_TIMEOUT:?}\n{}",
            dump()
        );
    }
    let status = child.wait().expect("wait capfleet");
    assert!(
        status.success(),
        "capfleet chat exited {status}\n{}",
        dump()
    );
    w.assert_no_survivors();
    let stdout = fs::read_to_string(&stdout_path).expect("stdout");
    (parse_ndjson(&stdout), dump())
}

/// (b) No terminal and no policy: capfleet denies fail-safe; the tool never runs.
#[test]
fn claude_bash_denied_fail_safe_without_a_terminal() {
    let w = World::new("interop-claude-deny");
    let (events, dump) = run_without_terminal(&w, &Agent::ManifestPath, &[]);
    let elapsed = w.t0.elapsed();
    check_events(
        &w,
        &events,
        &Expect {
            decision: "deny",
            rule: "no_human_fail_safe",
        },
        &dump,
    );
    assert!(
        !w.workdir().join("out.txt").exists(),
        "a denied Bash call must not run\n{dump}"
    );
    eprintln!("claude via capfleet, denied fail-safe, 2 turns: {elapsed:?}");
}

/// (a) No terminal, `--allow-tool Bash`: capfleet's policy allows the call without a
/// human; the tool runs and writes out.txt. The agent is named, not a path: the
/// shipped (embedded) manifest.
#[test]
fn claude_bash_allowed_by_the_allow_tool_policy() {
    let w = World::new("interop-claude-policy");
    let (events, dump) = run_without_terminal(&w, &Agent::ShippedName, &["--allow-tool", "Bash"]);
    let elapsed = w.t0.elapsed();
    check_events(
        &w,
        &events,
        &Expect {
            decision: "allow_once",
            rule: "allow_tools",
        },
        &dump,
    );
    let written = fs::read_to_string(w.workdir().join("out.txt"))
        .unwrap_or_else(|e| panic!("the allowed Bash call writes out.txt ({e})\n{dump}"));
    assert_eq!(written, "hello\n");
    eprintln!("claude via capfleet, allowed by --allow-tool, 2 turns: {elapsed:?}");
}

/// (a') chat on a terminal: the human answers `y` at capfleet's permission prompt;
/// the tool runs and writes out.txt.
#[tokio::test(flavor = "current_thread")]
async fn claude_bash_allowed_by_the_human_at_the_terminal() {
    let w = World::new("interop-claude-allow");
    let (mk, mv) = w.marker.pair();
    let out_dir = temp_dir("capfleet-chat-out.");
    let stdout_path = out_dir.path().join("stdout.ndjson");
    let (mut pty, pts) = pty_process::open().expect("open pty");
    pty.resize(pty_process::Size::new(40, 160)).expect("resize");
    // stdin and stderr on the terminal (prompts, answers); the NDJSON to a file.
    let mut child = pty_process::Command::new(common::BIN)
        .args(w.chat_args(&Agent::ManifestPath))
        .env_clear()
        .envs(w.env.iter().cloned())
        .env("TERM", "xterm-256color")
        .env(mk, mv)
        .current_dir(w.workdir())
        .stdout(fs::File::create(&stdout_path).expect("stdout file"))
        .kill_on_drop(true)
        .spawn(pts)
        .expect("spawn capfleet chat on a pty");

    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let mut screen = Vec::new();
    let mut answered = false;
    let mut buf = [0u8; 4096];
    let status = loop {
        let dump = |screen: &[u8]| {
            format!(
                "--- stdout ---\n{}\n--- terminal ---\n{}",
                fs::read_to_string(&stdout_path).unwrap_or_default(),
                String::from_utf8_lossy(screen)
            )
        };
        if tokio::time::Instant::now() >= deadline {
            let _ = child.start_kill();
            let _ = child.wait().await;
            for pid in w.marker.processes() {
                kill_group(pid);
            }
            panic!(
                "capfleet chat did not finish within {RUN_TIMEOUT:?} (answered: {answered})\n{}",
                dump(&screen)
            );
        }
        tokio::select! {
            status = child.wait() => break status.expect("wait capfleet"),
            read = tokio::time::timeout(Duration::from_millis(100), pty.read(&mut buf)) => {
                match read {
                    Ok(Ok(n)) if n > 0 => screen.extend_from_slice(&buf[..n]),
                    // EIO once the child side is closed: keep waiting for the exit.
                    Ok(_) => tokio::time::sleep(POLL).await,
                    Err(_) => {}
                }
            }
        }
        if !answered && String::from_utf8_lossy(&screen).contains("allow? [y]es") {
            pty.write_all(b"y\r").await.expect("answer y");
            pty.flush().await.expect("flush pty");
            answered = true;
        }
    };
    let elapsed = w.t0.elapsed();
    let terminal = String::from_utf8_lossy(&screen).into_owned();
    let stdout = fs::read_to_string(&stdout_path).expect("stdout");
    let dump = format!("{stdout}\n--- terminal ---\n{terminal}");
    assert!(answered, "capfleet never asked at the terminal\n{dump}");
    assert!(
        terminal.contains("permission") && terminal.contains("Bash"),
        "the prompt names the tool\n{dump}"
    );
    assert!(status.success(), "capfleet chat exited {status}\n{dump}");
    w.assert_no_survivors();

    let events = parse_ndjson(&stdout);
    check_events(
        &w,
        &events,
        &Expect {
            decision: "allow_once",
            rule: "human",
        },
        &dump,
    );
    let written = fs::read_to_string(w.workdir().join("out.txt"))
        .unwrap_or_else(|e| panic!("the allowed Bash call writes out.txt ({e})\n{dump}"));
    assert_eq!(written, "hello\n");
    eprintln!("claude via capfleet, allowed at the terminal, 2 turns: {elapsed:?}");
}
