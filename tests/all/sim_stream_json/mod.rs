//! End-to-end tests of `capfleet sim --mode stream-json` over pipes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

mod lifecycle;

const TIMEOUT: Duration = Duration::from_secs(5);

struct Sim {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Sim {
    fn spawn(args: &[&str]) -> Sim {
        Sim::spawn_in(Path::new("."), args)
    }

    /// The sim with `cwd` as its working directory.
    fn spawn_in(cwd: &Path, args: &[&str]) -> Sim {
        let mut child = Command::new(common::BIN)
            .current_dir(cwd)
            .arg("sim")
            .args(args)
            .env_remove("CAPFLEET_SIM_SCRIPT")
            .env_remove("CAPFLEET_SIM_STATE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn capfleet sim");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Sim {
            child,
            stdin,
            lines,
        }
    }

    fn script(script: &str, extra: &[&str]) -> Sim {
        let mut args = vec!["--mode", "stream-json", "--script-inline", script];
        args.extend_from_slice(extra);
        Sim::spawn(&args)
    }

    fn send(&mut self, frame: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{frame}").expect("write frame");
        stdin.flush().expect("flush");
    }

    fn prompt(&mut self, text: &str) {
        self.send(json!({"type": "user", "message": {"role": "user", "content": text}}));
    }

    fn line(&mut self) -> String {
        self.lines
            .recv_timeout(TIMEOUT)
            .expect("a line from the sim in time")
    }

    fn frame(&mut self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line:.200}: {e}"))
    }

    /// Skips the init frame and checks it.
    fn init(&mut self) -> Value {
        let init = self.frame();
        assert_eq!(
            (init["type"].as_str(), init["subtype"].as_str()),
            (Some("system"), Some("init"))
        );
        init
    }

    /// Frames up to and including the next `result`.
    fn until_result(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        loop {
            let frame = self.frame();
            let done = frame["type"] == "result";
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }

    fn wait_exit(&mut self) -> ExitStatus {
        self.stdin = None;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "sim did not exit in time");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f["type"].as_str() {
            Some("assistant") => format!(
                "assistant/{}",
                f["message"]["content"][0]["type"].as_str().unwrap_or("?")
            ),
            Some("user") => "user/tool_result".to_string(),
            Some("stream_event") => format!("event/{}", f["event"]["type"].as_str().unwrap_or("?")),
            Some(other) => other.to_string(),
            None => "?".to_string(),
        })
        .collect()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sim")
        .join(name)
}

fn state_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capfleet-sim-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn scripted_turn_frame_sequence() {
    let path = fixture("coding_turn.toml");
    let mut sim = Sim::spawn(&[
        "--mode",
        "stream-json",
        "--script",
        path.to_str().expect("utf-8 path"),
    ]);
    let init = sim.init();
    assert_eq!(init["session_id"], "sess-fixture");
    assert_eq!(init["model"], "sim-model");
    assert!(init["tools"].as_array().is_some_and(|t| !t.is_empty()));
    sim.prompt("build it");
    let frames = sim.until_result();
    assert_eq!(
        kinds(&frames),
        [
            "assistant/text",
            "assistant/text",
            "assistant/text",
            "assistant/thinking",
            "assistant/tool_use",
            "tool_progress",
            "tool_progress",
            "user/tool_result",
            "assistant/tool_use",
            "user/tool_result",
            "assistant/text",
            "result"
        ]
    );
    let texts: Vec<&str> = frames[..3]
        .iter()
        .filter_map(|f| f["message"]["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["Hell", "o wo", "rld"]);
    assert_eq!(frames[0]["message"]["model"], "sim-model");
    assert_eq!(frames[0]["session_id"], "sess-fixture");
    assert!(
        frames[0]["message"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("msg_"))
    );
    assert_eq!(
        frames[3]["message"]["content"][0]["thinking"],
        "pondering the task"
    );
    let tool = &frames[4]["message"]["content"][0];
    assert_eq!(
        (tool["name"].as_str(), &tool["input"]),
        (Some("Bash"), &json!({"command": "ls -la"}))
    );
    let tool_id = tool["id"].clone();
    assert_eq!(frames[5]["output_chunk"], "a.txt\n");
    assert_eq!(frames[6]["output_chunk"], "b.txt\n");
    let result = &frames[7]["message"]["content"][0];
    assert_eq!(result["tool_use_id"], tool_id);
    assert_eq!(
        (result["content"].as_str(), result["is_error"].as_bool()),
        (Some("a.txt\nb.txt\n"), Some(false))
    );
    let todos = &frames[8]["message"]["content"][0];
    assert_eq!(todos["name"], "TodoWrite");
    assert_eq!(todos["input"]["todos"][0]["priority"], "high");
    assert_eq!(
        todos["input"]["todos"][1]["_meta"]["cap.depends_on"],
        json!(["p1"])
    );
    let end = &frames[11];
    assert_eq!(
        (end["subtype"].as_str(), end["is_error"].as_bool()),
        (Some("success"), Some(false))
    );
    assert_eq!(end["result"], "Hello world\nDone.");
    assert_eq!(end["total_cost_usd"], 0.0125);
    assert_eq!(
        end["usage"],
        json!({"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 7})
    );
    assert_eq!(sim.wait_exit().code(), Some(0));
}

#[test]
fn edit_steps_change_the_file_or_fail_as_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let script = r#"
        [[turn]]
        steps = [{ edit = "lib.rs", old = "fn b() {}", new = "fn b() -> u8 { 1 }" }]
        [[turn]]
        steps = [{ edit = "lib.rs", old = "fn c() {}", new = "" }]
    "#;
    let mut sim = Sim::spawn_in(
        dir.path(),
        &["--mode", "stream-json", "--script-inline", script],
    );
    sim.init();
    for (ok, output) in [
        (true, "1 hunk applied to lib.rs"),
        (false, "lib.rs: the text to replace is not in lib.rs"),
    ] {
        sim.prompt("go");
        let call = sim.frame();
        let input = &call["message"]["content"][0];
        assert_eq!(
            (input["name"].as_str(), input["input"]["file_path"].as_str()),
            (Some("Edit"), Some("lib.rs"))
        );
        let frames = sim.until_result();
        let block = &frames[0]["message"]["content"][0];
        assert_eq!(
            (block["content"].as_str(), block["is_error"].as_bool()),
            (Some(output), Some(!ok))
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lib.rs")).unwrap(),
        "fn a() {}\nfn b() -> u8 { 1 }\n",
        "the first edit changed the file, the failed one nothing"
    );
}

#[test]
fn permission_allow_and_deny() {
    let script = r#"
        [[turn]]
        steps = [{ permission = "Bash", input = { command = "make" }, risk = "high", output = "built" }]
        [[turn]]
        steps = [{ permission = "Bash", input = { command = "rm -rf /" }, risk = "high", output = "gone" }]
    "#;
    let mut sim = Sim::script(
        script,
        &["-p", "--verbose", "--permission-prompt-tool", "stdio"],
    );
    sim.init();
    for (allow, expected) in [(true, "built"), (false, "no way")] {
        sim.prompt("go");
        assert_eq!(sim.frame()["message"]["content"][0]["type"], "tool_use");
        let request = sim.frame();
        assert_eq!(request["type"], "control_request");
        assert_eq!(request["request"]["subtype"], "can_use_tool");
        assert_eq!(request["request"]["tool_name"], "Bash");
        assert_eq!(request["request"]["risk_level"], "high");
        let behaviour = if allow {
            json!({"behavior": "allow", "updatedInput": request["request"]["input"]})
        } else {
            json!({"behavior": "deny", "message": "no way"})
        };
        sim.send(json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": request["request_id"], "response": behaviour}}));
        let frames = sim.until_result();
        assert_eq!(kinds(&frames), ["user/tool_result", "result"]);
        let block = &frames[0]["message"]["content"][0];
        assert_eq!(
            (block["content"].as_str(), block["is_error"].as_bool()),
            (Some(expected), Some(!allow))
        );
        assert_eq!(
            frames[1]["permission_denials"].as_array().map(Vec::len),
            Some(usize::from(!allow))
        );
    }
}

#[test]
fn ask_user_question_round_trip() {
    let script = r#"turn = [{ steps = [{ ask = "Which DB?", options = ["pg", "sqlite"] }] }]"#;
    let mut sim = Sim::script(script, &[]);
    sim.init();
    sim.prompt("pick");
    let tool_use = sim.frame();
    assert_eq!(tool_use["message"]["content"][0]["name"], "AskUserQuestion");
    let request = sim.frame();
    let question = &request["request"]["input"]["questions"][0];
    assert_eq!(request["request"]["tool_name"], "AskUserQuestion");
    assert_eq!(question["question"], "Which DB?");
    assert_eq!(question["options"][1]["label"], "sqlite");
    sim.send(json!({"type": "control_response", "response": {"subtype": "success", "request_id": request["request_id"],
        "response": {"behavior": "allow", "updatedInput": {"answers": {"Which DB?": "sqlite"}}}}}));
    let frames = sim.until_result();
    assert_eq!(
        frames[0]["message"]["content"][0]["content"],
        "answer: sqlite"
    );
    assert_eq!(frames[1]["subtype"], "success");
}

#[test]
fn interrupt_mid_turn_then_next_prompt() {
    let script =
        r#"turn = [{ steps = [{ say = "start" }, { sleep_ms = 10000 }, { say = "never" }] }]"#;
    let mut sim = Sim::script(script, &[]);
    sim.init();
    let started = Instant::now();
    sim.prompt("long job");
    assert_eq!(sim.frame()["message"]["content"][0]["text"], "start");
    sim.send(json!({"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}}));
    let ack = sim.frame();
    assert_eq!(
        ack,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": "int-1", "response": {}}})
    );
    let result = sim.frame();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(
        (
            result["is_error"].as_bool(),
            result["interrupted"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    sim.prompt("next");
    let frames = sim.until_result();
    assert_eq!(frames[0]["message"]["content"][0]["text"], "echo: next");
    assert_eq!(frames[1]["result"], "echo: next");
}
