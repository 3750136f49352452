//! A real HTTP webhook receiver (`tests/support/notify_receiver.py`, Python's
//! http.server) for capfleet's notifications: it checks each signature with Python's
//! own HMAC and logs what it got; killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{support, wait_until};

/// The shared secret the tests sign with.
pub(crate) const SECRET: &str = "test-hook-secret-5b1f";

/// How the receiver answers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    Ok,
    /// 500 to the first attempt of each delivery, 200 after.
    Flaky,
    /// Never answers.
    Hang,
}

pub(crate) struct Receiver {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver {
    pub(crate) fn start(mode: Mode) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let (port_file, log) = (dir.path().join("port"), dir.path().join("log.jsonl"));
        let mode = match mode {
            Mode::Ok => "ok",
            Mode::Flaky => "flaky",
            Mode::Hang => "hang",
        };
        let child = Command::new("python3")
            .arg(support("notify_receiver.py"))
            .args([&port_file, &log])
            .arg(mode)
            .env("NOTIFY_SECRET", SECRET)
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 notify_receiver.py");
        assert!(
            wait_until(Duration::from_secs(20), Duration::from_millis(20), || {
                port_file.exists()
            }),
            "the receiver starts"
        );
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Receiver {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Every request received so far.
    pub(crate) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The requests of event `event` answered 200, once there are `n` (at most
    /// `timeout`).
    pub(crate) fn wait_for(&self, event: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let delivered = || -> Vec<Value> {
            self.received()
                .into_iter()
                .filter(|r| r["event"] == event && r["status"] == 200)
                .collect()
        };
        assert!(
            wait_until(timeout, Duration::from_millis(20), || delivered().len()
                >= n),
            "{n} `{event}` notice(s); got {:?}",
            self.received()
        );
        delivered()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
