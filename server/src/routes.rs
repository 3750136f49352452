//! The HTTP API: its routes, the checks every request passes first
//! ([`super::origin`]: no web page but the console), the authentication every one
//! but the probes passes ([`authenticate`]), the request metrics, and the handlers of runs — submit, list,
//! show, cancel, the asks; artifacts are [`super::artifacts`]. Events are [`super::events`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use capfleet_engine::telemetry::metrics::CONTENT_TYPE as METRICS_TYPE;
use serde::Deserialize;
use tracing::Instrument as _;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::asks::{AnswerRequest, Answered, AskList};
use super::auth::{Caller, Role, bearer};
use super::error::{ApiError, ErrorBody, json_response};
use super::extract::{ApiPath, ApiQuery, json_body};
use super::metrics::RequestLabels;
use super::origin;
use super::state::{Cancelled, RunState, Server};
use super::view::{Created, RunPage, RunView, Status};
use super::{api, artifacts, changes, console, events, graph, overview, validate};
use capfleet_app::fleet::RunDir;

/// Runs listed per page by default, and at most.
const PAGE: usize = 50;
const PAGE_MAX: usize = 500;

/// Every route of the server, and the OpenAPI document they make (see [`super::api`]);
/// `a2a`, the exposed agents' routes (their own auth, `super::a2a`). Every request
/// first passes the server's origin checks ([`super::origin`]), before its body is
/// read.
pub(crate) fn router(server: Arc<Server>, a2a: Router) -> Router {
    let origins = server.origins.clone();
    let (guarded, mut doc) = OpenApiRouter::with_openapi(api::root())
        .routes(routes!(submit, list))
        .routes(routes!(show))
        .routes(routes!(cancel))
        .routes(routes!(events::stream))
        .routes(routes!(artifacts::list))
        .routes(routes!(artifacts::one))
        .routes(routes!(artifacts::diff_all))
        .routes(routes!(artifacts::diff_one))
        .routes(routes!(list_asks))
        .routes(routes!(answer_ask))
        .routes(routes!(graph::show))
        .routes(routes!(changes::show))
        .routes(routes!(validate::validate))
        .routes(routes!(overview::asks))
        .routes(routes!(overview::me))
        .routes(routes!(metrics))
        .split_for_parts();
    api::guard(&mut doc);
    // The probes are open: a load balancer or systemd asks them without a token; so
    // is the API's description.
    let (probes, mut open) = OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(api::openapi))
        .split_for_parts();
    api::open(&mut open);
    doc.merge(open);
    // `/mcp` passes the same auth; each tool checks the caller's role itself.
    let mcp = super::mcp::router(server.clone(), server.metrics.mcp.clone());
    let guarded = guarded
        .merge(mcp)
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(server.clone(), authenticate));
    let app: Router = probes
        .layer(Extension(api::json(&doc)))
        .merge(guarded)
        .with_state(server.clone());
    // The console's page and assets are open: they hold nothing of any run (it
    // reads those from the API above, with the user's token).
    app.merge(a2a)
        .merge(console::router())
        .layer(middleware::from_fn_with_state(origins, origin::guard))
        .layer(middleware::from_fn_with_state(server, count))
}

/// Each request in an `http.request` span (method, route, status) and counted by
/// method, route and status. The route is the pattern it matched (`/v1/runs/{id}`),
/// never a path with a run id in it; `other` for a path no route matches.
async fn count(State(server): State<Arc<Server>>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("other", MatchedPath::as_str)
        .to_owned();
    let span = tracing::info_span!(
        "http.request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    server
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .inc();
    response
}

/// Who calls, by their bearer token, and whether their role may: 401 (after a delay
/// that grows with an address's recent failures) or 403.
async fn authenticate(
    State(server): State<Arc<Server>>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .cloned();
    let caller = match identify(&server, request.headers(), peer).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let needed = Role::needed(request.method(), request.uri().path());
    if caller.role < needed {
        return ApiError::Forbidden {
            needed: needed.as_str(),
        }
        .into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The caller a request's bearer token names; `Unauthorized` (after a delay that
/// grows with its address's recent failures) when it names none.
pub(crate) async fn identify(
    server: &Server,
    headers: &HeaderMap,
    peer: Option<ConnectInfo<SocketAddr>>,
) -> Result<Caller, ApiError> {
    if let Some(c) = bearer(headers).and_then(|t| server.tokens.check(t)) {
        return Ok(c);
    }
    let delay = peer.map_or(std::time::Duration::ZERO, |ConnectInfo(a)| {
        server.failures.failed(a.ip())
    });
    tokio::time::sleep(delay).await;
    Err(ApiError::Unauthorized)
}

/// Liveness: the server answers.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "server",
    responses((status = 200, description = "Alive", body = Status)))]
async fn health() -> Response {
    json_response(
        StatusCode::OK,
        &Status {
            status: "ok".into(),
        },
    )
}

/// Readiness: not ready while the server drains.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "server",
    responses(
        (status = 200, description = "Takes runs", body = Status),
        (status = 503, description = "Draining", body = ErrorBody),
    ))]
async fn ready(State(server): State<Arc<Server>>) -> Response {
    if server.draining() {
        return ApiError::Draining.into_response();
    }
    json_response(
        StatusCode::OK,
        &Status {
            status: "ready".into(),
        },
    )
}

/// The runs' metrics (one registry across runs) and the server's own, in the
/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "server",
    responses((status = 200, description = "The OpenMetrics text exposition", content_type = "application/openmetrics-text", body = String)))]
async fn metrics(State(server): State<Arc<Server>>) -> Response {
    let text = server
        .fleet_metrics
        .encode_with(Some(&server.metrics.registry));
    ([(header::CONTENT_TYPE, METRICS_TYPE)], text).into_response()
}

/// Submit a fleet: validated as `run --dry-run` does, then run now, queued, or refused.
#[utoipa::path(post, path = "/v1/runs", operation_id = "submit_run", tag = "runs",
    request_body(description = "A fleet.toml, or JSON with the fleet's text, a task and files beside it",
        content((crate::schema::Submission = "application/json"), (String = "application/toml"))),
    params(("traceparent" = Option<String>, Header, description = "A W3C trace context the run's span continues")),
    responses(
        (status = 201, description = "Running or queued", body = Created,
            headers(("location" = String, description = "The run's URL"))),
        (status = 400, description = "Invalid: the fleet's findings (line, key; `sandbox = \"none\"` among them unless an admin token on a server started with --allow-unsandboxed), or a bad field", body = ErrorBody),
        (status = 415, description = "Neither TOML nor JSON", body = ErrorBody),
        (status = 429, description = "Admission and queue full", body = ErrorBody,
            headers(("retry-after" = u64, description = "Seconds to wait"))),
        (status = 503, description = "Draining, or `no_sandbox`: this host has no sandbox backend for the sessions (nothing runs unconfined)", body = ErrorBody),
    ))]
async fn submit(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if server.draining() {
        server.metrics.submitted("draining");
        return Err(ApiError::Draining);
    }
    let submission = super::body::submission(&headers, &body)
        .inspect_err(|_| server.metrics.submitted("invalid"))?;
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let created = super::start::submitted(
        &server,
        submission,
        &caller.name,
        Some(caller.role),
        traceparent,
    )
    .await?;
    let mut response = json_response(StatusCode::CREATED, &created);
    if let Ok(location) = format!("/v1/runs/{}", created.id).parse() {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `GET /v1/runs`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only the runs in this state.
    #[param(inline)]
    state: Option<RunState>,
    /// Runs per page (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<usize>,
    /// The `next_after` of the page before.
    after: Option<String>,
}

/// The runs of the data dir (this server's and the others'), oldest first, a page
/// at a time.
#[utoipa::path(get, path = "/v1/runs", operation_id = "list_runs", tag = "runs", params(ListQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunPage),
        (status = 400, description = "A bad parameter", body = ErrorBody),
    ))]
async fn list(
    State(server): State<Arc<Server>>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let limit = match q.limit {
        Some(n) if (1..=PAGE_MAX).contains(&n) => n,
        Some(n) => {
            return Err(ApiError::BadRequest(format!(
                "limit `{n}`: 1 to {PAGE_MAX}"
            )));
        }
        None => PAGE,
    };
    let (state, after) = (q.state, q.after);
    let views = tokio::task::spawn_blocking(move || all_views(&server))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut runs: Vec<RunView> = views
        .into_iter()
        .filter(|v| after.as_ref().is_none_or(|a| v.id.as_str() > a.as_str()))
        .filter(|v| state.is_none_or(|s| v.state == s))
        .take(limit + 1)
        .collect();
    let more = runs.len() > limit;
    runs.truncate(limit);
    let next_after = more.then(|| runs.last().map(|v| v.id.clone())).flatten();
    Ok(json_response(StatusCode::OK, &RunPage { runs, next_after }))
}

/// This server's runs and the data dir's others, by id (their start time).
fn all_views(server: &Arc<Server>) -> Vec<RunView> {
    let mut views: Vec<RunView> = server
        .all()
        .iter()
        .map(|e| RunView::of(e, server))
        .collect();
    let known: std::collections::HashSet<String> = views.iter().map(|v| v.id.clone()).collect();
    for run in RunDir::all_in(&server.runs_dir).unwrap_or_default() {
        if !known.contains(&run.id) {
            views.push(RunView::of_row(capfleet_app::runs::row(&run)));
        }
    }
    views.sort_by(|a, b| a.id.cmp(&b.id));
    views
}

/// A run: state (with its queue position), sessions (state, turns, tokens, cost,
/// restarts), budget, outcome.
#[utoipa::path(get, path = "/v1/runs/{id}", operation_id = "get_run", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
async fn show(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    if let Some(e) = server.get(&id) {
        return Ok(json_response(StatusCode::OK, &RunView::of(&e, &server)));
    }
    let runs_dir = server.runs_dir.clone();
    let asked = id.clone();
    let row = tokio::task::spawn_blocking(move || {
        let dir = runs_dir.join(&asked);
        (valid_id(&asked) && dir.is_dir()).then(|| {
            capfleet_app::runs::row(&RunDir {
                id: asked,
                path: dir,
            })
        })
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let view = match (row, &server.queue) {
        (Some(row), _) => RunView::of_row(row),
        // A run queued to NATS, on whichever worker: as NATS has it.
        (None, Some((nats, replicas))) if valid_id(&id) => {
            super::remote::view(nats, *replicas, &id).await?
        }
        (None, _) => return Err(ApiError::NoRun(id)),
    };
    Ok(json_response(StatusCode::OK, &view))
}

pub(crate) use super::state::valid_id;

/// Cancel a run: a queued one never starts; a running one stops (journaled with who
/// cancelled it).
#[utoipa::path(post, path = "/v1/runs/{id}/cancel", operation_id = "cancel_run", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 202, description = "Stopping, or dequeued", body = RunView),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run has ended", body = ErrorBody),
    ))]
async fn cancel(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    match server.cancel(&id, &caller.name) {
        Cancelled::NotFound => Err(ApiError::NoRun(id)),
        Cancelled::Ended(state) => Err(ApiError::Ended(state.as_str().to_owned())),
        Cancelled::Dequeued | Cancelled::Stopping => {
            tracing::info!(run = %id, by = %caller.name, "run cancelled");
            let entry = server.get(&id).ok_or_else(|| ApiError::NoRun(id.clone()))?;
            Ok(json_response(
                StatusCode::ACCEPTED,
                &RunView::of(&entry, &server),
            ))
        }
    }
}

/// The permission requests and asks a run's sessions wait on (their turns suspended).
#[utoipa::path(get, path = "/v1/runs/{id}/asks", operation_id = "list_asks", tag = "asks",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The open questions, oldest first", body = AskList),
        (status = 404, description = "No such run on this server", body = ErrorBody),
    ))]
async fn list_asks(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let entry = server.get(&id).ok_or(ApiError::NoRun(id))?;
    Ok(json_response(
        StatusCode::OK,
        &AskList {
            asks: entry.asks.list(),
        },
    ))
}

/// Answer an open question; who answered (the token's name) is journaled.
#[utoipa::path(post, path = "/v1/runs/{id}/asks/{ask_id}", operation_id = "answer_ask", tag = "asks",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("ask_id" = String, Path, description = "The question's `ask_id`"),
    ),
    request_body = AnswerRequest,
    responses(
        (status = 200, description = "Answered", body = Answered),
        (status = 400, description = "A body that is not an answer (not JSON, an unknown field)", body = ErrorBody),
        (status = 404, description = "No such run or question", body = ErrorBody),
        (status = 422, description = "An answer the question does not take (a decision not offered, an answer not of its form's shape): `expected` says what it takes; it stays open", body = ErrorBody),
        (status = 409, description = "Already answered, timed out or withdrawn", body = ErrorBody),
        (status = 415, description = "Not application/json", body = ErrorBody),
    ))]
async fn answer_ask(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, ask_id)): ApiPath<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let entry = server.get(&id).ok_or(ApiError::NoRun(id))?;
    let body: AnswerRequest = json_body(&headers, &body)?;
    let answered = entry.asks.answer(&ask_id, &body, &caller.name)?;
    Ok(json_response(StatusCode::OK, &answered))
}
