//! The helpers every module of the test binary shares (`use crate::common;`).
//!
//! - [`a2a`]: A2A peers (the sim's `--mode a2a`, the SDK test agents), their
//!   manifest, `capfleet chat` driving them.
//! - [`a2a_peer`]: an A2A peer process killed on drop, and the remote manifest naming
//!   it (shared with the A2A and chaos benches).
//! - [`browser`]: a headless chromium under WebDriver (chromedriver), its
//!   screenshots, and no process of it left behind.
//! - [`capfleet`](mod@capfleet): the binary under test ([`BIN`]), the `capfleet(dir)`
//!   command and its registry sandbox, a run's journal read back.
//! - [`guide`]: the user guide's ` ```console ` examples run as written.
//! - [`serve`]: `capfleet serve` on a free port, requests to it, its event stream
//!   read by curl, its OpenAPI document's operations.
//! - [`speak`]: `capfleet speak` as the Claude Agent SDK's Claude Code, and the SDK's
//!   two-turn driver.
//! - [`console`]: the web console in a [`browser`]: its elements by `data-testid`,
//!   logging in, its routes.
//! - [`sim`]: the simulator as the test agent (library session specs, fleet entries).
//! - [`chat`]: `capfleet chat <agent> --json` runs built for a test, their events,
//!   the no-survivor check (on top of [`chat_json`]).
//! - [`claude_fleet`]: `capfleet run` of a fleet with Claude Code's offline environment.
//! - [`claude_stream`]: the real Claude Code run directly over stream-json, turn by
//!   turn.
//! - [`chaos`]: `capfleet chat sim` on the chaos scripts, read live with deadlines.
//! - [`chaos_run`]: chaos runs of sim fleets (`capfleet run --chaos`, the soak
//!   fleet), their `chaos` records and their report.
//! - [`checker`]: the stop-anywhere checker (issue 36): a fleet stopped at seeded
//!   moments, resumed to its end, compared with an uninterrupted run (shared with the
//!   `durable` bench); [`checker_merge`] its merge series (`capfleet merge` killed).
//! - [`disk`]: disks that fail (a full tmpfs, a read-only one, `/dev/full`).
//! - [`fake_llm`]: the scripted fake LLM (`tests/support/fake_llm.py`) as a
//!   RAII handle, plus a tiny blocking HTTP client.
//! - [`chat_json`]: any prepared `capfleet chat --json` command run to the end
//!   (bounded, optional SIGINT and stdin), its NDJSON read.
//! - [`nats`]: the real `nats-server` (one JetStream node) and `capfleet worker`s
//!   pulling runs from it, `capfleet submit --nats`.
//! - [`otel`]: an in-process OTLP collector and the span tree it received.
//! - [`peers`]: the pinned third-party peers (`tests/support/install_peers.sh`)
//!   and their offline environment (`tests/support/peer_env.sh`); [`codex_manifest`]
//!   the shipped Codex manifest per binding (both shared with the codex bench).
//! - [`procs`]: `/proc` walks for orphan checks (descendants, process groups,
//!   env markers, RSS and its peak) and `wait_until`.
//! - [`repo`]: a git repository (or plain directory) to run fleets in.
//! - [`stop_fleet`]: a fleet whose agents hang, for `capfleet run` to be stopped
//!   (shared with the shutdown bench).
//! - [`terminal`]: `capfleet` with a human at a terminal (a PTY) answering its
//!   questions.
//! - [`tmux`]: a command in a real terminal (a tmux session of a given width) and
//!   its screen (`capture-pane`).
//! - [`webhook`]: a real HTTP receiver of capfleet's webhook notices (Python's
//!   http.server), checking their signatures.
//! - [`wires`]: a fleet session on each simulator wire whose agent leaves a
//!   grandchild behind.
//! - [`tree`]: a supervision tree with a journal, for library-level tests; [`ask`]
//!   a turn of one of its sessions.

pub(crate) mod a2a;
pub(crate) mod a2a_peer;
pub(crate) mod browser;
pub(crate) mod capfleet;
pub(crate) mod chaos;
pub(crate) mod chaos_run;
pub(crate) mod chat;
pub(crate) mod chat_json;
pub(crate) mod checker;
pub(crate) mod checker_merge;
pub(crate) mod claude_fleet;
pub(crate) mod claude_stream;
pub(crate) mod codex;
pub(crate) mod codex_manifest;
pub(crate) mod console;
pub(crate) mod disk;
pub(crate) mod durable;
pub(crate) mod expose;
pub(crate) mod fake_llm;
pub(crate) mod guide;
pub(crate) mod mcp;
pub(crate) mod nats;
pub(crate) mod otel;
pub(crate) mod peers;
pub(crate) mod phoenix;
pub(crate) mod procs;
pub(crate) mod repo;
pub(crate) mod scraped;
pub(crate) mod serve;
pub(crate) mod sim;
pub(crate) mod speak;
pub(crate) mod stop_fleet;
pub(crate) mod terminal;
pub(crate) mod tmux;
pub(crate) mod webhook;
pub(crate) mod wires;

pub(crate) use capfleet::{
    BIN, capfleet, journal_records, latest_run, run_ended, run_journal, sandbox, sandboxed,
};
pub(crate) use chat_json::{of_kind, of_type, run_chat, texts};
pub(crate) use claude_fleet::run_fleet_with_claude;
pub(crate) use fake_llm::{FakeLlm, http};
pub(crate) use peers::{claude_env, claude_env_in, claude_env_on_path, peer, peer_env, try_peer};
pub(crate) use procs::{
    EnvMarker, descendants, hwm_kib, is_alive, kill_group, output_within, processes_in_group,
    rss_kib, wait_until, wait_within,
};

use std::path::PathBuf;

use std::time::Duration;

use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::{SessionError, SessionMsg, TurnResult};
use ractor::ActorRef;
use ractor::rpc::CallResult;

/// A supervision tree for fleet `fleet` with defaults (no policy, budget, human or
/// telemetry) journaling to `journal`.
pub(crate) async fn tree(fleet: &str, journal: &std::path::Path) -> Orchestrator {
    Orchestrator::start(RootArgs {
        journal: Some(journal.to_path_buf().into()),
        ..RootArgs::new(fleet)
    })
    .await
    .expect("the supervision tree starts")
}

/// The root package's directory (where `tests/` lives).
pub(crate) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A finished process's output, once it is known it succeeded (else the test fails
/// with its exit code and stderr).
pub(crate) fn succeeded(out: std::process::Output) -> std::process::Output {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `tests/support/<name>`.
pub(crate) fn support(name: &str) -> PathBuf {
    repo_root().join("tests/support").join(name)
}

/// One turn of session `s` on `prompt`, answered within 20 s (else the test fails).
pub(crate) async fn ask(s: &ActorRef<SessionMsg>, prompt: &str) -> TurnResult {
    match turn(s, prompt).await {
        Ok(r) => r,
        Err(e) => panic!("ask did not complete: {e:?}"),
    }
}

/// The session's answer to a turn on `prompt` (its result or the error it refused or
/// failed the turn with), within 20 s (else the test fails).
pub(crate) async fn turn(
    s: &ActorRef<SessionMsg>,
    prompt: &str,
) -> Result<TurnResult, SessionError> {
    let prompt = prompt.to_owned();
    match s
        .call(
            |reply| SessionMsg::Ask {
                prompt,
                traceparent: None,
                reply,
            },
            Some(Duration::from_secs(20)),
        )
        .await
    {
        Ok(CallResult::Success(r)) => r,
        other => panic!("the session did not answer: {other:?}"),
    }
}
