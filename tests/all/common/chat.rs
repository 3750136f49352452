//! `capfleet chat --json` as a test driver: runs a chat to the end and collects the
//! events it printed (the PTY driver's end-to-end tests).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::chat_json::run_chat_with;
use super::{EnvMarker, wait_until};

/// The longest a test chat may run before it is killed and the test fails.
const CHAT_LIMIT: Duration = Duration::from_secs(120);

/// What one `capfleet chat --json` run printed.
pub(crate) struct Run {
    pub events: Vec<Value>,
    pub status: ExitStatus,
    pub wall: Duration,
}

impl Run {
    /// The CAP events of the run, in order.
    pub(crate) fn cap(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "cap")
            .map(|e| &e["event"])
            .collect()
    }

    pub(crate) fn kinds(&self, kind: &str) -> Vec<&Value> {
        self.cap()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    pub(crate) fn texts(&self) -> Vec<String> {
        self.kinds("cap.text_chunk")
            .iter()
            .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub(crate) fn session(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == ty).collect()
    }
}

pub(crate) fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("script.toml");
    std::fs::write(&path, body).expect("write script");
    path
}

/// `chat` without an interrupt.
pub(crate) fn chat_in(agent: &str, args: &[&str], marker: &EnvMarker) -> Run {
    chat(agent, args, marker, None)
}

/// Run `capfleet chat <agent> --json <args>`, optionally sending SIGINT after `interrupt`.
pub(crate) fn chat(
    agent: &str,
    args: &[&str],
    marker: &EnvMarker,
    interrupt: Option<Duration>,
) -> Run {
    chat_reading(agent, args, marker, interrupt, None)
}

/// [`chat`] with `stdin` piped in (the task, when no `--task` is given).
pub(crate) fn chat_reading(
    agent: &str,
    args: &[&str],
    marker: &EnvMarker,
    interrupt: Option<Duration>,
    stdin: Option<String>,
) -> Run {
    let state = tempfile::tempdir().expect("state dir");
    let t0 = Instant::now();
    let mut cmd = Command::new(super::BIN);
    cmd.args(["chat", agent, "--json"])
        .args(args)
        .env("CAPFLEET_SIM_STATE", state.path())
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let (events, status) = run_chat_with(cmd, interrupt, stdin, CHAT_LIMIT);
    Run {
        events,
        status,
        wall: t0.elapsed(),
    }
}

pub(crate) fn assert_no_survivor(marker: &EnvMarker) {
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || marker
            .processes()
            .is_empty()),
        "processes survived: {:?}",
        marker.processes()
    );
}
