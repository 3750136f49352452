//! Part 4: Codex alone, no capfleet, the same flood turn: `codex exec --json` with
//! its output read and dropped (spawn to its `turn.completed` line: exec's turn is a
//! process), and `codex app-server` driven by the least client there is (initialize,
//! `thread/start`, then `turn/start` to its `turn/completed`). The baseline of part
//! 2: what each path costs with nobody in the way, so that the ratio through capfleet
//! can be read against the ratio of Codex's own. Each path's output is read by a
//! reader that only counts (lines and bytes, from the turn's request to its end) and
//! its CPU is Codex's own (its process group's, from `/proc`): how much each path writes per
//! message, and what writing it costs Codex.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::peer::{FakeLlm, peer_env};
use crate::session::Via;

/// `codex` with its offline environment against `fake`, in a process group of its own.
fn codex(fake: &FakeLlm, codex: &Path, home: &Path, work: &Path) -> Command {
    let bin = codex
        .parent()
        .expect("codex's bin dir")
        .display()
        .to_string();
    let mut c = Command::new(codex);
    for (k, v) in peer_env("codex", fake.port(), home, work) {
        let v = if k == "PATH" { format!("{bin}:{v}") } else { v };
        c.env(k, v);
    }
    c.current_dir(work)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    c
}

/// What Codex wrote and spent for one flood.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Alone {
    /// From the turn's request (exec: its spawn) to its end line.
    pub took: Duration,
    /// Lines and bytes written meanwhile (the end line included).
    pub lines: u64,
    pub bytes: u64,
    /// Codex's CPU, its process group's from spawn to the turn's end (app-server: its
    /// start and thread too).
    pub cpu: Duration,
}

/// Lines and bytes read so far.
#[derive(Default)]
struct Counted {
    lines: u64,
    bytes: u64,
}

/// Read `out` up to the first line containing `needle`, counting what is read.
fn read_to(out: &mut BufReader<ChildStdout>, needle: &str, n: &mut Counted) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        let read = out.read_line(&mut line).expect("codex output");
        assert!(read > 0, "codex ended before {needle}");
        n.lines += 1;
        n.bytes += read as u64;
        if line.contains(needle) {
            return serde_json::from_str(&line).expect("a JSON line");
        }
    }
}

/// The CPU of the processes of group `pgid` so far (and of their children they
/// reaped), from `/proc`: Codex is a Node launcher and its native binary.
fn group_cpu(pgid: u32) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's `)`: state, ppid, pgrp, ..., utime (12th), stime,
        // cutime, cstime.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        ticks += f[11..15]
            .iter()
            .filter_map(|t| t.parse::<u64>().ok())
            .sum::<u64>();
    }
    Duration::from_secs_f64(ticks as f64 / tick)
}

/// Kill the child's group and reap it: the group's CPU until then.
fn end(mut child: Child) -> Duration {
    let cpu = group_cpu(child.id());
    // SAFETY: kill(2) of our child's own process group (`process_group(0)`).
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let _status = child.wait();
    cpu
}

/// The flood turn of `items` agent messages on `via` with Codex alone.
pub(crate) fn flood(via: Via, fake: &FakeLlm, codex_path: &Path, items: u64) -> Alone {
    let mut n = Counted::default();
    fake.reset();
    fake.script(json!([{ "text": "xxxxxxxx", "items": items, "chunk": 64 }]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let work = std::fs::canonicalize(work.path()).expect("work");
    let mut c = codex(fake, codex_path, home.path(), &work);
    let (took, child) = match via {
        Via::Exec => {
            c.args(["exec", "--json", "--skip-git-repo-check", "go"])
                .stdin(Stdio::null());
            let t0 = Instant::now();
            let mut child = c.spawn().expect("codex exec");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            read_to(&mut out, "\"turn.completed\"", &mut n);
            (t0.elapsed(), child)
        }
        Via::AppServer => {
            c.arg("app-server").stdin(Stdio::piped());
            let mut child = c.spawn().expect("codex app-server");
            let mut input = child.stdin.take().expect("stdin");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut send = |v: Value| {
                writeln!(input, "{v}").expect("codex input");
            };
            send(json!({"id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "bench", "version": "0"}}}));
            read_to(&mut out, "\"id\":1", &mut Counted::default());
            send(json!({"method": "initialized"}));
            send(json!({"id": 2, "method": "thread/start",
                "params": {"cwd": work.display().to_string()}}));
            let thread = read_to(&mut out, "\"id\":2", &mut Counted::default())["result"]["thread"]
                ["id"]
                .clone();
            let t0 = Instant::now();
            send(
                json!({"id": 3, "method": "turn/start", "params": {"threadId": thread,
                "input": [{"type": "text", "text": "go", "text_elements": []}]}}),
            );
            read_to(&mut out, "\"method\":\"turn/completed\"", &mut n);
            let took = t0.elapsed();
            drop(input);
            (took, child)
        }
    };
    Alone {
        took,
        lines: n.lines,
        bytes: n.bytes,
        cpu: end(child),
    }
}
