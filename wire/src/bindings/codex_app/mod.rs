//! The `codex app-server` binding (a capfleet extension, `fast_path.x-codex_app_server`):
//! the pure protocol layer. One long-lived `codex app-server` per session speaks
//! JSON-RPC over its stdio, one message per line and no `jsonrpc` member; a session
//! is a Codex thread (`thread/start`, `thread/resume` after a restart), a turn is
//! `turn/start`, ended by the `turn/completed` notification. No process here: the
//! driver (`driver/codex_app.rs`) owns the child and the requests in flight.
//!
//! - [`frames`]: the messages, typed after the pinned Codex's own schema;
//! - [`mapper`]: lines → [`Output`]s (events, turn ends, responses, approvals);
//! - [`approvals`]: the server's requests → `cap.permission.request`, and back;
//! - `items`: one thread item or delta as CAP events.
//!
//! Why not the ACP SDK's JSON-RPC connection (the other long-lived JSON-RPC binding):
//! it writes the `jsonrpc` member and routes ACP's methods through its own typed
//! handlers; this wire is small enough to map by hand, on the shared line pump
//! (`driver/pump.rs`) that bounds every line and reports oversize ones.

pub mod approvals;
pub mod frames;
mod items;
pub mod mapper;

pub use approvals::{Approval, ApprovalKind};
pub use mapper::{AppMapper, MapperStats, Output};
