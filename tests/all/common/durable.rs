//! What the durable-run tests check on a journal: the deliveries completed, that no
//! delivery is routed or completed twice and no turn completed twice; and the seeded
//! kill moments they use; the demo fleet in a git checkout.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::repo::Fixture;

/// The deliveries that completed, by key.
pub(crate) fn completed(j: &[Value]) -> BTreeSet<String> {
    j.iter()
        .filter(|r| r["type"] == "delivered" && r["outcome"] == "completed")
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

/// No key routed twice, no delivery nor session turn completed twice.
pub(crate) fn exactly_once(j: &[Value]) {
    let mut routed = HashMap::new();
    for r in j.iter().filter(|r| r["type"] == "routed") {
        let key = r["key"].as_str().unwrap();
        *routed.entry(key).or_insert(0) += 1;
    }
    assert!(routed.values().all(|&n| n == 1), "routed twice: {routed:?}");
    let mut done = HashMap::new();
    for r in j
        .iter()
        .filter(|r| r["type"] == "delivered" && r["outcome"] == "completed")
    {
        *done.entry(r["key"].as_str().unwrap()).or_insert(0) += 1;
    }
    assert!(
        done.values().all(|&n| n == 1),
        "a delivery completed twice: {done:?}"
    );
    let mut turns = HashMap::new();
    for r in j
        .iter()
        .filter(|r| r["type"] == "turn_ended" && r["outcome"] == "completed")
    {
        *turns
            .entry((r["urn"].to_string(), r["turn"].to_string()))
            .or_insert(0) += 1;
    }
    assert!(
        turns.values().all(|&n| n == 1),
        "a turn completed twice: {turns:?}"
    );
}

/// A tiny seeded generator (xorshift): kill moments within `span` (from 5% to 65% of
/// it), reproducible.
pub(crate) fn moments(seed: u64, n: usize, span: Duration) -> Vec<Duration> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            span.mul_f64(0.05 + (x % 600) as f64 / 1000.0)
        })
        .collect()
}

/// A git checkout with the demo fleet and its scripts in it (`fleets/demo.toml`).
pub(crate) fn demo() -> Fixture {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    std::fs::create_dir_all(repo.path().join("fleets")).unwrap();
    std::fs::create_dir_all(repo.path().join("sim")).unwrap();
    std::fs::copy(
        config.join("fleets/demo.toml"),
        repo.path().join("fleets/demo.toml"),
    )
    .unwrap();
    for s in [
        "fleet-planner",
        "fleet-worker-a",
        "fleet-worker-b",
        "fleet-reviewer",
    ] {
        let f = format!("{s}.toml");
        std::fs::copy(
            config.join("sim").join(&f),
            repo.path().join("sim").join(&f),
        )
        .unwrap();
    }
    repo
}
