//! An A2A peer process (a server that prints its bound address on its first stdout
//! line: the simulator's `--mode a2a`, the SDK test agents under tests/support/),
//! killed on drop, and the simulator's ACP manifest turned into a remote one naming
//! it. Self-contained: the A2A and chaos benches include this file too.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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

/// `capfleet sim --mode a2a` (the binary `bin`) on a loopback port playing the script
/// at `script`, logging its requests to `log` when given, `args` appended.
pub(crate) fn sim_at(bin: &str, script: &Path, log: Option<PathBuf>, args: &[&str]) -> A2aPeer {
    let mut cmd = Command::new(bin);
    cmd.args([
        "sim",
        "--mode",
        "a2a",
        "--listen",
        "127.0.0.1:0",
        "--script",
    ])
    .arg(script);
    if let Some(log) = &log {
        cmd.arg("--request-log").arg(log);
    }
    cmd.args(args);
    A2aPeer::spawn(cmd, log)
}

/// The simulator's ACP manifest (`tests/support/sim-acp.toml`) turned into a remote
/// one: A2A at `url`, nothing else, `extra` appended (an `[x-a2a]` section, say);
/// written to `dir/a2a-agent.toml`.
pub(crate) fn manifest(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let path = dir.join("a2a-agent.toml");
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sim-acp.toml");
    let base = std::fs::read_to_string(template).expect("sim-acp.toml");
    let text = base
        .replace("name = \"sim-acp\"", "name = \"remote-sim\"")
        .replace("acp_stdio = true", "acp_stdio = false")
        .replace("a2a_serve_at = false", &format!("a2a_serve_at = \"{url}\""));
    assert!(text.contains(url), "the template changed: {text}");
    std::fs::write(&path, format!("{text}\n{extra}")).expect("manifest");
    path
}
