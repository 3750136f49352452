//! A run's stored artifacts over the API: `GET /v1/runs/{id}/artifacts` lists them
//! (each session's transcript, its workspace's `diff.patch`, what its agent emitted,
//! the final master plan), `GET /v1/runs/{id}/artifacts/{session}/{name}` returns one
//! as stored, `GET /v1/runs/{id}/diff[/{session}]` the workspaces' diffs against their
//! base. Only files inside the run's `artifacts/` directory are ever read.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::{ApiError, json_response};
use super::routes::valid_id;
use super::state::Server;
use super::submission::plain_relative;

/// The artifacts directory inside a run's directory.
const ARTIFACTS: &str = "artifacts";
/// A workspace's diff, in its session's artifacts.
const DIFF: &str = "diff.patch";

/// The artifacts directory of run `id`, if the run is there.
fn artifacts_dir(server: &Server, id: &str) -> Result<PathBuf, ApiError> {
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

/// Every file under `root`, as paths relative to it (sorted).
fn files(root: &FsPath) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(e.path());
            } else if meta.is_file()
                && let Ok(rel) = e.path().strip_prefix(root)
            {
                out.push((rel.display().to_string(), meta.len()));
            }
        }
    }
    out.sort();
    out
}

pub(crate) async fn list(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let root = artifacts_dir(&server, &id)?;
    let listed = tokio::task::spawn_blocking(move || files(&root))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let artifacts: Vec<Value> = listed
        .into_iter()
        .map(|(name, bytes)| {
            let session = name.split_once('/').map(|(s, _)| s.to_owned());
            json!({
                "name": name,
                "session": session,
                "bytes": bytes,
                "href": format!("/v1/runs/{id}/artifacts/{name}"),
            })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({ "artifacts": artifacts }),
    ))
}

/// The file `rel` under `root`, refused unless it stays inside it (no `..`, no link
/// out).
async fn read_inside(root: &FsPath, rel: &str) -> Result<Vec<u8>, ApiError> {
    let missing = || ApiError::NoArtifact(rel.to_owned());
    if !plain_relative(rel) {
        return Err(missing());
    }
    let (Ok(base), Ok(path)) = (
        tokio::fs::canonicalize(root).await,
        tokio::fs::canonicalize(root.join(rel)).await,
    ) else {
        return Err(missing());
    };
    if !path.starts_with(&base) {
        return Err(missing());
    }
    tokio::fs::read(&path).await.map_err(|_| missing())
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("jsonl") => "application/x-ndjson",
        Some("patch" | "diff") => "text/x-diff; charset=utf-8",
        Some("md" | "txt" | "log" | "rs" | "py" | "toml") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

pub(crate) async fn one(
    State(server): State<Arc<Server>>,
    Path((id, session, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let root = artifacts_dir(&server, &id)?;
    let rel = format!("{session}/{name}");
    let body = read_inside(&root, &rel).await?;
    Ok(([(header::CONTENT_TYPE, content_type(&name))], body).into_response())
}

pub(crate) async fn diff_all(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let root = artifacts_dir(&server, &id)?;
    let listed = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || files(&root))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
    };
    let mut out = Vec::new();
    for (name, _) in listed
        .iter()
        .filter(|(n, _)| n.ends_with(&format!("/{DIFF}")))
    {
        out.extend(read_inside(&root, name).await?);
    }
    Ok(([(header::CONTENT_TYPE, content_type(DIFF))], out).into_response())
}

pub(crate) async fn diff_one(
    State(server): State<Arc<Server>>,
    Path((id, session)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let root = artifacts_dir(&server, &id)?;
    let body = read_inside(&root, &format!("{session}/{DIFF}")).await?;
    Ok(([(header::CONTENT_TYPE, content_type(DIFF))], body).into_response())
}
