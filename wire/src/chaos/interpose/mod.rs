//! The byte-level interposer: faults put on the bytes between an agent and the
//! driver that reads it, so that every binding gets them the same way.
//!
//! A session of a chaos run has one [`ByteFaults`] handle (cheap to clone, kept on its
//! [`LaunchSpec`](crate::driver::LaunchSpec) across restarts, seeded by the chaos
//! scheduler). The one place every pipe driver spawns its agent
//! ([`LaunchSpec::spawn_piped`](crate::driver::LaunchSpec::spawn_piped): stream-json,
//! `codex exec`, ACP) and the PTY engine wrap the agent's output in a [`Reader`] and
//! its input in a [`Writer`] — only when the launch carries a handle: a run without
//! `[chaos]` has no interposer at all (both are then the bare pipe, one `match` per
//! poll).
//!
//! [`ByteFaults::inject`] arms a [`ByteFault`]; the installed interposer applies it to
//! what passes next:
//!
//! - `garble`: a fraction of the bytes of the next N frames replaced by random bytes
//!   (never a line feed, so a line binding's framing holds and each garbled line is one
//!   malformed frame);
//! - `truncate`: the next N frames cut at a random point (a line keeps its line feed);
//! - `slow`: the output throttled to N bytes/s for a while;
//! - `stall_stdin`: the driver's writes to the agent held for a while (the agent
//!   "stops reading": the driver's write waits as on a full pipe).
//!
//! A frame is a line on a line binding ([`FrameMode::Lines`]) and one read on a
//! terminal ([`FrameMode::Reads`]); a fault starts at the next frame. Each agent
//! process's first frame — its handshake: stream-json's `init`, the answer to ACP's
//! `initialize`, a terminal's first read — is spared: a fault garbles the agent's
//! conversation, and an agent whose handshake is lost never comes up (its result
//! frames stray before an `init`), a start failure rather than the fault's effect,
//! which would also depend on whether the agent had said it before the fault was
//! armed. The randomness
//! (which bytes, which cut) comes from the seed given at construction, drawn in the
//! order the bytes pass, so a deterministic agent gets the same faults from the same
//! seed.
//!
//! Every injection is a `chaos.byte_fault` span (a child of the span current at the
//! injection: the scheduler's fault span) that lasts until the fault is spent, with
//! what it did (`bytes_garbled`, `frames`); the counts are kept in [`ByteStats`] and,
//! when the run serves metrics, in [`metrics::IoMetrics`].

pub(crate) mod metrics;
mod read;
mod state;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) use read::Reader;
pub(crate) use write::Writer;

use self::metrics::IoMetrics;
use self::state::State;
use crate::sync::lock;

/// A fault on the bytes between an agent and its driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ByteFault {
    /// The agent's output throttled to `bytes_per_sec` for `for_ms`.
    Slow { bytes_per_sec: u64, for_ms: u64 },
    /// `fraction` (0 to 1) of the bytes of the next `frames` frames corrupted.
    Garble { fraction: f64, frames: u32 },
    /// The next `frames` frames cut at a random point.
    Truncate { frames: u32 },
    /// The driver's writes to the agent held for `for_ms`.
    StallStdin { for_ms: u64 },
}

impl ByteFault {
    /// As a span and the metrics name it (the chaos spec's words).
    pub fn kind(&self) -> &'static str {
        match self {
            ByteFault::Slow { .. } => "slow",
            ByteFault::Garble { .. } => "garble",
            ByteFault::Truncate { .. } => "truncate",
            ByteFault::StallStdin { .. } => "stall_stdin",
        }
    }
}

/// What a frame is, for the frame faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameMode {
    /// A line (`\n`-terminated): stream-json, `codex exec`, ACP.
    Lines,
    /// One read of the terminal: the PTY.
    Reads,
}

/// What the interposer of one session did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteStats {
    /// Faults injected.
    pub injected: u64,
    /// Bytes replaced by `garble`.
    pub bytes_garbled: u64,
    /// Frames `garble` touched.
    pub frames_garbled: u64,
    /// Frames `truncate` cut.
    pub frames_truncated: u64,
    /// Bytes `truncate` dropped.
    pub bytes_cut: u64,
    /// Reads `slow` delayed.
    pub slowed_reads: u64,
    /// Writes to the agent `stall_stdin` held.
    pub stalled_writes: u64,
}

/// The byte faults of one session: a cheap handle, cloned into each interposer the
/// session's driver installs (one per agent process).
#[derive(Clone)]
pub struct ByteFaults {
    shared: Arc<Shared>,
}

struct Shared {
    /// The session's URN, for spans, logs and metrics.
    urn: String,
    /// A fault is armed or in effect: the interposer's fast path reads only this.
    armed: AtomicBool,
    state: std::sync::Mutex<State>,
    metrics: Option<IoMetrics>,
}

impl std::fmt::Debug for ByteFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteFaults")
            .field("urn", &self.shared.urn)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ByteFaults {
    /// The handle of session `urn`, its randomness from `seed`.
    pub fn new(urn: impl Into<String>, seed: u64) -> ByteFaults {
        Self::build(urn.into(), seed, None)
    }

    /// [`ByteFaults::new`], counting into the run's metrics.
    pub fn with_metrics(urn: impl Into<String>, seed: u64, metrics: IoMetrics) -> ByteFaults {
        Self::build(urn.into(), seed, Some(metrics))
    }

    fn build(urn: String, seed: u64, metrics: Option<IoMetrics>) -> ByteFaults {
        ByteFaults {
            shared: Arc::new(Shared {
                urn,
                armed: AtomicBool::new(false),
                state: std::sync::Mutex::new(State::new(seed)),
                metrics,
            }),
        }
    }

    /// Arms `fault`: the session's interposer applies it to what passes next (a
    /// frame fault from the next frame on, a timed one from now). A fault of the same
    /// kind still in effect is replaced.
    pub fn inject(&self, fault: ByteFault) {
        let span = tracing::info_span!(
            "chaos.byte_fault",
            kind = fault.kind(),
            session = %self.shared.urn,
            bytes_garbled = tracing::field::Empty,
            frames = tracing::field::Empty,
        );
        tracing::debug!(parent: &span, ?fault, "byte fault armed");
        if let Some(m) = &self.shared.metrics {
            m.fault(&self.shared.urn, fault.kind());
        }
        let mut state = lock(&self.shared.state);
        state.arm(fault, span);
        self.shared.armed.store(true, Ordering::Release);
    }

    /// What the interposer did so far.
    pub fn stats(&self) -> ByteStats {
        lock(&self.shared.state).stats
    }

    /// The agent's output through the interposer.
    pub fn reader<R>(&self, inner: R, mode: FrameMode) -> Reader<R> {
        Reader::interposed(inner, self.clone(), mode)
    }

    /// The agent's input through the interposer.
    pub fn writer<W>(&self, inner: W) -> Writer<W> {
        Writer::interposed(inner, self.clone())
    }

    fn armed(&self) -> bool {
        self.shared.armed.load(Ordering::Acquire)
    }

    /// Runs `f` on the state, then says whether anything is still armed.
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = lock(&self.shared.state);
        let before = state.stats;
        let out = f(&mut state);
        self.shared.armed.store(state.is_armed(), Ordering::Release);
        if let Some(m) = &self.shared.metrics {
            m.bytes(&self.shared.urn, &before, &state.stats);
        }
        out
    }
}

/// The output of an agent: `reader` through `faults` when there are any, else bare.
pub(crate) fn reader<R>(faults: Option<&ByteFaults>, inner: R, mode: FrameMode) -> Reader<R> {
    match faults {
        Some(f) => f.reader(inner, mode),
        None => Reader::Direct(inner),
    }
}

/// The input of an agent: `writer` through `faults` when there are any, else bare.
pub(crate) fn writer<W>(faults: Option<&ByteFaults>, inner: W) -> Writer<W> {
    match faults {
        Some(f) => f.writer(inner),
        None => Writer::Direct(inner),
    }
}

#[cfg(test)]
mod tests;
