//! MCP over this server's runs (issue 40): `capfleet-mcp`'s tools ([`Fleets`]) acting
//! exactly as the API's routes do — `start_run` is a submission ([`super::start`]),
//! `answer_ask` the route's answer (checked against the question, journaled as
//! `remote:<caller>`), `cancel_run` the route's cancel — served two ways:
//!
//! - at [`PATH`] over Streamable HTTP ([`router`]), behind the origin checks and the
//!   bearer-token auth every route passes; the token's name and role reach the tools
//!   on the request ([`Caller`]), and each tool checks the role its route would need
//!   (`read`; `run` to start and cancel; `approve` to answer). A fleet file named by
//!   path is refused: a server takes a fleet's text, as `POST /v1/runs` does.
//! - on stdio for `capfleet mcp` ([`stdio`]): a server of its own over the working
//!   directory's `.capfleet/runs` (no HTTP, no token: its caller is the local user,
//!   who may everything `capfleet run` may, fleet files by path included). The client
//!   closing stdin, or SIGTERM/SIGINT, cancels what still runs and waits for it.

mod fleets;
mod local;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use capfleet_mcp::{Access, Caller, FleetTools, Fleets, McpMetrics};

use super::auth::{self, Role};
use super::state::Server;
use fleets::ServerFleets;
pub use local::{Local, stdio};

/// Where the server serves MCP.
pub(crate) use super::auth::MCP_PATH as PATH;

/// A token's role as what the tools may.
fn access(role: Role) -> Access {
    match role {
        Role::Read => Access::Read,
        Role::Run => Access::Run,
        Role::Approve | Role::Admin => Access::Approve,
    }
}

/// The caller the auth found, handed to the tools on the request.
async fn hand_caller(mut request: Request, next: Next) -> Response {
    if let Some(c) = request.extensions().get::<auth::Caller>() {
        let caller = Caller {
            name: c.name.clone(),
            may: access(c.role),
        };
        request.extensions_mut().insert(caller);
    }
    next.run(request).await
}

/// `/mcp`: the tools over Streamable HTTP (the caller's auth layered on by
/// [`super::routes`]), counted into the server's registry.
pub(crate) fn router(server: Arc<Server>, metrics: McpMetrics) -> Router<Arc<Server>> {
    let fleets: Arc<dyn Fleets> = Arc::new(ServerFleets::new(server, false));
    let service =
        capfleet_mcp::http_service(move || FleetTools::new(fleets.clone(), None, metrics.clone()));
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn(hand_caller))
}
