//! A2A peers for the binding's tests: a server process that prints its bound address
//! on its first stdout line (the simulator's `--mode a2a`, the SDK test agents under
//! tests/support/), a manifest whose `fast_path.a2a_serve_at` names it, and `capfleet
//! chat --json` driving it; and the official SDKs' clients ([`sdk_client`]) driving
//! `capfleet serve --expose`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{BIN, run_chat, sandboxed, support};

/// A serving A2A peer, killed on drop.
pub(crate) struct A2aPeer {
    pub(crate) child: Child,
    /// Its base URL, `http://ADDR/`.
    pub(crate) url: String,
    /// The sim's `--request-log` (one line per request), when it keeps one.
    pub(crate) log: Option<PathBuf>,
}

impl Drop for A2aPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl A2aPeer {
    /// Spawns `cmd` and reads the address it binds from its first stdout line.
    pub(crate) fn spawn(cmd: Command, log: Option<PathBuf>) -> A2aPeer {
        A2aPeer::spawn_until(cmd, log, |line| Some(line.trim().to_owned()))
    }

    /// Spawns `cmd` and reads its stdout until `addr` finds the address it binds in a
    /// line; the rest of its stdout is drained (a chatty peer never blocks on it).
    pub(crate) fn spawn_until(
        mut cmd: Command,
        log: Option<PathBuf>,
        addr: impl Fn(&str) -> Option<String>,
    ) -> A2aPeer {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn the A2A peer");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let found = loop {
            line.clear();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                panic!(
                    "the A2A peer exited before saying its address: {:?}",
                    child.wait()
                );
            }
            if let Some(a) = addr(&line).filter(|a| !a.is_empty()) {
                break a;
            }
        };
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        A2aPeer {
            child,
            url: format!("http://{found}/"),
            log,
        }
    }

    /// The sim's request log so far.
    pub(crate) fn requests(&self) -> String {
        let log = self.log.as_ref().expect("a peer with a request log");
        std::fs::read_to_string(log).expect("request log")
    }
}

/// `capfleet sim --mode a2a` on a loopback port playing `script`, logging requests.
pub(crate) fn sim(dir: &Path, script: &str, args: &[&str]) -> A2aPeer {
    let script_path = dir.join("a2a-script.toml");
    std::fs::write(&script_path, script).expect("script");
    let log = dir.join("requests.log");
    let mut cmd = Command::new(BIN);
    cmd.args([
        "sim",
        "--mode",
        "a2a",
        "--listen",
        "127.0.0.1:0",
        "--script",
    ])
    .arg(&script_path)
    .arg("--request-log")
    .arg(&log)
    .args(args);
    A2aPeer::spawn(cmd, Some(log))
}

/// The simulator's ACP manifest turned into a remote one: A2A at `url`, nothing else,
/// `extra` appended (an `[x-a2a]` section, say).
pub(crate) fn manifest(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let path = dir.join("a2a-agent.toml");
    let base = std::fs::read_to_string(support("sim-acp.toml")).expect("sim-acp.toml");
    let text = base
        .replace("name = \"sim-acp\"", "name = \"remote-sim\"")
        .replace("acp_stdio = true", "acp_stdio = false")
        .replace("a2a_serve_at = false", &format!("a2a_serve_at = \"{url}\""));
    assert!(text.contains(url), "the template changed: {text}");
    std::fs::write(&path, format!("{text}\n{extra}")).expect("manifest");
    path
}

/// `capfleet chat MANIFEST --json --task T...` to its end (60 s at most).
pub(crate) fn chat(
    dir: &Path,
    manifest: &Path,
    tasks: &[&str],
    extra: &[&str],
) -> (Vec<Value>, Option<i32>) {
    chat_signalled(dir, manifest, tasks, extra, None)
}

/// [`chat`], SIGINT sent after `signal_after` (a cancel of the turn in flight).
pub(crate) fn chat_signalled(
    dir: &Path,
    manifest: &Path,
    tasks: &[&str],
    extra: &[&str],
    signal_after: Option<Duration>,
) -> (Vec<Value>, Option<i32>) {
    let mut c = sandboxed(dir);
    c.arg("chat")
        .arg(manifest)
        .arg("--json")
        .arg("--cwd")
        .arg(dir);
    for t in tasks {
        c.arg("--task").arg(t);
    }
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::piped());
    run_chat(c, signal_after, Duration::from_secs(60))
}

/// An official A2A SDK's client (`tests/support/a2a_py_client.py`,
/// `a2a_js_client.mjs`): what it sends, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sdk {
    /// a2a-sdk 1.3.0 (peer `a2a-py`).
    Python,
    /// @a2a-js/sdk 1.3.0 (peer `a2a-js`).
    Js,
}

/// One run of an SDK client: the agent at `url` (its card beneath it), prompts sent
/// in one context, `input-required` answered with `answer`.
pub(crate) struct ClientRun<'a> {
    pub url: &'a str,
    pub token: Option<&'a str>,
    /// `1.0` or `0.3`: the card's interface the client keeps.
    pub spelling: &'a str,
    /// Activate the `cap-protocol/v1` extension.
    pub extension: bool,
    pub answer: &'a str,
    /// Read each task back with GetTask.
    pub get: bool,
    pub prompts: &'a [&'a str],
}

/// Run `sdk`'s client; its NDJSON lines (each stream response normalized, answers,
/// tasks read back). A client that fails fails the test, with its stderr.
pub(crate) fn sdk_client(sdk: Sdk, run: &ClientRun<'_>) -> Vec<Value> {
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = Command::new(super::peer("a2a-py"));
            c.arg(support("a2a_py_client.py"));
            c
        }
        Sdk::Js => {
            let mut c = Command::new("node");
            c.arg(support("a2a_js_client.mjs"))
                .arg(super::peer("a2a-js"));
            c
        }
    };
    cmd.args([
        "--url",
        run.url,
        "--spelling",
        run.spelling,
        "--answer",
        run.answer,
    ]);
    if let Some(t) = run.token {
        cmd.args(["--token", t]);
    }
    if run.extension {
        cmd.arg("--extension");
    }
    if run.get {
        cmd.arg("--get");
    }
    cmd.args(run.prompts).stdin(Stdio::null());
    let out = super::output_within(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the {sdk:?} A2A client failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}
