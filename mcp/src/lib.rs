//! capfleet over MCP (issue 40), on the official Rust SDK (`rmcp`) at the protocol
//! revision it negotiates (2026-07-28, and the earlier ones its clients ask for): the
//! tools an MCP client (Claude Code, Claude Desktop, an SDK) drives fleets with, and
//! a run's journal and artifacts as resources.
//!
//! | file | what it does |
//! |---|---|
//! | `types.rs` | every tool's input and output (their JSON Schemas, via `schemars`) |
//! | `fleets.rs` | what the tools act on ([`Fleets`], implemented by `capfleet-server` over its runs), who calls ([`Caller`], [`Access`]), refusals ([`ToolError`]) |
//! | `tools.rs` | the server: the tools, the accounting around each call (caller, `execute_tool` span, metric, journal record) |
//! | `resources.rs` | `capfleet://runs/<run>/journal` and `…/artifacts/<path>` |
//! | `journal.rs` | a call journaled in the run it touches, off the caller's path ([`CallSlot`]; [`append_later`], a group commit, for a run not live here) |
//! | `metrics.rs` | `mcp_tool_calls` by tool and result |
//!
//! Two transports, one [`FleetTools`]: stdio for `capfleet mcp` ([`serve_stdio`]:
//! the local user may everything, like `capfleet run`), Streamable HTTP inside
//! `capfleet serve` at `/mcp` ([`http_service`]: behind the server's origin checks
//! and bearer tokens, each request's caller the token's name and role). Every tool
//! returns at once but `wait_run`, the one long operation: it sends progress
//! notifications while it waits (the 2026-07-28 revision moved tasks to an
//! extension, SEP-2663, that no tool here needs: a run is itself the long-lived
//! object, followed by id).

mod fleets;
mod journal;
mod metrics;
mod resources;
mod tools;
pub mod types;

use std::sync::Arc;

pub use fleets::{Access, Caller, Fleets, Reply, ToolError};
pub use journal::{CallSlot, append_later, late_calls_written};
pub use metrics::McpMetrics;
pub use tools::FleetTools;

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("the MCP connection failed: {0}")]
    Connection(String),
}

/// Serve `tools` on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(tools: FleetTools) -> Result<(), ServeError> {
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    running
        .waiting()
        .await
        .map(|_reason| ())
        .map_err(|e| ServeError::Connection(e.to_string()))
}

/// The tools over Streamable HTTP, a service to mount at `/mcp` behind the caller's
/// own host, origin and token checks (rmcp's are off: the server's apply). Stateless:
/// no session is kept between requests (a run is the state, named by its id).
pub fn http_service(
    make: impl Fn() -> FleetTools + Send + Sync + 'static,
) -> StreamableHttpService<FleetTools, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    StreamableHttpService::new(move || Ok(make()), Arc::default(), config)
}
