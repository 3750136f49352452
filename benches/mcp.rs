//! MCP figures, each against a baseline measured in the same run: the round trip of
//! one tool call to `capfleet mcp` on stdio, against the same call to a bare `rmcp`
//! server (this bench run again as one, `CAPFLEET_BENCH_BARE_MCP=1`: the same SDK,
//! transport, tool name and output type, answering at once with nothing behind it).
//!
//! 1. `list_runs` in an empty data dir (the trivial call: what capfleet adds is its
//!    accounting — caller, span, count — and one listing of `.capfleet/runs/`);
//! 2. `list_runs` over 50 ended runs (each run's journal read for its state, cost and
//!    sessions; a run ended for good is read once, its row kept, and the listing is
//!    kept while the runs directory is unchanged: `capfleet_app::runs::Rows`);
//! 3. `run_status` of an ended run (its journal read once, and each call journaled in
//!    it: appended after the answer, off the call's path, a group commit). The
//!    server is then closed as a client closes it (stdin's end) and the calls
//!    journaled counted: each of them, written before it exits.
//!
//! The client is a plain JSON-RPC loop over the server's pipes, in this process: one
//! `initialize`, then the calls back to back, each written and its response read
//! before the next. Run: `cargo bench --bench mcp`. Prints figures; asserts nothing
//! about time. `CAPFLEET_BENCH_CALLS` changes the calls per pass.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use capfleet_mcp::types::{RunList, RunRef, RunStatus};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{Json, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};
use serde_json::{Value, json};

#[allow(dead_code)]
#[path = "support/figures.rs"]
mod figures;

use figures::{fastest_of, ratio};

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const BARE: &str = "CAPFLEET_BENCH_BARE_MCP";
const CALLS: usize = 400;
const PASSES: usize = 5;
const ENDED_RUNS: usize = 50;

/// The bare server: the same tools' names and output types, answered at once.
#[derive(Clone)]
struct Bare {
    tool_router: ToolRouter<Bare>,
}

#[tool_router]
impl Bare {
    #[tool(description = "No runs.")]
    async fn list_runs(&self) -> Json<RunList> {
        Json(RunList { runs: Vec::new() })
    }

    #[tool(description = "A run that completed.")]
    async fn run_status(&self, Parameters(r): Parameters<RunRef>) -> Json<RunStatus> {
        Json(RunStatus {
            run: r.run,
            fleet: None,
            state: "completed".into(),
            outcome: Some("completed".into()),
            exit_code: Some(0),
            cost_usd: 0.0,
            error: None,
            cancelled_by: None,
            sessions: Vec::new(),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bare {}

fn serve_bare() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let bare = Bare {
            tool_router: Bare::tool_router(),
        };
        let running = bare
            .serve(rmcp::transport::stdio())
            .await
            .expect("the bare server's handshake");
        let _closed = running.waiting().await;
    });
}

/// A JSON-RPC client over a server's pipes.
struct Client {
    child: Child,
    /// The server's stdin, until the client closes it.
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
    next: u64,
}

impl Client {
    fn start(mut command: Command) -> Client {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server");
        let to = child.stdin.take();
        let from = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            to,
            from,
            next: 0,
        };
        c.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: &Value) {
        let to = self.to.as_mut().expect("the server's stdin is open");
        writeln!(to, "{v}").expect("write");
        to.flush().expect("flush");
    }

    /// A request and its response's result (notifications before it skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.from.read_line(&mut line).expect("read") > 0,
                "the server closed"
            );
            let v: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{v}");
                return v["result"].clone();
            }
        }
    }

    fn call(&mut self, tool: &str, args: &Value) {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert_ne!(r["isError"], true, "{r}");
    }
}

impl Client {
    /// Close the server's stdin, as a client ends, and wait for it to exit.
    fn close(mut self) {
        drop(self.to.take());
        let _exited = self.child.wait();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // No run is left in either server: a kill leaves nothing behind.
        let _gone = self.child.kill();
        let _reaped = self.child.wait();
    }
}

fn capfleet_mcp(dir: &Path) -> Client {
    let mut c = Command::new(EXE);
    c.arg("mcp").current_dir(dir).env("NO_COLOR", "1");
    Client::start(c)
}

fn bare() -> Client {
    let mut c = Command::new(std::env::current_exe().expect("the bench"));
    c.env(BARE, "1");
    Client::start(c)
}

/// The fastest pass's time per call, in µs.
fn per_call(client: &mut Client, calls: usize, tool: &str, args: &Value) -> Duration {
    for _ in 0..calls / 10 {
        client.call(tool, args);
    }
    fastest_of(PASSES, || {
        for _ in 0..calls {
            client.call(tool, args);
        }
    }) / u32::try_from(calls).unwrap_or(u32::MAX)
}

/// `n` ended runs in `dir`'s data dir, each with a short journal; their ids.
fn ended_runs(dir: &Path, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let id = format!("20260101T000000Z-{i:04x}");
            let run = dir.join(".capfleet/runs").join(&id);
            std::fs::create_dir_all(&run).expect("a run dir");
            let mut journal = String::new();
            for (seq, kind) in ["turn_started", "turn_ended"].iter().enumerate() {
                journal.push_str(&format!(
                    "{{\"seq\":{},\"urn\":\"cap://f/s\",\"turn\":1,\"ts_ms\":{},\"type\":\"{kind}\"}}\n",
                    seq + 1,
                    1_700_000_000_000u64 + seq as u64
                ));
            }
            journal.push_str("{\"type\":\"run_ended\",\"outcome\":\"completed\",\"exit_code\":0,\"ts_ms\":1700000000100}\n");
            std::fs::write(run.join("journal.jsonl"), journal).expect("a journal");
            id
        })
        .collect()
}

fn figure(name: &str, ours: Duration, base: Duration) {
    println!(
        "{name:<44} capfleet mcp {:>8.1} µs/call   bare rmcp {:>8.1} µs/call   ratio {:.2}x",
        ours.as_secs_f64() * 1e6,
        base.as_secs_f64() * 1e6,
        ratio(ours, base)
    );
}

fn main() {
    if std::env::var_os(BARE).is_some() {
        serve_bare();
        return;
    }
    let calls = std::env::var("CAPFLEET_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CALLS);
    let empty = tempfile::tempdir().expect("a directory");
    let full = tempfile::tempdir().expect("a directory");
    let ids = ended_runs(full.path(), ENDED_RUNS);
    let none = json!({});
    let one = json!({"run": ids[0]});

    let mut base = bare();
    let mut ours = capfleet_mcp(empty.path());
    let b = per_call(&mut base, calls, "list_runs", &none);
    let o = per_call(&mut ours, calls, "list_runs", &none);
    figure("1. list_runs, no run", o, b);
    drop(ours);

    let mut ours = capfleet_mcp(full.path());
    let o = per_call(&mut ours, calls / 4, "list_runs", &none);
    figure(&format!("2. list_runs, {ENDED_RUNS} ended runs"), o, b);
    let b = per_call(&mut base, calls, "run_status", &one);
    let o = per_call(&mut ours, calls, "run_status", &one);
    figure("3. run_status of an ended run (journaled)", o, b);
    ours.close();
    let journaled = std::fs::read_to_string(
        full.path()
            .join(".capfleet/runs")
            .join(&ids[0])
            .join("journal.jsonl"),
    )
    .map(|j| j.lines().filter(|l| l.contains("\"mcp_call\"")).count())
    .unwrap_or(0);
    println!("   (run_status calls journaled in that run: {journaled})");
}
