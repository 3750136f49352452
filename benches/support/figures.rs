//! The arithmetic of the benches' figures: the fastest of timed passes after a
//! warm-up, durations in ms, ratios, MB. Self-contained: the benches that do not use
//! [`super`]'s fleet helpers include this file alone.

use std::time::{Duration, Instant};

/// `f` once to warm up, then the fastest of `passes` timed runs of it.
pub(crate) fn best_of(passes: usize, mut f: impl FnMut()) -> Duration {
    f();
    (0..passes)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one pass")
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
