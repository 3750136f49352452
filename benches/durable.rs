//! The stop-anywhere checker (issue 36, point 6) over many seeds: every series of
//! `tests/all/common/checker.rs` (the suite's `durable_checker` runs one seed each),
//! `CAPFLEET_CHECKER_SEEDS` seeds per series (30 by default;
//! `CAPFLEET_CHECKER_SERIES=a,b` runs some series only). Prints, per series, the
//! seeds that passed and each failing seed with its moments (so that it replays:
//! the suite's `check` on that series and seed), with `CAPFLEET_CHECKER_VERBOSE=1`
//! every passing seed's moments too; exits 1 if any failed.
//!
//! Run: `cargo bench --bench durable`.
// A bench's figures are its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "checker_support/mod.rs"]
mod common;

use std::time::Instant;

use common::checker::{SERIES, seeds};

fn main() {
    let n: usize = std::env::var("CAPFLEET_CHECKER_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let only = std::env::var("CAPFLEET_CHECKER_SERIES").unwrap_or_default();
    let base: u64 = std::env::var("CAPFLEET_CHECKER_BASE")
        .ok()
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0x36_5eed);
    let verbose = std::env::var_os("CAPFLEET_CHECKER_VERBOSE").is_some_and(|v| v == "1");
    println!("capfleet durable bench: the stop-anywhere checker, {n} seeds per series");
    let mut failed = 0;
    for s in SERIES {
        if !only.is_empty() && !only.split(',').any(|o| o.trim() == s.name) {
            continue;
        }
        let t = Instant::now();
        let (passed, f): (Vec<_>, Vec<_>) = seeds(s, base, n).into_iter().partition(Result::is_ok);
        println!(
            "{}: {} of {n} seeds passed ({:.0} s)",
            s.name,
            passed.len(),
            t.elapsed().as_secs_f64()
        );
        if verbose {
            for m in passed.iter().flatten() {
                println!("  passed: {m}");
            }
        }
        for e in f.iter().filter_map(|r| r.as_ref().err()) {
            println!("  {e}");
        }
        failed += f.len();
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
