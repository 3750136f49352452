//! What a client watching the whole server reads (the web console's approvals page,
//! its header): who its token is, and the open questions of every run at once.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;

use super::asks::{AllAsks, RunAsk};
use super::auth::Caller;
use super::error::json_response;
use super::state::Server;

/// The caller, as the server knows its token.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Me {
    /// The token's name (`anonymous` on a server without tokens).
    pub name: String,
    /// `read`, `run`, `approve` or `admin`.
    pub role: String,
}

/// Who the token is: its name and role (the secret is never said back).
#[utoipa::path(get, path = "/v1/me", operation_id = "whoami", tag = "server",
    responses((status = 200, description = "The token's name and role", body = Me)))]
pub(crate) async fn me(Extension(caller): Extension<Caller>) -> Response {
    json_response(
        StatusCode::OK,
        &Me {
            name: caller.name,
            role: caller.role.as_str().to_owned(),
        },
    )
}

/// The permission requests and asks every run of this server waits on, oldest first.
#[utoipa::path(get, path = "/v1/asks", operation_id = "list_all_asks", tag = "asks",
    responses((status = 200, description = "The open questions of every run, oldest first", body = AllAsks)))]
pub(crate) async fn asks(State(server): State<Arc<Server>>) -> Response {
    let mut asks: Vec<RunAsk> = server
        .all()
        .iter()
        .flat_map(|e| {
            e.asks.list().into_iter().map(|ask| RunAsk {
                run: e.id.clone(),
                fleet: e.fleet.clone(),
                ask,
            })
        })
        .collect();
    asks.sort_by_key(|a| a.ask.created_ms);
    json_response(StatusCode::OK, &AllAsks { asks })
}
