//! The stop-anywhere checker in the suite (issue 36, point 6): one seed of every
//! series (`common::checker::SERIES`: SIGKILL, SIGINT and SIGTERM at a time, at a
//! journal line count, right after a chosen record, kills of the resumes, a second
//! signal during a stop (SIGINT then SIGINT, SIGINT then SIGKILL), a kill during
//! `--commit`'s end-of-run pass, kills during `capfleet merge` of the run's branches,
//! stops between a mention and its turn's end on a fleet whose mentioning agent
//! keeps working 700 ms after it), each resumed (or merged again) to its end and
//! compared with an uninterrupted run. Many seeds: `cargo bench --bench durable`. A
//! failing seed names its series, seed and moments.

use crate::common::checker::{SERIES, Series, seeds};

/// The suite's seeds per series.
const SEEDS: usize = 1;

fn run(name: &str, base: u64) {
    let s: &Series = SERIES.iter().find(|s| s.name == name).unwrap();
    let failed: Vec<String> = seeds(s, base, SEEDS)
        .into_iter()
        .filter_map(Result::err)
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn stops_at_a_time_by_each_signal_end_as_an_uninterrupted_run() {
    for (i, s) in ["sigkill-time", "sigint-time", "sigterm-time"]
        .iter()
        .enumerate()
    {
        run(s, 0x36_0001 + i as u64);
    }
}

#[test]
fn kills_at_a_line_count_and_after_chosen_records_end_as_an_uninterrupted_run() {
    for (i, s) in [
        "sigkill-lines",
        "sigkill-after-routed",
        "sigkill-after-turn-ended",
    ]
    .iter()
    .enumerate()
    {
        run(s, 0x36_0101 + i as u64);
    }
}

#[test]
fn stops_of_the_resumes_end_as_an_uninterrupted_run() {
    run("sigkill-resumes", 0x36_0201);
    run("sigterm-resumes", 0x36_0202);
}

#[test]
fn a_second_signal_during_a_stop_ends_as_an_uninterrupted_run() {
    run("sigint-sigint", 0x36_0501);
    run("sigint-sigkill", 0x36_0502);
}

#[test]
fn a_kill_during_commit_ends_as_an_uninterrupted_run() {
    run("sigkill-in-commit", 0x36_0301);
}

#[test]
fn kills_during_merge_end_as_an_uninterrupted_merge() {
    run("sigkill-in-merge", 0x36_0601);
    run("sigkill-in-merges", 0x36_0602);
}

#[test]
fn stops_between_a_mention_and_its_turns_end_deliver_it_once() {
    run("sigkill-after-mention", 0x36_0401);
    run("sigterm-after-mention", 0x36_0402);
}
