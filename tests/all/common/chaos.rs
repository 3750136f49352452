//! Helpers of `session_chaos` and `session_policy`: run the real `capfleet chat sim`
//! on a script from `tests/fixtures/sim/chaos/`, read its NDJSON live, wait with a
//! deadline, and check that no agent outlives it.
//!
//! Every agent carries a unique `CAPFLEET_TEST_MARKER` (`--env`), so the process
//! checks find it wherever it was re-parented. A [`Chat`] dropped while anything
//! is still running (a failed assertion) SIGKILLs capfleet and every marked agent.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::procs::{EnvMarker, stat, wait_until};

/// How long any single run may take before the test fails.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(25);

pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sim/chaos")
        .join(name)
}

/// How stdout is consumed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// `--json`: every line parsed and forwarded to [`Chat::next_event`].
    Json,
    /// Text mode: only the byte count and the last bytes are kept (floods).
    Drain,
    /// [`Output::Drain`], read only after this long: a consumer that stalls.
    Stalled(Duration),
}

/// A running `capfleet chat sim`.
pub(crate) struct Chat {
    pub child: Child,
    pub pid: i32,
    pub marker: EnvMarker,
    dir: Option<tempfile::TempDir>,
    journal: PathBuf,
    pub started: Instant,
    events: Option<mpsc::Receiver<Value>>,
    seen: Vec<Value>,
    stdout: Option<JoinHandle<Drained>>,
    stderr: Option<JoinHandle<String>>,
}

/// What a [`Output::Drain`] reader saw.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    pub bytes: u64,
    pub tail: Vec<u8>,
}

/// A finished run.
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub elapsed: Duration,
    /// Every NDJSON event of stdout, in order (`Output::Json`).
    pub events: Vec<Value>,
    pub drained: Drained,
    pub stderr: String,
    pub journal: PathBuf,
    /// Keeps the journal (and the sim's state dir) until the test is done.
    _dir: Option<tempfile::TempDir>,
}

impl Finished {
    /// capfleet exited 0 (else the test fails with its status and stderr).
    pub(crate) fn assert_success(&self) {
        assert!(
            self.status.success(),
            "exit {:?}\n{}",
            self.status,
            self.stderr
        );
    }
}

impl Chat {
    /// `capfleet chat sim --task <task> --script <fixture> --journal <tmp>/j.jsonl
    /// --env CAPFLEET_TEST_MARKER=<unique> --env CAPFLEET_SIM_STATE=<tmp>/state`, plus
    /// `--json` for [`Output::Json`] and `extra`.
    pub(crate) fn start(label: &str, script: &str, output: Output, extra: &[&str]) -> Chat {
        Chat::start_agent(label, "sim", &fixture(script), output, extra)
    }

    /// [`Chat::start`] with another agent (a registry name or a manifest path) and a
    /// script anywhere.
    pub(crate) fn start_agent(
        label: &str,
        agent: &str,
        script: &Path,
        output: Output,
        extra: &[&str],
    ) -> Chat {
        let marker = EnvMarker::new(label);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(crate::common::BIN);
        cmd.args(["chat", agent, "--task", "do the chaos task", "--script"])
            .arg(script)
            .arg("--env")
            .arg(format!("{}={}", marker.key, marker.value))
            .arg("--env")
            .arg(format!(
                "CAPFLEET_SIM_STATE={}",
                dir.path().join("state").display()
            ))
            .env("NO_COLOR", "1")
            .env_remove("CAPFLEET_SIM_SCRIPT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if output == Output::Json {
            cmd.arg("--json")
                .arg("--journal")
                .arg(dir.path().join("j.jsonl"));
        }
        // Last: an `--argv` among them takes every argument after it.
        cmd.args(extra);
        let mut child = cmd.spawn().expect("spawn capfleet");
        let pid = i32::try_from(child.id()).expect("pid");
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let stdout = std::thread::spawn(move || match output {
            Output::Json => {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    let value: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                    if tx.send(value).is_err() {
                        break;
                    }
                }
                Drained::default()
            }
            Output::Drain => drain(out),
            Output::Stalled(d) => {
                std::thread::sleep(d);
                drain(out)
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(err).read_to_string(&mut s);
            s
        });
        Chat {
            child,
            pid,
            marker,
            journal: dir.path().join("j.jsonl"),
            dir: Some(dir),
            started: Instant::now(),
            events: (output == Output::Json).then_some(rx),
            seen: Vec::new(),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    pub(crate) fn journal(&self) -> PathBuf {
        self.journal.clone()
    }

    /// The next stdout event, waiting at most `timeout` (`None`: timeout or EOF).
    pub(crate) fn next_event(&mut self, timeout: Duration) -> Option<Value> {
        let ev = self.events.as_ref()?.recv_timeout(timeout).ok()?;
        self.seen.push(ev.clone());
        Some(ev)
    }

    /// Reads events until one satisfies `pred` (returned), failing the test after
    /// `timeout`.
    pub(crate) fn wait_event(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left) {
                Some(ev) if pred(&ev) => return ev,
                Some(_) => {}
                None => panic!(
                    "no matching event within {timeout:?}; seen so far:\n{}",
                    lines(&self.seen)
                ),
            }
        }
    }

    /// Sends `sig` to capfleet itself (not to its agents).
    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: plain syscall on our own child's pid.
        unsafe { libc::kill(self.pid, sig) };
    }

    /// Waits for capfleet to exit (the test fails after [`RUN_TIMEOUT`] from its start)
    /// and collects everything it printed.
    pub(crate) fn finish(self) -> Finished {
        self.finish_within(RUN_TIMEOUT)
    }

    /// [`Chat::finish`], the test failing after `limit` from the start.
    pub(crate) fn finish_within(mut self, limit: Duration) -> Finished {
        let deadline = self.started + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "capfleet still running after {limit:?}; events so far:\n{}",
                lines(&self.seen)
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let drained = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default();
        if let Some(rx) = self.events.take() {
            self.seen.extend(rx.try_iter());
        }
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().expect("stderr reader"))
            .unwrap_or_default();
        Finished {
            status,
            elapsed,
            events: std::mem::take(&mut self.seen),
            drained,
            stderr,
            journal: self.journal(),
            _dir: self.dir.take(),
        }
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        // Only after a failure does anything remain: never leave it behind.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for pid in self.marker.processes() {
            // SAFETY: plain syscall.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

fn drain(mut out: impl Read) -> Drained {
    const TAIL: usize = 4096;
    let mut buf = vec![0u8; 256 << 10];
    let mut d = Drained::default();
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => return d,
            Ok(n) => {
                d.bytes += n as u64;
                d.tail.extend_from_slice(&buf[..n]);
                if d.tail.len() > TAIL {
                    d.tail.drain(..d.tail.len() - TAIL);
                }
            }
        }
    }
}

pub(crate) fn lines(events: &[Value]) -> String {
    events
        .iter()
        .map(Value::to_string)
        .map(|s| s.chars().take(300).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

// ---- event predicates ---------------------------------------------------------------

pub(crate) fn ty(ev: &Value) -> &str {
    ev["type"].as_str().unwrap_or("")
}

/// The CAP kind of a `type = cap` event (`cap.text_chunk`, …).
pub(crate) fn cap_kind(ev: &Value) -> &str {
    if ty(ev) == "cap" {
        ev["event"]["kind"].as_str().unwrap_or("")
    } else {
        ""
    }
}

/// The code of a `cap.error` event.
pub(crate) fn error_code(ev: &Value) -> Option<&str> {
    (cap_kind(ev) == "cap.error").then(|| ev["event"]["code"].as_str().unwrap_or(""))
}

pub(crate) fn is_ready(ev: &Value) -> bool {
    cap_kind(ev) == "cap.session.ready"
}

/// Index of the first event satisfying `pred`.
pub(crate) fn position(events: &[Value], pred: impl Fn(&Value) -> bool) -> Option<usize> {
    events.iter().position(pred)
}

pub(crate) fn count(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events.iter().filter(|e| pred(e)).count()
}

/// The assistant text of turn `turn`, joined in stream order.
pub(crate) fn turn_text(events: &[Value], turn: u64) -> String {
    events
        .iter()
        .filter(|e| cap_kind(e) == "cap.text_chunk" && e["turn"].as_u64() == Some(turn))
        .filter_map(|e| e["event"]["text"].as_str())
        .collect()
}

pub(crate) fn ts(ev: &Value) -> u64 {
    ev["ts_ms"].as_u64().expect("ts_ms")
}

// ---- whole-run checks ---------------------------------------------------------------

/// `seq` runs 1..=n without gaps, and the journal holds exactly the stdout events.
pub(crate) fn assert_stream_and_journal(events: &[Value], journal: &Path) {
    assert!(!events.is_empty(), "no events on stdout");
    for (i, ev) in events.iter().enumerate() {
        assert_eq!(
            ev["seq"].as_u64(),
            Some(i as u64 + 1),
            "seq gap at index {i}:\n{}",
            lines(events)
        );
    }
    // A joined text record (`chunks`, `last_seq`) stands for that many consecutive
    // stdout chunks: the same record but for `seq`, `ts_ms` and the text, and its
    // text exactly theirs joined.
    let journaled = crate::common::journal_records(journal);
    let mut next = 0;
    for (i, j) in journaled.iter().enumerate() {
        let n = j["chunks"].as_u64().unwrap_or(1) as usize;
        let Some(covered) = events.get(next..next + n) else {
            panic!(
                "journal record {i} stands for events past stdout's {}",
                events.len()
            );
        };
        if n == 1 {
            assert_eq!(j, &covered[0], "journal and stdout differ at record {i}");
        } else {
            let joined: String = covered
                .iter()
                .map(|e| e["event"]["text"].as_str().expect("a text chunk"))
                .collect();
            assert_eq!(
                j["event"]["text"].as_str(),
                Some(joined.as_str()),
                "record {i}"
            );
            assert_eq!(j["last_seq"], covered[n - 1]["seq"], "record {i}");
            for e in covered {
                let mut same = e.clone();
                same["seq"] = j["seq"].clone();
                same["ts_ms"] = j["ts_ms"].clone();
                same["event"]["text"] = j["event"]["text"].clone();
                same["chunks"] = j["chunks"].clone();
                same["last_seq"] = j["last_seq"].clone();
                assert_eq!(j, &same, "journal record {i} and its chunks differ");
            }
        }
        next += n;
    }
    assert_eq!(next, events.len(), "journal and stdout differ in length");
}

/// No process carrying the marker survives (waits up to 2 s for the kernel to finish
/// tearing down), and none of them is a zombie.
pub(crate) fn assert_no_agent_left(marker: &EnvMarker) {
    let gone = wait_until(Duration::from_secs(2), Duration::from_millis(20), || {
        marker.processes().is_empty()
    });
    assert!(
        gone,
        "agent processes survived capfleet: {:?}",
        marker.processes()
    );
}

/// Zombie children of `pid` (exited, never reaped by it).
pub(crate) fn zombie_children(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .filter(|s| s.ppid == pid && s.state == 'Z')
        .map(|s| s.pid)
        .collect()
}
