//! Session figures, each against a baseline measured in the same run:
//!
//! 1. driver + session throughput: a sim turn of 1,000,000 Claude-shaped `assistant`
//!    text frames (a `flood` step) through the real stream-json driver actor and
//!    session actor (`Orchestrator::start` + `spawn_session`, a subscriber counting
//!    events), in events/s by wall and by CPU time; against a raw
//!    `serde_json::from_slice::<Value>` parse of the same lines (captured from the sim
//!    to a file first) and the sim alone writing them to that file;
//! 2. the whole process: `capfleet chat sim --task x --script <200,000 frames>`,
//!    stdout to /dev/null, wall and CPU (user+sys of the child and its sim, from
//!    `wait4`), median of 5; against the sim alone producing the same frames to
//!    /dev/null and a raw parse of the lines; and `capfleet run` of a one-session
//!    fleet on the same script, interleaved: its wall over chat's (goal <= 1.3x) and
//!    its journal's bytes per text byte (goal <= 1.5);
//! 3. crash-to-ready restart latency: a turn whose sim kills itself once (SIGKILL),
//!    then answers; time from the `cap.error` of the death to the next
//!    `cap.session.ready` (and to the retried turn's first text), median over the
//!    sessions; against the sim's own boot (spawn to its `system/init` line).
//!
//! 4. one nesting level: `capfleet chat capfleet` (through `capfleet speak --agent
//!    sim`) against `capfleet chat sim` on the same 200,000 frames, interleaved; and
//!    the first token's latency through it;
//! 5. the `codex exec --json` shape (a stand-in Codex printing recorded JSONL): a
//!    turn of 100,000 agent messages through driver + session against a raw parse of
//!    the same lines, and the per-turn process's ask-to-first-text against the
//!    long-lived stream-json sim's;
//! 6. the chaos interposer installed with no fault armed (a chaos run's session whose
//!    faults are elsewhere) against no interposer (every other run): part 1's turn of
//!    300,000 frames, 7 interleaved pairs, the ratio of the medians (goal <= 1.05x).
//!
//! Run: `cargo bench --bench session`. Prints figures; asserts nothing about time.
//! `CAPFLEET_BENCH_PARTS=1,4` runs some parts only; `CAPFLEET_BENCH_FRAMES` changes
//! the frame count of part 1.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::path::Path;

mod codex;
#[allow(dead_code)]
#[path = "../support/figures.rs"]
mod figures;
mod measure;
mod nested;
mod restarts;
mod throughput;
mod tree;
mod whole;

pub(crate) const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
pub(crate) const SIM_MANIFEST: &str = include_str!("../../config/agents/sim.toml");
/// Text bytes per flood frame: a frame line is then ~195 bytes, as Claude's short
/// streamed chunks are.
pub(crate) const CHUNK: u64 = 8;
pub(crate) const THROUGHPUT_FRAMES: u64 = 1_000_000;
/// Frames of part 6's turns (14 of them).
pub(crate) const INTERPOSER_FRAMES: u64 = 300_000;
pub(crate) const CHAT_FRAMES: u64 = 200_000;
pub(crate) const CHAT_RUNS: usize = 5;
pub(crate) const RESTARTS: usize = 24;
pub(crate) const USER_FRAME: &str =
    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";

fn main() {
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3,4,5,6".into());
    let frames: u64 = std::env::var("CAPFLEET_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(THROUGHPUT_FRAMES);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-session");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let user_frame = dir.join("user-frame.ndjson");
    std::fs::write(&user_frame, USER_FRAME).expect("user frame");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("capfleet session bench (2 tokio workers, as `capfleet chat`)");
    if parts.contains('1') {
        throughput::throughput(&runtime, &dir, &user_frame, frames);
    }
    if parts.contains('2') {
        whole::whole_chat(&dir, &user_frame);
    }
    if parts.contains('3') {
        restarts::restarts(&runtime, &dir);
    }
    if parts.contains('4') {
        nested::nested(&dir);
    }
    if parts.contains('5') {
        codex::codex(&runtime, &dir);
    }
    if parts.contains('6') {
        throughput::interposer_overhead(&runtime, &dir, frames.min(INTERPOSER_FRAMES));
    }
}
