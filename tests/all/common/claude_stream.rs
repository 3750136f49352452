//! The real pinned Claude Code run directly (no capfleet in between) over stream-json:
//! `claude -p --input-format stream-json --output-format stream-json --verbose` plus
//! a test's own flags, a user message in and every frame out until that turn's
//! `result`, stdin's end to end it. Its process group is killed if the test fails
//! before it exited.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{EnvMarker, kill_group, peer, wait_until};

/// Claude Code on stream-json, its frames read on a thread of their own.
pub(crate) struct ClaudeStream {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

impl ClaudeStream {
    /// Claude Code in `cwd` with exactly the environment `env` (plus `marker`) and
    /// `flags` after the stream-json ones, in a process group of its own.
    pub(crate) fn start(
        env: Vec<(String, String)>,
        marker: &EnvMarker,
        cwd: &Path,
        flags: &[&str],
    ) -> ClaudeStream {
        let exe = peer("claude-code");
        let (mk, mv) = marker.pair();
        let mut child = Command::new(&exe)
            .args(["-p", "--input-format", "stream-json"])
            .args(["--output-format", "stream-json", "--verbose"])
            .args(flags)
            .env_clear()
            .envs(env)
            .env(mk, mv)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", exe.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("claude's stdout");
        let mut stderr = child.stderr.take().expect("claude's stderr");
        let (tx, frames) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _partial = stderr.read_to_string(&mut s);
            s
        });
        ClaudeStream {
            child,
            stdin,
            frames,
            stderr: Some(stderr),
        }
    }

    /// Say `text` as the user; every frame printed until that turn's `result` (the
    /// last), which comes `within` (else the test fails, naming the frames seen).
    pub(crate) fn turn(&mut self, text: &str, within: Duration) -> Vec<Value> {
        let user = json!({"type": "user", "message": {"role": "user", "content": text}});
        let stdin = self.stdin.as_mut().expect("claude's stdin is open");
        writeln!(stdin, "{user}")
            .and_then(|()| stdin.flush())
            .expect("write the user frame");
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.frames.recv_timeout(left).unwrap_or_else(|e| {
                panic!("no `result` frame from claude ({e}); frames so far: {seen:#?}")
            });
            let frame: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("claude printed a non-JSON line ({e}): {line}"));
            let last = frame["type"] == "result";
            seen.push(frame);
            if last {
                return seen;
            }
        }
    }

    /// Close stdin (the conversation's end) and wait, `within` at most, for Claude
    /// Code to exit: its status and stderr.
    pub(crate) fn close(mut self, within: Duration) -> (ExitStatus, String) {
        drop(self.stdin.take());
        assert!(
            wait_until(within, Duration::from_millis(20), || matches!(
                self.child.try_wait(),
                Ok(Some(_))
            )),
            "claude did not exit within {within:?} of stdin's end"
        );
        let status = self.child.wait().expect("wait claude");
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, stderr)
    }
}

impl Drop for ClaudeStream {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(self.child.id() as i32);
            let _reaped = self.child.wait();
        }
    }
}
