//! PTY driver figures, each against a baseline measured in the same run:
//!
//! - replay: a recorded sim-TUI session (`benches/fixtures/sim-tui-session.bin`,
//!   replayed to 20 MB) through the driver's screen and line parser (MB/s), against
//!   the bare vt100 parser on the same bytes (the emulator's own floor);
//! - turn-end latency: 100 echo turns of `capfleet chat sim-tui --raw`; the time from
//!   the raw bytes carrying the sim's prompt to `turn_ended` (median, p95), false or
//!   missed ends counted; against the spec's 200 ms silence (the floor of A3);
//! - whole process: one turn against a TUI answering in 100 ms, wall and CPU, against
//!   `capfleet --version`.
//!
//! Run: `cargo bench --bench pty`. Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::num::NonZeroU16;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capfleet_engine::manifest::Manifest;
use capfleet_wire::bindings::pty::{Fed, LineParser, Screen};
use serde_json::Value;

#[allow(dead_code)]
#[path = "support/figures.rs"]
mod figures;

use figures::{fastest_of, ms};

const REPLAY_BYTES: usize = 20 * 1024 * 1024;
const TURNS: usize = 100;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = env!("CARGO_BIN_EXE_capfleet");
    replay(root);
    latency(exe);
    whole_process(exe);
}

fn replay(root: &Path) {
    let session =
        std::fs::read(root.join("benches/fixtures/sim-tui-session.bin")).expect("recorded session");
    let manifest = Manifest::load(root.join("config/agents/sim-tui.toml"))
        .expect("sim-tui manifest")
        .manifest;
    let reps = REPLAY_BYTES.div_ceil(session.len());
    let total = (session.len() * reps) as f64;
    // Reads as the driver sees them: 16 KiB at most.
    let chunks: Vec<&[u8]> = session.chunks(16 * 1024).collect();
    let (rows, cols) = (manifest.pty.rows, manifest.pty.cols);
    let floor = fastest_of(3, || {
        let nz = |n| NonZeroU16::new(n).expect("size");
        let mut p = vt100::Parser::new(nz(rows), nz(cols), 10_000);
        for _ in 0..reps {
            for c in &chunks {
                p.process(c);
            }
        }
        std::hint::black_box(p.screen().cursor_position());
    });
    let mut events = 0;
    let driver = fastest_of(3, || {
        let max_line = usize::try_from(manifest.limits.max_line_bytes).unwrap_or(usize::MAX);
        let mut screen = Screen::new(rows, cols, max_line);
        let mut parser = LineParser::new(manifest.patterns.clone());
        let (mut lines, mut out) = (Vec::new(), Vec::new());
        parser.begin_turn("refactor please");
        for _ in 0..reps {
            for c in &chunks {
                screen.feed(c, &mut lines);
                for l in lines.drain(..) {
                    if let Fed::Line(l) = l {
                        parser.on_line(&l, &mut out);
                    }
                }
                events += out.len();
                out.clear();
            }
        }
        std::hint::black_box(screen.take_replies());
    });
    let mb = |d: Duration| total / d.as_secs_f64() / 1e6;
    println!(
        "replay   vt100 alone (floor)           {:>8.1} MB/s",
        mb(floor)
    );
    println!(
        "replay   screen + line events          {:>8.1} MB/s  ({:.2}x floor; {} events/pass; goal >= 20 MB/s)",
        mb(driver),
        driver.as_secs_f64() / floor.as_secs_f64(),
        events / 3
    );
}

fn latency(exe: &str) {
    let mut cmd = Command::new(exe);
    cmd.args(["chat", "sim-tui", "--json", "--raw"]);
    for i in 0..TURNS {
        cmd.args(["--task", &format!("t{i}")]);
    }
    let mut child = cmd
        .env_remove("CAPFLEET_SIM_SCRIPT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chat");
    let mut last_prompt: Option<u64> = None;
    let mut latencies = Vec::new();
    let mut texts = 0;
    let stdout = child.stdout.take().expect("stdout");
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let Ok(e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let ts = e["ts_ms"].as_u64().unwrap_or(0);
        match (e["type"].as_str(), e["event"]["kind"].as_str()) {
            (Some("cap"), Some("cap.pty.raw_bytes")) => {
                let b64 = e["event"]["bytes_b64"].as_str().unwrap_or("");
                // The prompt `❯` in UTF-8 is E2 9D AF: base64 of a chunk holding it
                // varies with its offset, so decode.
                if decode(b64).windows(3).any(|w| w == [0xE2, 0x9D, 0xAF]) {
                    last_prompt = Some(ts);
                }
            }
            (Some("cap"), Some("cap.text_chunk")) => texts += 1,
            (Some("turn_ended"), _) => {
                if let Some(p) = last_prompt.take() {
                    latencies.push(ts.saturating_sub(p));
                }
            }
            _ => {}
        }
    }
    let _status = child.wait();
    latencies.sort_unstable();
    let pct = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    if latencies.is_empty() {
        println!("latency  no turn ended");
        return;
    }
    let false_or_missed = TURNS.abs_diff(latencies.len()) + TURNS.abs_diff(texts);
    println!(
        "latency  turn end after the prompt      median {} ms, p95 {} ms over {} turns (floor: 200 ms silence; goal median <= 300 ms); false/missed ends: {}",
        pct(0.5),
        pct(0.95),
        latencies.len(),
        false_or_missed
    );
}

fn whole_process(exe: &str) {
    let dir = std::env::temp_dir().join(format!("capfleet-pty-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("fast.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [{ sleep_ms = 100 }, { say = \"ok\" }]\n",
    )
    .expect("script");
    let script = script.to_string_lossy().into_owned();
    let floor = timed(exe, &["--version"]);
    let one = timed(
        exe,
        &["chat", "sim-tui", "--task", "go", "--script", &script],
    );
    println!(
        "process  capfleet --version (floor)     wall {:>7.1} ms  cpu {:>6.1} ms",
        ms(floor.0),
        ms(floor.1)
    );
    println!(
        "process  one 100 ms TUI turn            wall {:>7.1} ms  cpu {:>6.1} ms (goal <= 600 / 100 ms)",
        ms(one.0),
        ms(one.1)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Median wall time and children's CPU (user + system) of 5 runs.
fn timed(exe: &str, args: &[&str]) -> (Duration, Duration) {
    let mut runs: Vec<(Duration, Duration)> = (0..5)
        .map(|_| {
            let cpu0 = children_cpu();
            let t = Instant::now();
            let status = Command::new(exe)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run capfleet");
            assert!(status.success(), "{args:?}: {status}");
            (t.elapsed(), children_cpu().saturating_sub(cpu0))
        })
        .collect();
    runs.sort();
    runs[runs.len() / 2]
}

fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn decode(b64: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default()
}
