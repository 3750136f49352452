//! The faults armed on one session and the seeded randomness they draw from: what
//! the interposers of the session's successive agent processes consult.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use super::{ByteFault, ByteStats};

/// A frame fault in effect: frames still to hit, and its span.
struct Frames {
    left: u32,
    span: tracing::Span,
    /// `garble`'s fraction (unused by `truncate`).
    fraction: f64,
}

/// A timed fault in effect until `until`.
struct Timed {
    until: Instant,
    /// `slow`'s rate (unused by `stall_stdin`).
    bytes_per_sec: u64,
}

/// What happens to the frame that starts now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum FramePlan {
    Clean,
    /// Replace each byte with this probability.
    Garble(f64),
    /// Keep this many bytes, drop the rest of the frame.
    Cut(usize),
}

pub(super) struct State {
    pub(super) rng: ChaCha8Rng,
    pub(super) stats: ByteStats,
    garble: Option<Frames>,
    truncate: Option<Frames>,
    slow: Option<Timed>,
    stall: Option<Timed>,
}

impl State {
    pub(super) fn new(seed: u64) -> State {
        State {
            rng: ChaCha8Rng::seed_from_u64(seed),
            stats: ByteStats::default(),
            garble: None,
            truncate: None,
            slow: None,
            stall: None,
        }
    }

    pub(super) fn arm(&mut self, fault: ByteFault, span: tracing::Span) {
        self.stats.injected += 1;
        let now = Instant::now();
        match fault {
            ByteFault::Garble { fraction, frames } => {
                self.garble = (frames > 0).then_some(Frames {
                    left: frames,
                    span,
                    fraction: fraction.clamp(0.0, 1.0),
                });
            }
            ByteFault::Truncate { frames } => {
                self.truncate = (frames > 0).then_some(Frames {
                    left: frames,
                    span,
                    fraction: 0.0,
                });
            }
            ByteFault::Slow {
                bytes_per_sec,
                for_ms,
            } => {
                self.slow = Some(Timed {
                    until: now + Duration::from_millis(for_ms),
                    bytes_per_sec: bytes_per_sec.max(1),
                });
            }
            ByteFault::StallStdin { for_ms } => {
                self.stall = Some(Timed {
                    until: now + Duration::from_millis(for_ms),
                    bytes_per_sec: 0,
                });
            }
        }
    }

    /// Anything armed or in effect (timed faults past their end are dropped here).
    pub(super) fn is_armed(&mut self) -> bool {
        let now = Instant::now();
        if self.slow.as_ref().is_some_and(|t| t.until <= now) {
            self.slow = None;
        }
        if self.stall.as_ref().is_some_and(|t| t.until <= now) {
            self.stall = None;
        }
        self.garble.is_some()
            || self.truncate.is_some()
            || self.slow.is_some()
            || self.stall.is_some()
    }

    /// A frame starts whose first `visible` bytes (its line feed excluded) are at
    /// hand: what to do with it. Frames too short to corrupt (empty lines; one byte
    /// for a cut) are left alone and not counted.
    pub(super) fn begin_frame(&mut self, visible: usize) -> FramePlan {
        if visible >= 2
            && let Some(t) = &mut self.truncate
        {
            let keep = self.rng.random_range(1..visible);
            t.left -= 1;
            self.stats.frames_truncated += 1;
            let done = t.left == 0;
            if done && let Some(t) = self.truncate.take() {
                t.span.record("frames", self.stats.frames_truncated);
            }
            return FramePlan::Cut(keep);
        }
        if visible >= 1
            && let Some(g) = &mut self.garble
        {
            g.left -= 1;
            let fraction = g.fraction;
            self.stats.frames_garbled += 1;
            if g.left == 0
                && let Some(g) = self.garble.take()
            {
                g.span.record("frames", self.stats.frames_garbled);
                g.span.record("bytes_garbled", self.stats.bytes_garbled);
            }
            return FramePlan::Garble(fraction);
        }
        FramePlan::Clean
    }

    /// `garble` each byte of `bytes` with probability `fraction`: a random byte
    /// other than itself and a line feed.
    pub(super) fn garble(&mut self, bytes: &mut [u8], fraction: f64, keep_newlines: bool) {
        for b in bytes {
            if (keep_newlines && *b == b'\n') || !self.rng.random_bool(fraction) {
                continue;
            }
            let mut new = self.rng.random::<u8>();
            while new == *b || new == b'\n' {
                new = self.rng.random::<u8>();
            }
            *b = new;
            self.stats.bytes_garbled += 1;
        }
    }

    /// `slow` in effect: the bytes one read may take now (about 50 ms' worth).
    pub(super) fn slow_budget(&self) -> Option<(usize, u64)> {
        let t = self.slow.as_ref().filter(|t| t.until > Instant::now())?;
        let per_read = (t.bytes_per_sec / 20).clamp(1, 64 << 10);
        Some((usize::try_from(per_read).unwrap_or(1), t.bytes_per_sec))
    }

    /// `stall_stdin` in effect: until when.
    pub(super) fn stalled_until(&self) -> Option<Instant> {
        self.stall
            .as_ref()
            .map(|t| t.until)
            .filter(|u| *u > Instant::now())
    }
}
