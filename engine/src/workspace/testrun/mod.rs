//! A session's test command, run in its workspace after its work (coding §6.3):
//! stdout and stderr as one stream, read line by line (bounded lines) into the
//! framework parsers — `cargo test`, `cargo nextest`, `pytest`, `node --test` — and
//! the last [`OUTPUT_MAX`] bytes kept as the `test_result`'s `output`. The command
//! runs in its own process group, killed at the timeout and never left behind.

mod cargo;
mod node;
mod pytest;
pub(crate) mod summary;

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{Context, WorkspaceError};
use crate::protocol::Nullable;
use crate::protocol::coding::{TestResult, TestSuite};
use capfleet_wire::process::sandbox::Sandbox;
use capfleet_wire::process::{DEFAULT_GRACE, Io, SpawnSpec};
use capfleet_wire::process::{LineItem, LineReader};
pub(crate) use summary::{Counts, Parsers, Summary};

/// Output kept in a `test_result`, at most (the spec's 64 KB).
pub(crate) const OUTPUT_MAX: usize = 64 * 1024;

/// A test command as `fleet.toml` writes it: a shell line or an argv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TestCommand {
    Shell(String),
    Argv(Vec<String>),
}

impl TestCommand {
    /// The argv that runs it with stderr joined to stdout.
    fn wrapped(&self) -> Vec<String> {
        match self {
            TestCommand::Shell(line) => {
                vec!["sh".into(), "-c".into(), format!("{{ {line}\n}} 2>&1")]
            }
            TestCommand::Argv(argv) => {
                let mut v = vec![
                    "sh".into(),
                    "-c".into(),
                    "exec \"$@\" 2>&1".into(),
                    "sh".into(),
                ];
                v.extend(argv.iter().cloned());
                v
            }
        }
    }

    /// As a person would type it.
    pub fn display(&self) -> String {
        match self {
            TestCommand::Shell(line) => line.clone(),
            TestCommand::Argv(argv) => argv.join(" "),
        }
    }
}

/// How a test command went.
#[derive(Debug, Clone)]
pub struct TestRun {
    pub result: TestResult,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
}

impl TestRun {
    /// The run failed: failed tests, a non-zero exit or a timeout.
    pub fn failed(&self) -> bool {
        self.result.failed > 0 || self.timed_out || self.exit_code != Some(0)
    }
}

/// Run `cmd` in `cwd`, up to `timeout`, inside `sandbox` when the session has one.
pub async fn run_tests(
    cmd: &TestCommand,
    cwd: &Path,
    timeout: Duration,
    label: &str,
    sandbox: Option<&Sandbox>,
) -> Result<TestRun, WorkspaceError> {
    let argv = cmd.wrapped();
    let started = Instant::now();
    let confined = match sandbox {
        Some(s) => Some(std::sync::Arc::new(
            s.confine(Path::new(&argv[0]))
                .map_err(|e| std::io::Error::other(e.to_string()))
                .ctx(
                    format!("cannot confine the test command `{}`", cmd.display()),
                    cwd,
                )?,
        )),
        None => None,
    };
    let mut group = SpawnSpec::new(&argv[0])
        .confined(confined)
        .args(&argv[1..])
        .cwd(cwd)
        .stdio(Io::Null, Io::Piped, Io::Null)
        .marked(label)
        .spawn()
        .ctx(
            format!("cannot run the test command `{}`", cmd.display()),
            cwd,
        )?;
    let stdout = group.child().stdout.take();
    let mut parsers = Parsers::default();
    let mut tail = Tail::default();
    let read = async {
        if let Some(out) = stdout {
            let mut lines = LineReader::new(out);
            while let Ok(Some(item)) = lines.next().await {
                match item {
                    LineItem::Line(bytes) | LineItem::Unterminated(bytes) => {
                        let line = String::from_utf8_lossy(&bytes);
                        parsers.line(&line);
                        tail.push(&line);
                    }
                    LineItem::Oversize { len, .. } => {
                        tail.push(&format!("[capfleet: a line of {len} bytes was dropped]"))
                    }
                }
            }
        }
        group.wait().await
    };
    let (exit_code, timed_out) = match tokio::time::timeout(timeout, read).await {
        Ok(status) => (status.ok().and_then(|s| s.code()), false),
        Err(_) => {
            let _reaped = group.kill(DEFAULT_GRACE).await;
            tail.push(&format!(
                "[capfleet: the test command ran past {} s and was killed]",
                timeout.as_secs()
            ));
            (None, true)
        }
    };
    // Whatever the command left running in its group goes with it.
    let _gone = group.kill(Duration::from_millis(200)).await;
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(TestRun {
        result: to_result(cmd, parsers.summary(), tail.text(), exit_code, wall_ms),
        exit_code,
        timed_out,
    })
}

/// The coding §6.3 payload.
pub(crate) fn to_result(
    cmd: &TestCommand,
    summary: Option<Summary>,
    output: String,
    exit_code: Option<i32>,
    wall_ms: u64,
) -> TestResult {
    let mut extra = Map::new();
    extra.insert("command".into(), Value::String(cmd.display()));
    extra.insert(
        "exit_code".into(),
        exit_code.map_or(Value::Null, Value::from),
    );
    let (framework, counts, duration, suites) = match summary {
        Some(s) => (s.framework, s.counts, s.duration_ms, s.suites),
        None => {
            // No framework recognised: the exit code is the verdict.
            let failed = u64::from(exit_code != Some(0));
            let counts = Counts {
                passed: 1 - failed,
                failed,
                skipped: 0,
            };
            ("unknown", counts, None, Vec::new())
        }
    };
    TestResult {
        framework: Nullable::Value(framework.to_owned()),
        passed: counts.passed,
        failed: counts.failed,
        skipped: Nullable::Value(counts.skipped),
        duration_ms: Nullable::Value(duration.unwrap_or(wall_ms)),
        output: Nullable::Value(output),
        suites: Nullable::Value(
            suites
                .into_iter()
                .map(|s| TestSuite {
                    name: s.name,
                    passed: s.counts.passed,
                    failed: s.counts.failed,
                    skipped: Nullable::Value(s.counts.skipped),
                    duration_ms: s.duration_ms.into(),
                    extra: Map::new(),
                })
                .collect(),
        ),
        extra,
    }
}

/// The last [`OUTPUT_MAX`] bytes of output, in whole lines.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    dropped: u64,
}

impl Tail {
    fn push(&mut self, line: &str) {
        let mut line = line.to_owned();
        if line.len() >= OUTPUT_MAX {
            let mut cut = line.len() - OUTPUT_MAX / 2;
            while !line.is_char_boundary(cut) {
                cut += 1;
            }
            self.dropped += cut as u64;
            line = line[cut..].to_owned();
        }
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.bytes > OUTPUT_MAX {
            let Some(first) = self.lines.pop_front() else {
                break;
            };
            self.bytes -= first.len() + 1;
            self.dropped += first.len() as u64 + 1;
        }
    }

    fn text(&self) -> String {
        let mut s = String::with_capacity(self.bytes + 64);
        if self.dropped > 0 {
            s.push_str(&format!("[capfleet: {} earlier bytes cut]\n", self.dropped));
        }
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_in_whole_lines() {
        let mut t = Tail::default();
        for i in 0..10_000 {
            t.push(&format!("line {i}"));
        }
        let text = t.text();
        assert!(text.len() <= OUTPUT_MAX + 64);
        assert!(text.starts_with("[capfleet: "));
        assert!(text.ends_with("line 9999\n"));
        t.push(&"y".repeat(OUTPUT_MAX * 2));
        assert!(t.text().len() <= OUTPUT_MAX + 64);
    }

    #[test]
    fn commands_join_stderr() {
        let shell = TestCommand::Shell("cargo test".into()).wrapped();
        assert_eq!(shell[2], "{ cargo test\n} 2>&1");
        let argv = TestCommand::Argv(vec!["pytest".into(), "-q".into()]).wrapped();
        assert_eq!(argv[4..], ["pytest", "-q"]);
        let toml: TestCommand = serde_json::from_value(serde_json::json!(["a", "b"])).unwrap();
        assert_eq!(toml.display(), "a b");
    }
}
