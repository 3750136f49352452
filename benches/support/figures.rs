//! The arithmetic of the benches' figures: the fastest of timed passes (after a
//! warm-up or not), the median of timed runs, durations in ms, ratios, MB. Self-contained: the benches that do
//! not use the fleet helpers of `support` include this file alone.

use std::time::{Duration, Instant};

/// `f` once to warm up, then the fastest of `passes` timed runs of it.
pub(crate) fn best_of(passes: usize, mut f: impl FnMut()) -> Duration {
    f();
    fastest_of(passes, f)
}

/// The fastest of `passes` timed runs of `f` (no warm-up).
pub(crate) fn fastest_of(passes: usize, mut f: impl FnMut()) -> Duration {
    (0..passes)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one pass")
}

/// The median of `v` (sorted in place; the upper one of an even count).
pub(crate) fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub(crate) fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}
