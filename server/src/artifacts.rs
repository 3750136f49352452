//! A run's stored artifacts over the API: `GET /v1/runs/{id}/artifacts` lists them
//! (each session's transcript, its workspace's `diff.patch`, what its agent emitted,
//! the final master plan), `GET /v1/runs/{id}/artifacts/{session}/{name}` returns one
//! as stored, `GET /v1/runs/{id}/diff[/{session}]` the workspaces' diffs against their
//! base. Only files inside the run's `artifacts/` directory are ever read. With
//! `--nats`, a run this server does not have (queued to NATS, run on a worker) has
//! its artifacts read from the JetStream object store the worker put them in
//! (`capfleet_app::nats::artifacts`).

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody, json_response};
use super::extract::ApiPath;
use super::routes::valid_id;
use super::state::Server;
use capfleet_app::fleet::run_dir::{self, ARTIFACTS, files};

/// A workspace's diff, in its session's artifacts.
pub(super) const DIFF: &str = "diff.patch";

/// The artifacts directory of run `id`, if the run is there.
pub(super) fn artifacts_dir(server: &Server, id: &str) -> Result<PathBuf, ApiError> {
    let dir = match server.get(id) {
        Some(e) => e.dir.clone(),
        None if valid_id(id) => server.runs_dir.join(id),
        None => return Err(ApiError::NoRun(id.to_owned())),
    };
    if !dir.is_dir() {
        return Err(ApiError::NoRun(id.to_owned()));
    }
    Ok(dir.join(ARTIFACTS))
}

/// Where a run's artifacts are read from.
enum Source {
    Dir(PathBuf),
    /// The server's NATS (boxed: a JetStream context is large), the run.
    Nats {
        nats: Box<capfleet_app::nats::Nats>,
        run: String,
    },
}

impl Source {
    /// The artifacts of run `id`: its directory, or with `--nats` the object store.
    fn of(server: &Server, id: &str) -> Result<Source, ApiError> {
        match (artifacts_dir(server, id), &server.queue) {
            (Ok(dir), _) => Ok(Source::Dir(dir)),
            (Err(ApiError::NoRun(_)), Some((nats, _))) if valid_id(id) => Ok(Source::Nats {
                nats: Box::new(nats.clone()),
                run: id.to_owned(),
            }),
            (Err(e), _) => Err(e),
        }
    }

    /// Its artifacts, as paths relative to `artifacts/` with their sizes (sorted).
    async fn list(&self) -> Result<Vec<(String, u64)>, ApiError> {
        match self {
            Source::Dir(root) => {
                let root = root.clone();
                tokio::task::spawn_blocking(move || files(&root))
                    .await
                    .map_err(|e| ApiError::Internal(e.to_string()))
            }
            Source::Nats { nats, run } => {
                let internal = |e: capfleet_app::nats::NatsError| ApiError::Internal(e.to_string());
                match nats.artifact_list(run).await.map_err(internal)? {
                    Some(mut listed) => {
                        listed.sort();
                        Ok(listed)
                    }
                    // Not ended yet, or no such run.
                    None if nats.submitted(run).await.map_err(internal)?.is_some() => {
                        Ok(Vec::new())
                    }
                    None => Err(ApiError::NoRun(run.clone())),
                }
            }
        }
    }

    /// The artifact `rel`.
    async fn read(&self, rel: &str) -> Result<Vec<u8>, ApiError> {
        match self {
            Source::Dir(root) => read_inside(root, rel).await,
            Source::Nats { nats, run } => nats
                .artifact(run, rel)
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .ok_or_else(|| ApiError::NoArtifact(rel.to_owned())),
        }
    }
}

/// One stored artifact.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ArtifactView {
    /// `<session>/<file>`.
    pub name: String,
    pub session: Option<String>,
    pub bytes: u64,
    /// Where to get it.
    pub href: String,
}

/// A run's stored artifacts.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ArtifactList {
    pub artifacts: Vec<ArtifactView>,
}

/// The content types an artifact may be served with (by its name's extension).
const TYPES: [&str; 5] = [
    "application/json",
    "application/x-ndjson",
    "text/x-diff; charset=utf-8",
    "text/plain; charset=utf-8",
    "application/octet-stream",
];

/// A run's stored artifacts: each session's transcript, its workspace's diff, what its
/// agent emitted, the final master plan.
#[utoipa::path(get, path = "/v1/runs/{id}/artifacts", operation_id = "list_artifacts", tag = "artifacts",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The artifacts, by name", body = ArtifactList),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let listed = Source::of(&server, &id)?.list().await?;
    let artifacts = listed
        .into_iter()
        .map(|(name, bytes)| ArtifactView {
            session: name.split_once('/').map(|(s, _)| s.to_owned()),
            href: format!("/v1/runs/{id}/artifacts/{name}"),
            name,
            bytes,
        })
        .collect();
    Ok(json_response(StatusCode::OK, &ArtifactList { artifacts }))
}

/// The file `rel` under `root`, refused unless it stays inside it (no `..`, no link
/// out).
async fn read_inside(root: &FsPath, rel: &str) -> Result<Vec<u8>, ApiError> {
    run_dir::read_inside(root, rel)
        .await
        .ok_or_else(|| ApiError::NoArtifact(rel.to_owned()))
}

fn content_type(name: &str) -> &'static str {
    let [json, ndjson, diff, text, bytes] = TYPES;
    match name.rsplit('.').next() {
        Some("json") => json,
        Some("jsonl") => ndjson,
        Some("patch" | "diff") => diff,
        Some("md" | "txt" | "log" | "rs" | "py" | "toml") => text,
        _ => bytes,
    }
}

/// One artifact, as stored.
#[utoipa::path(get, path = "/v1/runs/{id}/artifacts/{session}/{name}", operation_id = "get_artifact", tag = "artifacts",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("session" = String, Path, description = "The session's name"),
        ("name" = String, Path, description = "The file's name"),
    ),
    responses(
        (status = 200, description = "The artifact (its type from its name)", content(
            (serde_json::Value = "application/json"), (String = "application/x-ndjson"),
            (String = "text/x-diff"), (String = "text/plain"), (String = "application/octet-stream"))),
        (status = 404, description = "No such run or artifact", body = ErrorBody),
    ))]
pub(crate) async fn one(
    State(server): State<Arc<Server>>,
    ApiPath((id, session, name)): ApiPath<(String, String, String)>,
) -> Result<Response, ApiError> {
    let rel = format!("{session}/{name}");
    let body = Source::of(&server, &id)?.read(&rel).await?;
    Ok(([(header::CONTENT_TYPE, content_type(&name))], body).into_response())
}

/// Every workspace's diff against its base, one after the other.
#[utoipa::path(get, path = "/v1/runs/{id}/diff", operation_id = "get_diff", tag = "artifacts",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "A unified diff (empty when nothing changed)", content_type = "text/x-diff", body = String),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn diff_all(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let source = Source::of(&server, &id)?;
    let listed = source.list().await?;
    let mut out = Vec::new();
    for (name, _) in listed
        .iter()
        .filter(|(n, _)| n.ends_with(&format!("/{DIFF}")))
    {
        out.extend(source.read(name).await?);
    }
    Ok(([(header::CONTENT_TYPE, content_type(DIFF))], out).into_response())
}

/// One session's workspace diff against its base.
#[utoipa::path(get, path = "/v1/runs/{id}/diff/{session}", operation_id = "get_session_diff", tag = "artifacts",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("session" = String, Path, description = "The session's name"),
    ),
    responses(
        (status = 200, description = "A unified diff", content_type = "text/x-diff", body = String),
        (status = 404, description = "No such run, or the session has no diff", body = ErrorBody),
    ))]
pub(crate) async fn diff_one(
    State(server): State<Arc<Server>>,
    ApiPath((id, session)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let body = session_diff(&server, &id, &session).await?;
    Ok(([(header::CONTENT_TYPE, content_type(DIFF))], body).into_response())
}

/// Session `session`'s stored diff in run `id` (MCP's `session_diff` reads it too).
pub(crate) async fn session_diff(
    server: &Server,
    id: &str,
    session: &str,
) -> Result<Vec<u8>, ApiError> {
    Source::of(server, id)?
        .read(&format!("{session}/{DIFF}"))
        .await
}
