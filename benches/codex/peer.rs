//! The test suite's peer helpers, included as they are: the scripted fake LLM
//! (`tests/support/fake_llm.py`), the pinned peers' installer and offline
//! environment, the shipped Codex manifest per binding.

use std::path::PathBuf;

#[allow(dead_code)]
#[path = "../../tests/all/common/codex_manifest.rs"]
mod codex_manifest;
#[allow(dead_code)]
#[path = "../../tests/all/common/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code)]
#[path = "../../tests/all/common/peers.rs"]
mod peers;

pub(crate) use codex_manifest::{Via, manifest};
pub(crate) use fake_llm::FakeLlm;
pub(crate) use peers::{peer, peer_env};

/// `tests/support/<name>`.
fn support(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(name)
}
