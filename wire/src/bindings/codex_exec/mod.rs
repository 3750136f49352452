//! The `codex exec --json` binding (a capfleet extension, `fast_path.x-codex_exec`):
//! the pure protocol layer. One Codex process per turn: `codex exec --json … -`
//! reads its prompt from stdin (closed once written, so Codex never waits on it) and
//! writes JSONL events; the next turn is `codex exec --json … resume <thread id> -`.
//! No process, no actor here: the driver owns the child and feeds its stdout lines to
//! [`CodexExecMapper::on_line`].
//!
//! - [`argv`]: the command line from manifest + session config + resume id.
//! - [`mapper`]: the per-process state machine (events → [`Output`]s): thread id,
//!   turn ends, errors, usage as per-turn deltas of Codex's cumulative counts.
//! - `items`: one `item.*` event (messages, reasoning, commands, file changes, MCP
//!   calls, web searches, todo lists) as CAP events, deduplicated across updates.

pub(crate) mod argv;
mod items;
pub(crate) mod mapper;

pub(crate) use argv::build_argv;
pub(crate) use mapper::Output;
pub use mapper::{CodexExecMapper, Totals};
