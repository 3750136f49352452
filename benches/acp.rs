//! ACP figures, each against a baseline measured in the same run:
//!
//! 1. ACP round trips per second: prompt -> echo -> end, sequential turns to
//!    `capfleet sim --mode acp` through the real ACP driver and session actors
//!    (`Orchestrator::start` + `spawn_session`, `SessionMsg::Ask`); against a bare
//!    JSON-RPC client in this process writing `session/prompt` lines to the same sim
//!    and reading to the response (the sim's own cost);
//! 2. fs.read throughput of a 100 MB workspace: `cap.fs.list` of the workspace, then
//!    `cap.fs.read` of every file it lists through `Rpc::call` (scope check, UTF-8
//!    read, JSON result); against `std::fs::read_to_string` of the same files.
//!
//! Run: `cargo bench --bench acp`. Prints figures; asserts nothing about time.
//! `CAPFLEET_BENCH_PARTS=1` or `=2` runs one part; `CAPFLEET_BENCH_TURNS` changes
//! the turn count of part 1.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_engine::manifest::{CodingCaps, FsCaps, FsScope, Manifest, ToolPermission};
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::{SessionMsg, SessionSpec};
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::registry::Binding;
use capfleet_wire::rpc::{Approver, CommandApproval, Rpc, TermConfig};
use serde_json::{Value, json};

#[allow(dead_code)]
#[path = "support/figures.rs"]
mod figures;

use figures::fastest_of;

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const MANIFEST: &str = include_str!("../tests/support/sim-acp.toml");
const TURNS: usize = 2000;
const WORKSPACE_MB: usize = 100;
const FILE_KB: usize = 1024;

fn main() {
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2".into());
    let turns = std::env::var("CAPFLEET_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(TURNS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("capfleet ACP bench (2 tokio workers, as `capfleet chat`)");
    if parts.contains('1') {
        round_trips(&runtime, turns);
    }
    if parts.contains('2') {
        fs_read(&runtime);
    }
}

// ---- 1. round trips ----------------------------------------------------------------

fn round_trips(rt: &tokio::runtime::Runtime, turns: usize) {
    let bare = bare_round_trips(turns);
    let driven = rt.block_on(session_round_trips(turns));
    let rate = |d: Duration| turns as f64 / d.as_secs_f64();
    println!("\n1. ACP round trips (prompt -> echo -> end), {turns} sequential turns");
    println!(
        "   baseline bare JSON-RPC client -> sim   {:>8.0} round trips/s ({:.3} s, {:.0} us each)",
        rate(bare),
        bare.as_secs_f64(),
        bare.as_secs_f64() * 1e6 / turns as f64
    );
    println!(
        "   ACP driver + session actors -> sim      {:>8.0} round trips/s ({:.3} s, {:.0} us each)  {:>5.1}% of bare",
        rate(driven),
        driven.as_secs_f64(),
        driven.as_secs_f64() * 1e6 / turns as f64,
        100.0 * bare.as_secs_f64() / driven.as_secs_f64()
    );
}

/// The sim driven by hand: one line out, lines in until the prompt's response.
fn bare_round_trips(turns: usize) -> Duration {
    let mut sim = Command::new(EXE)
        .args(["sim", "--mode", "acp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sim");
    let mut input = sim.stdin.take().expect("stdin");
    let mut output = BufReader::new(sim.stdout.take().expect("stdout"));
    let mut line = String::new();
    let mut call = |id: usize, method: &str, params: Value| {
        let req = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(input, "{req}").expect("write");
        loop {
            line.clear();
            assert!(output.read_line(&mut line).expect("read") > 0, "sim ended");
            let v: Value = serde_json::from_str(&line).expect("json");
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
        }
    };
    call(0, "initialize", json!({ "protocolVersion": 1 }));
    let sid =
        call(1, "session/new", json!({ "cwd": "/", "mcpServers": [] }))["result"]["sessionId"]
            .clone();
    let t0 = Instant::now();
    for i in 0..turns {
        let prompt = json!({ "sessionId": sid, "prompt": [{ "type": "text", "text": "hi" }] });
        let r = call(i + 2, "session/prompt", prompt);
        assert_eq!(r["result"]["stopReason"], "end_turn");
    }
    let took = t0.elapsed();
    let _ = sim.kill();
    let _ = sim.wait();
    took
}

async fn session_round_trips(turns: usize) -> Duration {
    let orchestrator = Orchestrator::start(RootArgs::new("bench"))
        .await
        .expect("tree starts");
    let manifest = Manifest::parse(MANIFEST, "tests/support/sim-acp.toml")
        .expect("sim-acp manifest")
        .manifest;
    let cwd = std::env::current_dir().expect("cwd").display().to_string();
    let mut launch = LaunchSpec::new(
        "cap://bench/acp",
        Arc::new(manifest),
        SessionConfig::new(cwd),
    );
    launch.argv = Some(vec![
        EXE.into(),
        "sim".into(),
        "--mode".into(),
        "acp".into(),
    ]);
    let spec = SessionSpec::new("acp", launch, Binding::AcpStdio);
    let session = orchestrator
        .spawn_session(spec, vec![])
        .await
        .expect("session spawns");
    let ask = || async {
        ractor::call!(session, |reply| SessionMsg::Ask {
            prompt: "hi".into(),
            traceparent: None,
            reply
        })
        .expect("ask call")
        .expect("turn completes")
    };
    ask().await; // warm: the agent is up and the session open
    let t0 = Instant::now();
    for _ in 0..turns {
        std::hint::black_box(ask().await);
    }
    let took = t0.elapsed();
    let _closed = session.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    took
}

// ---- 2. fs.read ----------------------------------------------------------------------

struct NoTerminals;

impl Approver for NoTerminals {
    fn approve(&self, _req: CommandApproval) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        Box::pin(async { false })
    }
}

fn coding_caps() -> CodingCaps {
    CodingCaps {
        fs: FsCaps {
            read: true,
            list: true,
            scope: Some(FsScope::WorkspaceOnly),
            ..FsCaps::default()
        },
        ..CodingCaps::only(ToolPermission::Interactive)
    }
}

/// 100 files of 1 MiB of text lines in nested directories.
fn workspace(dir: &Path) -> Vec<PathBuf> {
    let line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    let body = line.repeat(FILE_KB * 1024 / line.len());
    (0..WORKSPACE_MB * 1024 / FILE_KB)
        .map(|i| {
            let sub = dir.join(format!("d{}", i % 10));
            std::fs::create_dir_all(&sub).expect("subdir");
            let p = sub.join(format!("f{i}.txt"));
            std::fs::write(&p, &body).expect("file");
            p
        })
        .collect()
}

fn fs_read(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().expect("workspace");
    let root = std::fs::canonicalize(dir.path()).expect("root");
    let files = workspace(&root);
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).expect("md").len())
        .sum();
    let baseline = fastest_of(3, || {
        for f in &files {
            std::hint::black_box(std::fs::read_to_string(f).expect("read"));
        }
    });
    let rpc = Rpc::new(
        coding_caps(),
        &root,
        TermConfig::default(),
        Arc::new(NoTerminals),
    )
    .expect("rpc");
    let mut listed = 0;
    let served = fastest_of(3, || {
        listed = rt.block_on(read_listed(&rpc, &root));
    });
    assert_eq!(listed, files.len(), "every file listed and read");
    let mbps = |d: Duration| total as f64 / 1e6 / d.as_secs_f64();
    println!(
        "\n2. fs.read of a {:.0} MB workspace ({} files, listed recursively first), best of 3",
        total as f64 / 1e6,
        files.len()
    );
    println!(
        "   baseline std::fs::read_to_string        {:>8.0} MB/s ({:.3} s)",
        mbps(baseline),
        baseline.as_secs_f64()
    );
    println!(
        "   cap.fs.list + cap.fs.read (Rpc::call)    {:>8.0} MB/s ({:.3} s)  {:>5.1}% of baseline",
        mbps(served),
        served.as_secs_f64(),
        100.0 * baseline.as_secs_f64() / served.as_secs_f64()
    );
}

/// List the workspace, then read every file listed; the number of files read.
async fn read_listed(rpc: &Rpc, root: &Path) -> usize {
    let listing = rpc
        .call("cap.fs.list", json!({ "path": root, "recursive": true }))
        .await
        .expect("list");
    let entries = listing["entries"].as_array().cloned().unwrap_or_default();
    let mut read = 0;
    for e in entries.iter().filter(|e| e["kind"] == "file") {
        let path = root.join(e["name"].as_str().expect("name"));
        let v = rpc
            .call("cap.fs.read", json!({ "path": path }))
            .await
            .expect("read");
        std::hint::black_box(v);
        read += 1;
    }
    read
}
