//! Random-input tests of every decoder that reads untrusted input (issue 18, point 5):
//! what agents write (stream-json frames and the Claude control protocol, `codex exec`
//! JSONL, ACP `session/update`s, a terminal's bytes), what A2A peers send (SSE events,
//! agent cards), what people and clients write (manifests, CAP events, session configs,
//! fleet.toml, `capfleet serve`'s request bodies, the last two through the app's
//! `capfleet::fuzzing`), each fed the way the engine feeds it (bytes through the
//! bounded line reader, the screen, the mapper).
//!
//! A [`Target`] names one decoder, the real inputs it starts from (recorded sessions,
//! the spec's fixtures, the shipped manifests) and the words of its format. Its inputs
//! ([`input`]) are proptest strategies: those seeds mutated byte- and token-wise, JSON
//! built from the dictionary, and raw bytes. [`check::run`] holds a decoder to three
//! promises on each input — no panic, a bound on the heap it holds at once
//! ([`alloc::Counting`], the global allocator of the test binary and the bench), a bound
//! on the time it takes — plus the target's own properties (an encoder's round trip,
//! every byte accounted for). A failing input is shrunk to the smallest that still
//! fails and saved under `fuzz/regressions/<target>/`, which the suite replays for ever
//! ([`check::replay`]).
//!
//! Stable Rust only: cargo-fuzz needs a nightly toolchain; these are Hypothesis-style
//! property tests, run for a bounded number of cases in the suite
//! (`CAPFLEET_FUZZ_CASES`) and for millions of inputs by the bench
//! (`cargo bench -p capfleet-fuzz`).

pub mod alloc;
pub mod check;
pub mod input;
pub mod targets;

pub use targets::{Framing, Target};
