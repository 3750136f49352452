//! Inputs per second through every decoder of untrusted input (issue 18, point 5).
//!
//! Per target: a pool of distinct inputs, made once by the suite's strategies (seeds
//! mutated, text built in the target's format, raw bytes) at the bench's sizes
//! ([`BENCH`]: at most 4 KiB each) from a fixed seed; then `CAPFLEET_FUZZ_BENCH_INPUTS`
//! inputs (default 10,000,000) decoded round the pool, each held to the suite's
//! promises ([`run`]: no panic, the heap bound, the time limit, and the target's own
//! properties, its round trips; a breach stops the bench).
//!
//! Two baselines, measured in the same run over the same pool on about a tenth of the
//! count (whole rounds of the pool): the decoder alone (no panic catch, heap peak or
//! clock), whose ratio (`checks`) is what holding an input to the promises costs; and
//! the floor every JSON decoder pays ([`json_floor`]: `serde_json` reading each line
//! into nothing), whose ratio (`/ JSON`) says what a decoder costs on top of reading
//! JSON.
//!
//! Run: `cargo bench -p capfleet-fuzz`; `CAPFLEET_FUZZ_BENCH_TARGETS=stream_json,pty`
//! for some targets only. Prints figures and the machine's load; asserts nothing about
//! time.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use capfleet_fuzz::alloc::Counting;
use capfleet_fuzz::check::{rng, run};
use capfleet_fuzz::input::{BENCH, inputs};
use capfleet_fuzz::targets::{ALL, Framing, Target};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use serde::de::IgnoredAny;

#[global_allocator]
static ALLOC: Counting = Counting;

/// Distinct inputs per target, cycled through.
const POOL: usize = 1 << 14;

/// The baselines run on about this fraction of the count.
const BASELINE_SHARE: u64 = 10;

fn main() {
    let total: u64 = std::env::var("CAPFLEET_FUZZ_BENCH_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let only = std::env::var("CAPFLEET_FUZZ_BENCH_TARGETS").unwrap_or_default();
    let targets: Vec<&Target> = ALL
        .iter()
        .filter(|t| only.is_empty() || only.split(',').any(|n| n.trim() == t.name))
        .collect();
    if targets.is_empty() {
        let names: Vec<&str> = ALL.iter().map(|t| t.name).collect();
        eprintln!(
            "CAPFLEET_FUZZ_BENCH_TARGETS={only}: no such target ({})",
            names.join(", ")
        );
        std::process::exit(2);
    }
    // Whole rounds of the pool (the same inputs as the count's, each as often), or the
    // count's own inputs when it is less than one round.
    let rounds = (total / BASELINE_SHARE).div_ceil(POOL as u64);
    let baseline = if total <= POOL as u64 {
        total
    } else {
        rounds * POOL as u64
    };
    println!(
        "fuzz bench: {total} inputs per decoder (baselines: {baseline}), round a pool of \
         {POOL} distinct ones of at most {} bytes; load average {}",
        BENCH.max_input,
        load()
    );
    println!(
        "{:<15} {:>10} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8}",
        "target", "inputs/s", "MB/s", "avg B", "checks", "/ JSON", "pool s", "total s"
    );
    let start = Instant::now();
    for t in targets {
        let began = Instant::now();
        let pool = pool(t);
        let built = began.elapsed();
        let (checked, bytes) = timed(&pool, total, |input| {
            if let Err(breach) = run(t, input) {
                panic!("fuzz target `{}` {breach}", t.name);
            }
        });
        let (bare, _) = timed(&pool, baseline, |input| (t.run)(input));
        let (floor, _) = timed(&pool, baseline, |input| json_floor(t.framing, input));
        let per_input = checked.as_secs_f64() / total as f64;
        println!(
            "{:<15} {:>10.0} {:>7.1} {:>8.0} {:>6.2}x {:>6.2}x {:>7.1} {:>8.1}",
            t.name,
            1.0 / per_input,
            bytes as f64 / checked.as_secs_f64() / 1e6,
            bytes as f64 / total as f64,
            per_input / (bare.as_secs_f64() / baseline as f64),
            per_input / (floor.as_secs_f64() / baseline as f64),
            built.as_secs_f64(),
            began.elapsed().as_secs_f64(),
        );
    }
    println!(
        "done in {:.0} s; load average {}",
        start.elapsed().as_secs_f64(),
        load()
    );
}

/// `serde_json` reading `input` into nothing (`IgnoredAny`): each line (an SSE line
/// after its `data:`), or the whole of a JSON document.
fn json_floor(framing: Framing, input: &[u8]) {
    let read = |json: &[u8]| {
        std::hint::black_box(serde_json::from_slice::<IgnoredAny>(json).is_ok());
    };
    match framing {
        Framing::Json => read(input),
        _ => {
            for line in input.split(|&b| b == b'\n') {
                read(line.strip_prefix(b"data:").unwrap_or(line));
            }
        }
    }
}

/// [`POOL`] inputs of `t` from a fixed seed (the same pool each run).
fn pool(t: &Target) -> Vec<Vec<u8>> {
    let mut runner = TestRunner::new_with_rng(Config::default(), rng(0x5eed));
    let strategy = inputs(t, BENCH);
    (0..POOL)
        .map(|_| strategy.new_tree(&mut runner).expect("an input").current())
        .collect()
}

/// `total` calls of `f` round `pool`: the wall time and the bytes fed.
fn timed(pool: &[Vec<u8>], total: u64, mut f: impl FnMut(&[u8])) -> (Duration, u64) {
    let mut bytes = 0u64;
    let start = Instant::now();
    for input in pool.iter().cycle().take(total as usize) {
        bytes += input.len() as u64;
        f(input);
    }
    (start.elapsed(), bytes)
}

/// The machine's load averages (1, 5, 15 minutes), where the system says them.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_owned())
}
