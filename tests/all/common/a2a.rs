//! A2A peers for the binding's tests: the simulator's `--mode a2a` playing a script
//! (an [`A2aPeer`]; it and the manifest naming it are [`a2a_peer`](super::a2a_peer)'s),
//! `capfleet chat --json` driving it; and the official SDKs' clients ([`sdk_client`],
//! the Python one's checks of A2A 1.0's rules [`sdk_conformance`]) driving
//! `capfleet serve --expose`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{BIN, run_chat, sandboxed, support};

pub(crate) use super::a2a_peer::{A2aPeer, manifest};

/// `capfleet sim --mode a2a` on a loopback port playing `script`, logging requests.
pub(crate) fn sim(dir: &Path, script: &str, args: &[&str]) -> A2aPeer {
    let script_path = dir.join("a2a-script.toml");
    std::fs::write(&script_path, script).expect("script");
    super::a2a_peer::sim_at(BIN, &script_path, Some(dir.join("requests.log")), args)
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
    let mut c = chat_command(dir, manifest, tasks, extra);
    c.stderr(Stdio::piped());
    run_chat(c, signal_after, Duration::from_secs(60))
}

/// The command [`chat`] runs (stdout piped; stderr left to the caller).
pub(crate) fn chat_command(dir: &Path, manifest: &Path, tasks: &[&str], extra: &[&str]) -> Command {
    let mut c = sandboxed(dir);
    c.arg("chat")
        .arg(manifest)
        .arg("--json")
        .arg("--cwd")
        .arg(dir);
    for t in tasks {
        c.arg("--task").arg(t);
    }
    c.args(extra).stdout(Stdio::piped());
    c
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
    let mut cmd = sdk_command(sdk, run.url, run.token);
    cmd.args(["--spelling", run.spelling, "--answer", run.answer]);
    if run.extension {
        cmd.arg("--extension");
    }
    if run.get {
        cmd.arg("--get");
    }
    cmd.args(run.prompts);
    ndjson(sdk, cmd)
}

/// The Python SDK's client in `--conformance` mode against the plain A2A agent at
/// `url`: one line per check of A2A 1.0's rules, `{"check": NAME, ...}`.
pub(crate) fn sdk_conformance(url: &str, token: &str) -> Vec<Value> {
    let mut cmd = sdk_command(Sdk::Python, url, Some(token));
    cmd.arg("--conformance");
    ndjson(Sdk::Python, cmd)
}

/// `sdk`'s client script, for the agent at `url`.
fn sdk_command(sdk: Sdk, url: &str, token: Option<&str>) -> Command {
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
    cmd.args(["--url", url]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd
}

/// `cmd` (an SDK client) run to its end; its NDJSON lines. A client that fails fails
/// the test, with its stderr.
fn ndjson(sdk: Sdk, mut cmd: Command) -> Vec<Value> {
    cmd.stdin(Stdio::null());
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
