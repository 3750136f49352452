//! Inputs per second through every decoder of untrusted input (issue 18, point 5).
//!
//! Per target: a pool of distinct inputs made by the suite's strategies (seeds
//! mutated, text built in the target's format, raw bytes) from a fixed seed, then
//! `CAPFLEET_FUZZ_BENCH_INPUTS` inputs (default 10,000,000) decoded round the pool,
//! each held to the same promises as in the suite (no panic, the heap bound; a breach
//! stops the bench). The baseline, measured in the same run over the same inputs, is
//! the floor every JSON decoder pays: `serde_json`'s parse of the bytes into nothing
//! (`IgnoredAny`), so the ratio says what a decoder costs on top of reading JSON.
//!
//! Run: `cargo bench -p capfleet-fuzz`. Prints figures; asserts nothing about time.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use capfleet_fuzz::alloc::Counting;
use capfleet_fuzz::check::{rng, run};
use capfleet_fuzz::input::inputs;
use capfleet_fuzz::targets::ALL;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use serde::de::IgnoredAny;

#[global_allocator]
static ALLOC: Counting = Counting;

/// Distinct inputs per target, cycled through.
const POOL: usize = 1 << 16;

fn main() {
    let total: u64 = std::env::var("CAPFLEET_FUZZ_BENCH_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    println!("fuzz bench: {total} inputs per decoder, round a pool of {POOL} distinct ones each");
    println!(
        "{:<16} {:>12} {:>10} {:>14} {:>16}",
        "target", "inputs/s", "MB/s", "JSON floor/s", "decoder / floor"
    );
    for t in ALL {
        let mut runner = TestRunner::new_with_rng(Config::default(), rng(0x5eed));
        let strategy = inputs(t);
        let pool: Vec<Vec<u8>> = (0..POOL)
            .map(|_| strategy.new_tree(&mut runner).expect("an input").current())
            .collect();
        let pool_bytes: usize = pool.iter().map(Vec::len).sum();
        let (took, bytes) = timed(&pool, total, |input| {
            if let Err(breach) = run(t, input) {
                panic!("fuzz target `{}` {breach}", t.name);
            }
        });
        let (floor, _) = timed(&pool, total, |input| {
            std::hint::black_box(serde_json::from_slice::<IgnoredAny>(input).is_ok());
        });
        let rate = total as f64 / took.as_secs_f64();
        let floor_rate = total as f64 / floor.as_secs_f64();
        println!(
            "{:<16} {:>12.0} {:>10.1} {:>14.0} {:>15.2}x   (pool: {:.1} KiB average)",
            t.name,
            rate,
            bytes as f64 / took.as_secs_f64() / 1e6,
            floor_rate,
            took.as_secs_f64() / floor.as_secs_f64(),
            pool_bytes as f64 / POOL as f64 / 1024.0,
        );
    }
}

/// `total` calls of `f` round `pool`: the wall time and the bytes fed.
fn timed(pool: &[Vec<u8>], total: u64, mut f: impl FnMut(&[u8])) -> (Duration, u64) {
    let mut bytes = 0u64;
    let start = Instant::now();
    for i in 0..total {
        let input = &pool[(i % pool.len() as u64) as usize];
        bytes += input.len() as u64;
        f(input);
    }
    (start.elapsed(), bytes)
}
