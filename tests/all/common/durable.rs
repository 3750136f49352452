//! What the durable-run tests check on a journal: the deliveries completed, that no
//! delivery is routed or completed twice and no turn completed twice; the seeded
//! kill moments they use; a stop of capfleet by a signal, waited out until none of
//! its agents lives; the demo fleet in a git checkout.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use super::procs::processes_marked_by;
use super::repo::Fixture;
use super::wait_until;

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

/// A run resumed after kills did what an uninterrupted one did: every delivery and
/// turn once, the `expected` deliveries completed, and the run ended `completed`.
pub(crate) fn as_uninterrupted(j: &[Value], expected: &BTreeSet<String>) {
    exactly_once(j);
    assert_eq!(
        completed(j),
        *expected,
        "the same deliveries completed as uninterrupted"
    );
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.last().expect("a run_ended")["outcome"], "completed");
}

/// A seeded generator of moments (xorshift), reproducible.
pub(crate) struct Moments(pub u64);

impl Moments {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A moment in `lo..hi` milliseconds.
    pub(crate) fn next(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next_u64() % (hi - lo))
    }
}

/// `n` kill moments within `span` (from 5% to 65% of it).
pub(crate) fn moments(seed: u64, n: usize, span: Duration) -> Vec<Duration> {
    let mut m = Moments(seed);
    (0..n)
        .map(|_| span.mul_f64(0.05 + (m.next_u64() % 600) as f64 / 1000.0))
        .collect()
}

/// Send `signal` to capfleet `child` and wait for it; then no agent it started may
/// outlive it by 1 s (asserted, `what` naming the stop).
pub(crate) fn stop(child: &mut Child, signal: libc::c_int, what: &str) -> ExitStatus {
    // SAFETY: kill(2) on the child this test started (not yet reaped).
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let status = child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
            processes_marked_by(child.id()).is_empty()
        }),
        "{what}: agents outlive capfleet by 1 s: {:?}",
        processes_marked_by(child.id())
    );
    status
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
