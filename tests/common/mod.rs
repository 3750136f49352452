//! Shared helpers for the root package's integration tests (`mod common;`).
//!
//! - [`chat`]: `capfleet chat <agent> --json` runs built for a test, their events,
//!   the no-survivor check (on top of [`chat_json`]).
//! - [`fake_llm`]: the scripted fake LLM (`tests/support/fake_llm.py`) as a
//!   RAII handle, plus a tiny blocking HTTP client.
//! - [`chat_json`]: any prepared `capfleet chat --json` command run to the end
//!   (bounded, optional SIGINT and stdin), its NDJSON read.
//! - [`peers`]: the pinned third-party peers (`tests/support/install_peers.sh`)
//!   and their offline environment (`tests/support/peer_env.sh`).
//! - [`procs`]: `/proc` walks for orphan checks (descendants, process groups,
//!   env markers, RSS) and `wait_until`.
//! - [`terminal`]: `capfleet` with a human at a terminal (a PTY) answering its
//!   questions.
//!
//! Every test binary compiles this module on its own and uses only part of it.
#![allow(dead_code, unused_imports)]

pub mod chat;
pub mod chat_json;
pub mod fake_llm;
pub mod otel;
pub mod peers;
pub mod procs;
pub mod repo;
pub mod terminal;

pub use chat_json::{of_kind, of_type, run_chat, texts};
pub use fake_llm::{FakeLlm, http};
pub use peers::{claude_env, claude_env_in, peer, peer_env, try_peer};
pub use procs::{
    EnvMarker, descendants, is_alive, kill_group, processes_in_group, processes_with_env_marker,
    rss_kib, wait_until,
};

use std::path::PathBuf;

/// The root package's directory (where `tests/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/support/<name>`.
pub fn support(name: &str) -> PathBuf {
    repo_root().join("tests/support").join(name)
}
