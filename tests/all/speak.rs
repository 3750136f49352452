//! `capfleet speak`: capfleet as a Claude-compatible stream-json agent, driven by
//! capfleet's own stream-json driver (a nested session: a permission answered two
//! levels up, the inner cost reported up, a Ctrl-C at the top reaching the bottom),
//! by the official Claude Agent SDK (TypeScript, two turns, a permission answered by its
//! `canUseTool` callback, an interrupt, the cost), stopped by SIGTERM or SIGINT with an
//! error result, 130 and no inner agent left, and ending a conversation the SDK drives
//! exactly as the real Claude Code ends it (an interrupted last turn, then stdin's end).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use common::EnvMarker;
use common::chat::{assert_no_survivor, chat, script};

use crate::common;

/// Turn 1: text, a permission for Bash, the tool, $0.25, text. Turn 2: $0.05, text,
/// then 20 s of work (cut short by the tests' interrupts).
const SCRIPT: &str = r#"
[[turn]]
steps = [{ say = "checking" }, { permission = "Bash", input = { command = "ls" } }, { tool = "Bash", input = { command = "ls" }, output = "a\nb" }, { usage = { input_tokens = 10, output_tokens = 5, cost_usd = 0.25 } }, { say = "done" }]
[[turn]]
steps = [{ usage = { input_tokens = 3, output_tokens = 2, cost_usd = 0.05 } }, { say = "started" }, { sleep_ms = 20000 }, { say = "never" }]
"#;

/// `capfleet speak --agent sim` as Claude is driven: stream-json both ways,
/// permission prompts over the control protocol.
fn speak_argv(script: &Path) -> Vec<String> {
    [
        "capfleet",
        "speak",
        "--agent",
        "sim",
        "--script",
        script.to_str().expect("utf8"),
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--permission-prompt-tool",
        "stdio",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `capfleet chat capfleet`: capfleet's own manifest from the registry (`capfleet
/// speak` over stream-json), answering with the sim (`CAPFLEET_SPEAK_AGENT`).
fn nested_chat(dir: &Path, tasks: &[&str], interrupt: Option<Duration>) -> common::chat::Run {
    let script = script(dir, SCRIPT);
    let marker = EnvMarker::new("speak-nested");
    let mut args = vec![
        "--allow-tool",
        "Bash",
        "--env",
        "CAPFLEET_SPEAK_AGENT=sim",
        "--script",
        script.to_str().expect("utf8"),
    ];
    for t in tasks {
        args.extend(["--task", t]);
    }
    let run = chat("capfleet", &args, &marker, interrupt);
    assert_no_survivor(&marker);
    run
}

#[test]
fn capfleet_drives_speak_a_permission_answered_two_levels_up_and_the_cost_comes_up() {
    let dir = tempfile::tempdir().unwrap();
    let run = nested_chat(dir.path(), &["first"], None);
    assert!(run.status.success(), "{:?}", run.events);
    assert_eq!(run.texts(), ["checking", "done"]);
    // The inner sim's permission reached the outer chat, whose allow-list answered.
    let asked = run.kinds("cap.permission.request");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["tool"], "Bash");
    let answered = run.kinds("cap.permission.response");
    assert_eq!(answered[0]["decision"], "allow_once");
    assert_eq!(answered[0]["_meta"]["capfleet.rule"], "allow_tools");
    // The tool the permission let through ran, its output came up.
    let ends = run.kinds("cap.tool_call.end");
    assert!(ends.iter().any(|e| e["output"] == "a\nb"), "{ends:?}");
    let usage = run.kinds("cap.usage");
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(usage[0]["input_tokens"], 10);
    assert_eq!(usage[0]["cost_usd_estimate"], 0.25);
    // Every frame speak wrote parsed: nothing was reported malformed.
    assert!(
        run.kinds("cap.error").is_empty(),
        "{:?}",
        run.kinds("cap.error")
    );
}

#[test]
fn ctrl_c_at_the_top_cancels_the_innermost_turn_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = nested_chat(
        dir.path(),
        &["first", "second"],
        Some(Duration::from_secs(3)),
    );
    assert_eq!(run.status.code(), Some(130), "{:?}", run.events);
    let ended: Vec<&Value> = run.session("turn_ended");
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert_eq!(ended[1]["outcome"], "cancelled");
    assert!(run.texts().contains(&"started".to_owned()));
    assert!(!run.texts().contains(&"never".to_owned()));
    // Both turns' spend came up, the interrupted one's too.
    let cost: f64 = run
        .kinds("cap.usage")
        .iter()
        .filter_map(|u| u["cost_usd_estimate"].as_f64())
        .sum();
    assert!((cost - 0.30).abs() < 1e-9, "{cost}");
}

#[test]
fn the_claude_agent_sdk_drives_speak_two_turns_a_permission_and_an_interrupt() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-sdk");
    let script = script(dir.path(), SCRIPT);
    let args = ["--agent", "sim", "--script", script.to_str().expect("utf8")];
    let cli = common::speak::cli(dir.path(), &args, &marker);
    // The permission reached the SDK's can_use_tool callback with the tool's input.
    let (got, session_id) = common::speak::drive_asking_bash(dir.path(), &cli);
    let first = got["turns"][0].as_array().unwrap();
    let texts: Vec<&Value> = first.iter().filter_map(|m| m["assistant"].get(0)).collect();
    assert!(texts.iter().any(|b| b["text"] == "checking"), "{first:?}");
    assert!(texts.iter().any(|b| b["tool_use"] == "Bash"), "{first:?}");
    assert!(
        first.iter().any(|m| m["user"][0]["tool_result"] == "a\nb"),
        "{first:?}"
    );
    let result = first.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["total_cost_usd"], 0.25);
    assert_eq!(result["usage"]["input_tokens"], 10);
    assert_eq!(result["session_id"], session_id.as_str());
    // The interrupt ended the second turn; the cost is cumulative, as Claude's.
    let second = got["turns"][1].as_array().unwrap();
    assert_eq!(second[0]["assistant"][0]["text"], "started");
    let result = second.last().unwrap();
    assert_eq!(result["is_error"], true, "{second:?}");
    assert_eq!(result["num_turns"], 2);
    let total = result["total_cost_usd"].as_f64().unwrap();
    assert!((total - 0.30).abs() < 1e-9, "{total}");
    assert_no_survivor(&marker);
}

/// `speak` on two prompts stopped by `signal` (`name`) in the second turn: 130, the
/// first turn's `result` a success, the second's an error naming the signal, no
/// inner agent left.
fn stopped_by(signal: i32, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path(), SCRIPT);
    let marker = EnvMarker::new(&format!("speak-{name}"));
    let argv = speak_argv(&script);
    let mut cmd = Command::new(common::BIN);
    cmd.args(&argv[1..])
        .args(["--allowedTools", "Bash"])
        .env("CAPFLEET_SIM_STATE", dir.path())
        .current_dir(dir.path());
    let frames =
        common::speak::signal_when_started(cmd, &["first", "second"], &marker, signal, name);
    let results: Vec<&Value> = frames.iter().filter(|f| f["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{frames:?}");
    assert_eq!(results[0]["subtype"], "success");
}

#[test]
fn sigterm_writes_an_error_result_and_leaves_no_inner_agent() {
    stopped_by(libc::SIGTERM, "SIGTERM");
}

/// A real Ctrl-C is still 130 (an upstream `interrupt` is not: see below).
#[test]
fn sigint_writes_an_error_result_and_exits_130() {
    stopped_by(libc::SIGINT, "SIGINT");
}

/// Three turns through the Agent SDK, the turn `interrupt` interrupted at its first
/// text, then stdin closed: how the conversation ends when the SDK drives the real
/// Claude Code (2.1.337, against the fake LLM) in a fresh HOME, then `speak --agent
/// sim`.
fn ends(interrupt: u32) -> (Value, Value) {
    // Claude Code: the interrupted turn streams slowly enough to be caught mid-text.
    let fake = common::FakeLlm::start();
    let slow = |text: &str| json!({"text": text.repeat(20), "delay": 0.1, "chunk": 4});
    let turns: Vec<Value> = (1..=3)
        .map(|t| {
            if t == interrupt {
                slow("started ")
            } else {
                json!({"text": format!("turn {t}")})
            }
        })
        .collect();
    fake.script(Value::Array(turns));
    let home = tempfile::tempdir().unwrap();
    let claude = common::peer("claude-code");
    let mut node = Command::new("node");
    node.env_clear()
        .envs(common::claude_env(&fake, home.path()));
    let by_claude = common::speak::drive_to_end(home.path(), &claude, interrupt, node);
    // speak: the sim says `started`, then works for 20 s, in the interrupted turn.
    let dir = tempfile::tempdir().unwrap();
    let steps: Vec<String> = (1..=3)
        .map(|t| {
            if t == interrupt {
                "[[turn]]\nsteps = [{ say = \"started\" }, { sleep_ms = 20000 }, { say = \"never\" }]\n".to_owned()
            } else {
                format!("[[turn]]\nsteps = [{{ say = \"turn {t}\" }}]\n")
            }
        })
        .collect();
    let sim = script(dir.path(), &steps.concat());
    let marker = EnvMarker::new("speak-sdk-end");
    let cli = common::speak::cli(
        dir.path(),
        &["--agent", "sim", "--script", sim.to_str().expect("utf8")],
        &marker,
    );
    let mut node = Command::new("node");
    node.env("CAPFLEET_SIM_STATE", dir.path());
    let by_speak = common::speak::drive_to_end(dir.path(), &cli, interrupt, node);
    assert_no_survivor(&marker);
    (by_claude, by_speak)
}

/// The subtypes of the `result`s a conversation got.
fn subtypes(end: &Value) -> Vec<&str> {
    let results = end["results"].as_array().expect("results");
    results
        .iter()
        .filter_map(|r| r["subtype"].as_str())
        .collect()
}

/// The Agent SDK sees `speak`'s conversations end as Claude Code's do. Measured: an
/// interrupted last turn, then stdin's end, is exit 1 (never 130: that is a signal's),
/// which the SDK reports as the turn's error result, not as a process that exited
/// with a code; a completed last turn after an interrupted one is a clean end.
#[test]
fn the_agent_sdk_sees_speak_end_as_claude_code_ends() {
    let (claude, speak) = ends(3);
    assert_eq!(
        claude["exit"],
        json!({"code": 1, "signal": null}),
        "{claude}"
    );
    assert_eq!(speak["exit"], claude["exit"], "{speak}");
    let expected = ["success", "success", "error_during_execution"];
    assert_eq!(subtypes(&claude), expected, "{claude}");
    assert_eq!(subtypes(&speak), expected, "{speak}");
    for end in [&claude, &speak] {
        let error = end["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("Claude Code returned an error result"),
            "{end}"
        );
        assert!(!error.contains("exited with code"), "{end}");
    }
    let (claude, speak) = ends(2);
    assert_eq!(
        claude["exit"],
        json!({"code": 0, "signal": null}),
        "{claude}"
    );
    assert_eq!(speak["exit"], claude["exit"], "{speak}");
    let expected = ["success", "error_during_execution", "success"];
    assert_eq!(subtypes(&claude), expected, "{claude}");
    assert_eq!(subtypes(&speak), expected, "{speak}");
    assert_eq!(
        (&claude["error"], &speak["error"]),
        (&Value::Null, &Value::Null)
    );
}

#[test]
fn a_flood_is_written_as_bounded_frames_and_its_turn_ends() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(
        dir.path(),
        "[[turn]]\nsteps = [{ flood = 1600000, chunk = 8 }]\n",
    );
    let out = Command::new(common::BIN)
        .args(["speak", "--agent", "sim", "--script"])
        .arg(&script)
        .args(["-p", "x", "--output-format", "stream-json"])
        .env("CAPFLEET_SIM_STATE", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Every line far below the 1 MiB a reader takes (capfleet's own driver included).
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 512 << 10, "a {longest}-byte line");
    let frames: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let streamed: usize = frames
        .iter()
        .filter(|f| f["type"] == "assistant")
        .filter_map(|f| f["message"]["content"][0]["text"].as_str())
        .map(str::len)
        .sum();
    assert_eq!(streamed, 1_600_000);
    let result = frames.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    let kept = result["result"].as_str().unwrap().len() as u64;
    assert_eq!(
        kept + result["result_truncated_bytes"].as_u64().unwrap(),
        1 << 20
    );
}

#[test]
fn cap_session_config_fills_what_the_flags_leave_unset() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let config = serde_json::json!({"cwd": work, "model": "sim-from-config"}).to_string();
    // `speak --agent sim -p hi <extra>` with `config`: its `system/init`, or its output.
    let speak = |config: &str, extra: &[&str]| {
        Command::new(common::BIN)
            .args([
                "speak",
                "--agent",
                "sim",
                "-p",
                "hi",
                "--output-format",
                "stream-json",
            ])
            .args(extra)
            .env("CAP_SESSION_CONFIG", config)
            .env("CAPFLEET_SIM_STATE", dir.path())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let init = |out: &std::process::Output| -> Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first = out.stdout.split(|b| *b == b'\n').next().unwrap_or_default();
        serde_json::from_slice(first).expect("the first line is a frame")
    };
    let from_config = init(&speak(&config, &[]));
    assert_eq!(from_config["subtype"], "init");
    assert_eq!(
        from_config["cwd"],
        work.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(from_config["model"], "sim-from-config");
    // A flag wins over the config.
    assert_eq!(init(&speak(&config, &["--model", "flag"]))["model"], "flag");
    // A config that is not one is an error naming the variable.
    let out = speak("{\"model\": 1}", &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CAP_SESSION_CONFIG"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Each turn of `capfleet chat capfleet` sends its `traceparent` on the user frame
/// (the shipped manifest's `fast_path.x-stream_json_traceparent`): the inner speak
/// session's turn is a child of the outer turn that asked it, all one trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_inner_turn_is_a_child_of_the_outer_turn_that_sent_it() {
    let collector = common::otel::Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = script(
        dir.path(),
        "[[turn]]\nsteps = [{ say = \"one\" }]\n[[turn]]\nsteps = [{ say = \"two\" }]\n",
    );
    let marker = EnvMarker::new("speak-trace");
    let mut cmd = common::sandboxed(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env(marker.key.as_str(), marker.value.as_str())
        .args([
            "chat",
            "capfleet",
            "--json",
            "--env",
            "CAPFLEET_SPEAK_AGENT=sim",
        ])
        .arg("--script")
        .arg(&script)
        .args(["--task", "first", "--task", "second"]);
    let out =
        tokio::task::spawn_blocking(move || common::output_within(cmd, Duration::from_secs(30)))
            .await
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_survivor(&marker);
    let t = collector.spans().await;
    let turns = t.named("turn");
    assert_eq!(turns.len(), 4, "{:#?}", t.names());
    let (inner, outer): (Vec<_>, Vec<_>) = turns
        .into_iter()
        .partition(|s| t.parent(s).is_some_and(|p| common::otel::kind(p) == "turn"));
    assert_eq!(inner.len(), 2, "{:#?}", t.names());
    // The outer turns are their session's; each asked exactly one inner turn.
    for o in &outer {
        let session = t.parent(o).expect("the outer turn's session");
        assert_eq!(common::otel::kind(session), "session", "{:#?}", t.names());
        let asked: Vec<_> = inner
            .iter()
            .filter(|i| i.parent_span_id == o.span_id)
            .collect();
        assert_eq!(asked.len(), 1, "{:#?}", t.names());
    }
    assert!(t.spans.iter().all(|s| s.trace_id == outer[0].trace_id));
}
