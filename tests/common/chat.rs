//! `capfleet chat --json` as a test driver: runs a chat to the end and collects the
//! events it printed (the PTY driver's end-to-end tests).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{EnvMarker, wait_until};

/// What one `capfleet chat --json` run printed.
pub struct Run {
    pub events: Vec<Value>,
    pub status: ExitStatus,
    pub wall: Duration,
}

impl Run {
    /// The CAP events of the run, in order.
    pub fn cap(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "cap")
            .map(|e| &e["event"])
            .collect()
    }

    pub fn kinds(&self, kind: &str) -> Vec<&Value> {
        self.cap()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    pub fn texts(&self) -> Vec<String> {
        self.kinds("cap.text_chunk")
            .iter()
            .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub fn session(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == ty).collect()
    }
}

pub fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("script.toml");
    std::fs::write(&path, body).expect("write script");
    path
}

/// `chat` without an interrupt.
pub fn chat_in(agent: &str, args: &[&str], marker: &EnvMarker) -> Run {
    chat(agent, args, marker, None)
}

/// Run `capfleet chat <agent> --json <args>`, optionally sending SIGINT after `interrupt`.
pub fn chat(agent: &str, args: &[&str], marker: &EnvMarker, interrupt: Option<Duration>) -> Run {
    chat_reading(agent, args, marker, interrupt, None)
}

/// [`chat`] with `stdin` piped in (the task, when no `--task` is given).
pub fn chat_reading(
    agent: &str,
    args: &[&str],
    marker: &EnvMarker,
    interrupt: Option<Duration>,
    stdin: Option<String>,
) -> Run {
    let state = tempfile::tempdir().expect("state dir");
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_capfleet"))
        .args(["chat", agent, "--json"])
        .args(args)
        .env("CAPFLEET_SIM_STATE", state.path())
        .env(marker.key.as_str(), marker.value.as_str())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn capfleet chat");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let pid = i32::try_from(child.id()).expect("pid");
    if let Some(after) = interrupt {
        std::thread::spawn(move || {
            std::thread::sleep(after);
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(pid, libc::SIGINT) };
        });
    }
    let stdout = child.stdout.take().expect("stdout");
    let events = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let status = child.wait().expect("wait chat");
    Run {
        events,
        status,
        wall: t0.elapsed(),
    }
}

pub fn assert_no_survivor(marker: &EnvMarker) {
    assert!(
        wait_until(Duration::from_secs(5), Duration::from_millis(50), || marker
            .processes()
            .is_empty()),
        "processes survived: {:?}",
        marker.processes()
    );
}
