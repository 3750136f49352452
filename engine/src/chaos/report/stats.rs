//! Recovery times summarised: how many, the median, the 95th percentile and the worst
//! (nearest rank: a percentile is one of the measured values, never an interpolation).

use serde::Serialize;

/// A set of durations in milliseconds, summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Mttr {
    /// How many were measured (the others had nothing to measure to).
    pub count: usize,
    pub p50_ms: Option<u64>,
    pub p95_ms: Option<u64>,
    pub max_ms: Option<u64>,
}

impl Mttr {
    /// The summary of `samples` (in any order).
    pub fn of(samples: impl IntoIterator<Item = u64>) -> Mttr {
        let mut v: Vec<u64> = samples.into_iter().collect();
        v.sort_unstable();
        Mttr {
            count: v.len(),
            p50_ms: rank(&v, 50),
            p95_ms: rank(&v, 95),
            max_ms: v.last().copied(),
        }
    }
}

/// The nearest-rank `pct` percentile of sorted `v`.
fn rank(v: &[u64], pct: usize) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let n = (pct * v.len()).div_ceil(100).max(1);
    v.get(n - 1).copied()
}

impl std::fmt::Display for Mttr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.p50_ms, self.p95_ms, self.max_ms) {
            (Some(p50), Some(p95), Some(max)) => {
                write!(
                    f,
                    "p50 {p50} ms, p95 {p95} ms, max {max} ms (n={})",
                    self.count
                )
            }
            _ => f.write_str("-"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_are_measured_values() {
        let m = Mttr::of((1..=100).rev());
        assert_eq!(
            (m.count, m.p50_ms, m.p95_ms, m.max_ms),
            (100, Some(50), Some(95), Some(100))
        );
        let one = Mttr::of([7]);
        assert_eq!(
            (one.p50_ms, one.p95_ms, one.max_ms),
            (Some(7), Some(7), Some(7))
        );
        assert_eq!(Mttr::of([]), Mttr::default());
        assert_eq!(Mttr::of([]).to_string(), "-");
        assert_eq!(Mttr::of([3, 1, 2]).p50_ms, Some(2));
    }
}
