//! The HTTP API: its routes, the authentication every one but the probes passes
//! ([`authenticate`]), the request metrics, and the handlers of runs — submit, list,
//! show, cancel, the asks; artifacts are [`super::artifacts`]. Events are [`super::events`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use capfleet_actors::telemetry::metrics::CONTENT_TYPE as METRICS_TYPE;
use serde_json::json;

use super::auth::{Caller, Role, bearer};
use super::driver;
use super::error::{ApiError, json_response};
use super::metrics::RequestLabels;
use super::state::{Admission, Cancelled, Pending, RunState, Server};
use super::submission::{FLEET_FILE, INPUT_DIR, Submission};
use super::view::{Links, RunView};
use crate::fleet::RunDir;

/// Runs listed per page by default, and at most.
const PAGE: usize = 50;
const PAGE_MAX: usize = 500;

/// Every route of the server; `a2a`, the exposed agents' routes (their own auth).
pub(crate) fn router(server: Arc<Server>, a2a: Router) -> Router {
    let api = Router::new()
        .route("/v1/runs", post(submit).get(list))
        .route("/v1/runs/{id}", get(show))
        .route("/v1/runs/{id}/cancel", post(cancel))
        .route("/v1/runs/{id}/events", get(super::events::stream))
        .route("/v1/runs/{id}/artifacts", get(super::artifacts::list))
        .route("/v1/runs/{id}/artifacts/{session}/{*name}", get(super::artifacts::one))
        .route("/v1/runs/{id}/diff", get(super::artifacts::diff_all))
        .route("/v1/runs/{id}/diff/{session}", get(super::artifacts::diff_one))
        .route("/v1/runs/{id}/asks", get(list_asks))
        .route("/v1/runs/{id}/asks/{ask_id}", post(answer_ask))
        .route("/metrics", get(metrics))
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async {
            json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                &json!({"code": "method_not_allowed", "message": "this route does not take that method"}),
            )
        })
        .layer(middleware::from_fn_with_state(server.clone(), authenticate));
    // The probes are open: a load balancer or systemd asks them without a token.
    let probes = Router::new()
        .route(
            "/healthz",
            get(|| async { json_response(StatusCode::OK, &json!({"status": "ok"})) }),
        )
        .route("/readyz", get(ready));
    let app: Router = probes.merge(api).with_state(server.clone());
    app.merge(a2a)
        .layer(middleware::from_fn_with_state(server, count))
}

/// The route a path matches, for the metrics' labels (never a run id).
fn route_label(path: &str) -> String {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["v1", "runs", _] => "/v1/runs/{id}".into(),
        ["v1", "runs", _, "asks", _] => "/v1/runs/{id}/asks/{ask_id}".into(),
        ["v1", "runs", _, "artifacts", _, ..] => "/v1/runs/{id}/artifacts/{name}".into(),
        ["v1", "runs", _, "diff", _] => "/v1/runs/{id}/diff/{session}".into(),
        ["v1", "runs", _, rest] => format!("/v1/runs/{{id}}/{rest}"),
        ["v1", "runs"] | ["healthz"] | ["readyz"] | ["metrics"] => path.into(),
        ["a2a", _, ".well-known", _] => "/a2a/{name}/.well-known/{card}".into(),
        ["a2a", _] | ["a2a", _, ""] => "/a2a/{name}/".into(),
        _ => "other".into(),
    }
}

async fn count(State(server): State<Arc<Server>>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let route = route_label(request.uri().path());
    let response = next.run(request).await;
    server
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// Who calls, by their bearer token, and whether their role may: 401 (after a delay
/// that grows with an address's recent failures) or 403; without a token file, every
/// caller is `anonymous` with every role.
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
/// grows with its address's recent failures) when it names none. Without a token file
/// every caller is `anonymous` with every role.
pub(crate) async fn identify(
    server: &Server,
    headers: &HeaderMap,
    peer: Option<ConnectInfo<SocketAddr>>,
) -> Result<Caller, ApiError> {
    let Some(tokens) = &server.tokens else {
        return Ok(Caller {
            name: "anonymous".into(),
            role: Role::Admin,
        });
    };
    if let Some(c) = bearer(headers).and_then(|t| tokens.check(t)) {
        return Ok(c);
    }
    let delay = peer.map_or(std::time::Duration::ZERO, |ConnectInfo(a)| {
        server.failures.failed(a.ip())
    });
    tokio::time::sleep(delay).await;
    Err(ApiError::Unauthorized)
}

async fn ready(State(server): State<Arc<Server>>) -> Response {
    if server.draining() {
        return ApiError::Draining.into_response();
    }
    json_response(StatusCode::OK, &json!({"status": "ready"}))
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    let text = server
        .fleet_metrics
        .encode_with(Some(&server.metrics.registry));
    ([(header::CONTENT_TYPE, METRICS_TYPE)], text).into_response()
}

/// The query's parameters (the last value of each wins).
pub(crate) fn query(raw: Option<String>) -> HashMap<String, String> {
    raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

async fn submit(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let refused = |result: &str, e: ApiError| {
        server.metrics.submitted(result);
        e
    };
    if server.draining() {
        return Err(refused("draining", ApiError::Draining));
    }
    let submission = Submission::parse(&headers, &body).map_err(|e| refused("invalid", e))?;
    let run = RunDir::create_in(&server.runs_dir)
        .map_err(|e| ApiError::Internal(format!("cannot make the run directory: {e}")))?;
    let discard = |e: ApiError, result: &str| {
        if let Err(io) = std::fs::remove_dir_all(&run.path) {
            tracing::error!(run = %run.id, "removing a refused run's directory: {io}");
        }
        refused(result, e)
    };
    let input = run.path.join(INPUT_DIR);
    if let Err(e) = submission.write(&input) {
        return Err(discard(e, "invalid"));
    }
    let loaded = match submission.load(&input).await {
        Ok(l) => l,
        Err(e) => return Err(discard(e, "invalid")),
    };
    let (sessions, max) = (loaded.fleet.sessions.len(), server.limits.max_sessions);
    if sessions > max {
        return Err(discard(
            ApiError::TooManySessions { sessions, max },
            "invalid",
        ));
    }
    let lock = match run.lock(&input.join(FLEET_FILE)) {
        Ok(l) => l,
        Err(e) => return Err(discard(ApiError::Internal(e.to_string()), "invalid")),
    };
    let (entry, stops) = Server::entry(&loaded.fleet, &run, &caller.name);
    let pending = Pending {
        entry: entry.clone(),
        fleet: loaded.fleet,
        run: run.clone(),
        lock,
        stops,
        hooks: driver::RunHooks::default(),
    };
    let (state, position) = match server.admit(pending) {
        Admission::Now(p) => {
            server.metrics.submitted("admitted");
            driver::spawn(server.clone(), *p);
            (RunState::Running, None)
        }
        Admission::Queued(position) => {
            server.metrics.submitted("queued");
            (RunState::Queued, Some(position))
        }
        Admission::Full { running, queued } => {
            return Err(discard(ApiError::Full { running, queued }, "refused"));
        }
        Admission::Draining => return Err(discard(ApiError::Draining, "draining")),
    };
    tracing::info!(run = %entry.id, fleet = %entry.fleet, by = %caller.name, state = state.as_str(), "run submitted");
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    let mut body = json!({
        "id": entry.id,
        "fleet": entry.fleet,
        "state": state.as_str(),
        "links": Links::of(&entry.id),
        "warnings": warnings,
    });
    if let Some(p) = position {
        body["queue_position"] = json!(p);
    }
    let mut response = json_response(StatusCode::CREATED, &body);
    if let Ok(location) = format!("/v1/runs/{}", entry.id).parse() {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

async fn list(
    State(server): State<Arc<Server>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw);
    let state = match q.get("state") {
        Some(s) => Some(RunState::parse(s).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "state `{s}`: one of queued, running, completed, failed, interrupted"
            ))
        })?),
        None => None,
    };
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=PAGE_MAX).contains(n))
            .ok_or_else(|| ApiError::BadRequest(format!("limit `{l}`: 1 to {PAGE_MAX}")))?,
        None => PAGE,
    };
    let after = q.get("after").cloned();
    let views = tokio::task::spawn_blocking(move || all_views(&server))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut page: Vec<RunView> = views
        .into_iter()
        .filter(|v| after.as_ref().is_none_or(|a| v.id.as_str() > a.as_str()))
        .filter(|v| state.is_none_or(|s| v.state == s.as_str()))
        .take(limit + 1)
        .collect();
    let more = page.len() > limit;
    page.truncate(limit);
    let next = more.then(|| page.last().map(|v| v.id.clone())).flatten();
    Ok(json_response(
        StatusCode::OK,
        &json!({ "runs": page, "next_after": next }),
    ))
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
            views.push(RunView::of_row(crate::cmd::runs::row(&run)));
        }
    }
    views.sort_by(|a, b| a.id.cmp(&b.id));
    views
}

async fn show(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if let Some(e) = server.get(&id) {
        return Ok(json_response(StatusCode::OK, &RunView::of(&e, &server)));
    }
    let runs_dir = server.runs_dir.clone();
    let row = tokio::task::spawn_blocking(move || {
        let dir = runs_dir.join(&id);
        (valid_id(&id) && dir.is_dir())
            .then(|| {
                crate::cmd::runs::row(&RunDir {
                    id: id.clone(),
                    path: dir,
                })
            })
            .ok_or(ApiError::NoRun(id))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(json_response(StatusCode::OK, &RunView::of_row(row)))
}

/// A run id names a directory of the runs directory, nothing else.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

async fn cancel(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
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

async fn list_asks(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let entry = server.get(&id).ok_or(ApiError::NoRun(id))?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "asks": entry.asks.list() }),
    ))
}

async fn answer_ask(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    Path((id, ask_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let entry = server.get(&id).ok_or(ApiError::NoRun(id))?;
    let body: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("the JSON body: {e}")))?;
    let answered = entry.asks.answer(&ask_id, &body, &caller.name)?;
    Ok(json_response(StatusCode::OK, &answered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_routes_never_carry_ids() {
        assert_eq!(route_label("/v1/runs"), "/v1/runs");
        assert_eq!(
            route_label("/v1/runs/20261130T121500Z-3fa9"),
            "/v1/runs/{id}"
        );
        assert_eq!(route_label("/v1/runs/x/events"), "/v1/runs/{id}/events");
        assert_eq!(
            route_label("/v1/runs/x/asks/y"),
            "/v1/runs/{id}/asks/{ask_id}"
        );
        assert_eq!(route_label("/etc/passwd"), "other");
        assert!(valid_id("20261130T121500Z-3fa9"));
        assert!(!valid_id("../x") && !valid_id(""));
    }
}
