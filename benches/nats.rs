//! Distributed runs over NATS JetStream (issue 22), on loopback with the pinned
//! `nats-server` (tests/support/install_peers.sh nats-server) and simulator sessions:
//!
//! 1. dispatch: [`RUNS`] one-session runs queued first, then taken by 1, 2 and 3
//!    `capfleet worker`s (`--max-runs 4` each): runs completed per second, and the
//!    scaling ratio against one worker.
//! 2. takeover: a worker `SIGKILL`ed mid-run (`--lease-ttl 3`): the time from the
//!    kill to the other worker's `lease_taken` record (goal: at most the TTL + 1 s).
//! 3. journal publish overhead: one run of a session making [`LINES`] tool calls
//!    (two records each) on a worker (its journal published to JetStream as it is written) against the same
//!    fleet by `capfleet run` (local journal only): each run's span from its first
//!    record to `run_ended` (the journals' own timestamps), and their ratio.
//!
//! Run: `cargo bench --bench nats`. `CAPFLEET_BENCH_RUNS`, `CAPFLEET_BENCH_LINES`
//! change the sizes. Prints figures; asserts only that every run ended once.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capfleet_wire::clock::now_ms;
use serde_json::Value;
use support::env_or;

mod support;

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const RUNS: usize = 60;
const LINES: usize = 3000;
const TTL: u64 = 3;

/// A child whose stderr is read until a line contains `ready`; killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(mut cmd: Command, ready: &'static str) -> (Proc, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let lines = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if line.contains(ready) {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("no `{ready}`"));
    (Proc(child), line)
}

/// One JetStream node on a free port, its store in `dir`; its URL.
fn nats(dir: &Path) -> (Proc, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/install_peers.sh");
    let out = Command::new("bash")
        .arg(script)
        .args(["--path", "nats-server"])
        .output()
        .expect("install_peers.sh");
    assert!(
        out.status.success(),
        "install the peer: tests/support/install_peers.sh nats-server"
    );
    let mut cmd = Command::new(String::from_utf8_lossy(&out.stdout).trim());
    cmd.args(["-js", "-a", "127.0.0.1", "-p", "-1", "-sd"])
        .arg(dir.join("store"));
    let (p, line) = spawn(cmd, "Listening for client connections on");
    let port = line.rsplit(':').next().unwrap().trim().to_owned();
    (p, format!("nats://127.0.0.1:{port}"))
}

fn capfleet(dir: &Path) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = Command::new(EXE);
    c.current_dir(dir).env("NO_COLOR", "1");
    c
}

fn worker(dir: &Path, url: &str, extra: &[&str]) -> Proc {
    let mut c = capfleet(dir);
    c.args(["worker", "--nats", url]).args(extra);
    spawn(c, "pulling runs from").0
}

fn submit(dir: &Path, url: &str) -> String {
    let out = capfleet(dir)
        .args(["submit", "fleet.toml", "--nats", url])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The records of every journal under `dir`'s runs, by run id.
fn journals(dir: &Path) -> Vec<(String, Vec<Value>)> {
    let Ok(entries) = std::fs::read_dir(dir.join(".capfleet/runs")) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let text = std::fs::read_to_string(e.path().join("journal.jsonl")).unwrap_or_default();
            let records = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            (e.file_name().to_string_lossy().into_owned(), records)
        })
        .collect()
}

fn has(records: &[Value], kind: &str) -> bool {
    records.iter().any(|r| r["type"] == kind)
}

fn wait(limit: Duration, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < limit, "not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_fleet(dir: &Path, name: &str, sessions: &[&str], routes: &str, script: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let mut fleet = format!(
        "[fleet]\nname = \"{name}\"\nstart = [\"{}\"]\ntask = \"go\"\n",
        sessions[0]
    );
    for s in sessions {
        fleet.push_str(&format!(
            "\n[[sessions]]\nname = \"{s}\"\nagent = \"sim\"\nscript = \"script.toml\"\n"
        ));
    }
    fleet.push_str(routes);
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
    std::fs::write(dir.join("script.toml"), script).unwrap();
}

fn dispatch(root: &Path, runs: usize) {
    println!("1. dispatch: {runs} one-session runs, queued first, then taken by N workers");
    let mut base = 0.0;
    for n in 1..=3 {
        let dir = root.join(format!("dispatch-{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (_nats, url) = nats(&dir);
        let work = dir.join("work");
        write_fleet(
            &work,
            "tiny",
            &["s0"],
            "",
            "[[turn]]\nsteps = [{ say = \"hello\" }]\n",
        );
        let ids: Vec<String> = (0..runs).map(|_| submit(&work, &url)).collect();
        let t = Instant::now();
        let workers: Vec<Proc> = (0..n)
            .map(|i| worker(&dir.join(format!("w{i}")), &url, &["--max-runs", "4"]))
            .collect();
        let ended = || {
            (0..n)
                .flat_map(|i| journals(&dir.join(format!("w{i}"))))
                .filter(|(_, j)| has(j, "run_ended"))
                .count()
        };
        wait(Duration::from_secs(600), || ended() >= ids.len());
        let rate = runs as f64 / t.elapsed().as_secs_f64();
        assert_eq!(ended(), ids.len(), "a run ended twice");
        drop(workers);
        if n == 1 {
            base = rate;
        }
        println!(
            "   {n} worker(s): {rate:.1} runs/s  (x{:.2} of one worker)",
            rate / base
        );
    }
}

fn takeover(root: &Path) {
    println!(
        "2. takeover after SIGKILL (--lease-ttl {TTL}; goal <= {} s)",
        TTL + 1
    );
    let dir = root.join("takeover");
    let (_nats, url) = nats(&dir);
    let work = dir.join("work");
    let routes = "\n[[routes]]\nwhen = [\"a.done\"]\nroute_to = \"b\"\n";
    write_fleet(
        &work,
        "chain",
        &["a", "b"],
        routes,
        "[[turn]]\nsteps = [{ sleep_ms = 1500 }, { say = \"done\" }]\n",
    );
    let ttl = TTL.to_string();
    let args = ["--lease-ttl", ttl.as_str()];
    let mut a = worker(&dir.join("a"), &url, &args);
    let id = submit(&work, &url);
    // Under way as JetStream has it: the route to `b` published.
    wait(Duration::from_secs(60), || {
        let out = capfleet(&work)
            .args(["log", "--nats", &url, "--json", &id])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("\"to\":\"b\"")
    });
    let b = worker(&dir.join("b"), &url, &args);
    let _ = a.0.kill();
    let killed = now_ms();
    let _ = a.0.wait();
    let mut taken = 0;
    wait(Duration::from_secs(60), || {
        for (r, j) in journals(&dir.join("b")) {
            if let Some(t) = j.iter().find(|x| x["type"] == "lease_taken")
                && r == id
            {
                taken = t["ts_ms"].as_u64().unwrap_or(0);
            }
        }
        taken > 0
    });
    let after = taken.saturating_sub(killed) as f64 / 1e3;
    println!(
        "   taken over {after:.2} s after the kill (TTL {TTL} s: x{:.2} of TTL + 1 s)",
        after / (TTL + 1) as f64
    );
    wait(Duration::from_secs(60), || {
        journals(&dir.join("b"))
            .iter()
            .any(|(r, j)| *r == id && has(j, "run_ended"))
    });
    drop(b);
}

/// A journal's span: from its first record to `run_ended`, in ms.
fn span(j: &[Value]) -> f64 {
    let first = j
        .iter()
        .filter_map(|r| r["ts_ms"].as_u64())
        .min()
        .unwrap_or(0);
    let end = j
        .iter()
        .find(|r| r["type"] == "run_ended")
        .and_then(|r| r["ts_ms"].as_u64())
        .unwrap_or(0);
    end.saturating_sub(first) as f64
}

fn overhead(root: &Path, lines: usize) {
    println!("3. journal publish overhead: one session of {lines} tool calls (two records each)");
    let dir = root.join("overhead");
    let (_nats, url) = nats(&dir);
    // A tool step is two records (its call and its result): text would be joined.
    let steps: Vec<String> = (0..lines)
        .map(|i| format!("{{ tool = \"Read\", input = {{ path = \"f{i}\" }} }}"))
        .collect();
    let script = format!("[[turn]]\nsteps = [{}]\n", steps.join(", "));
    let local = dir.join("local");
    write_fleet(&local, "chatty", &["s0"], "", &script);
    let out = capfleet(&local)
        .args(["run", "fleet.toml", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (_, lj) = journals(&local).pop().expect("the local run");
    let work = dir.join("work");
    write_fleet(&work, "chatty", &["s0"], "", &script);
    let w = worker(&dir.join("w"), &url, &[]);
    let id = submit(&work, &url);
    wait(Duration::from_secs(300), || {
        journals(&dir.join("w"))
            .iter()
            .any(|(r, j)| *r == id && has(j, "run_ended"))
    });
    let (_, wj) = journals(&dir.join("w")).pop().expect("the worker's run");
    // The replica's lag: from the local `run_ended` until JetStream has every record.
    let mut on_stream = 0;
    wait(Duration::from_secs(60), || {
        let out = capfleet(&work)
            .args(["log", "--nats", &url, "--json", &id])
            .output()
            .unwrap();
        on_stream = String::from_utf8_lossy(&out.stdout).lines().count();
        on_stream >= wj.len()
    });
    let ended = wj
        .iter()
        .find(|r| r["type"] == "run_ended")
        .and_then(|r| r["ts_ms"].as_u64())
        .unwrap_or(0);
    let lag = now_ms().saturating_sub(ended);
    drop(w);
    let (l, p) = (span(&lj), span(&wj));
    println!(
        "   capfleet run: {l:.0} ms ({} records); worker, published: {p:.0} ms ({} records): x{:.2}",
        lj.len(),
        wj.len(),
        p / l
    );
    println!(
        "   all {on_stream} records on the stream at most {lag} ms after the run's end (polled)"
    );
}

/// The machine's load averages (1, 5, 15 min), beside every figure.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn main() {
    println!("load before: {}", load());
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = tmp.path().to_owned();
    dispatch(&root, env_or("CAPFLEET_BENCH_RUNS", RUNS));
    takeover(&root);
    overhead(&root, env_or("CAPFLEET_BENCH_LINES", LINES));
    println!("load after: {}", load());
}
