//! A run's journal and artifacts as MCP resources:
//! `capfleet://runs/<run>/journal` (its JSONL, the last [`JOURNAL_MAX`] bytes of a
//! longer one) and `capfleet://runs/<run>/artifacts/<path>` (each session's
//! transcript, its workspace's `diff.patch`, the final plan). Only files inside the
//! run's directory are read (`run_dir::read_inside`).

use std::path::PathBuf;

use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::fleets::Fleets;
use crate::types::RunList;
use capfleet_app::fleet::run_dir::{ARTIFACTS, JOURNAL_FILE, files, read_inside};

const SCHEME: &str = "capfleet://runs/";
/// The most of a journal one read returns (its end: the latest records).
const JOURNAL_MAX: usize = 4 << 20;

fn journal_uri(run: &str) -> String {
    format!("{SCHEME}{run}/journal")
}

fn artifact_uri(run: &str, rel: &str) -> String {
    format!("{SCHEME}{run}/{ARTIFACTS}/{rel}")
}

fn mime_of(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("jsonl") => "application/x-ndjson",
        Some("json") => "application/json",
        Some("patch" | "diff") => "text/x-diff",
        _ => "text/plain",
    }
}

/// The templates: any run's journal, any of its artifacts.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{SCHEME}{{run}}/journal"), "journal")
            .with_description("A run's journal: one JSON record per line")
            .with_mime_type("application/x-ndjson"),
        ResourceTemplate::new(format!("{SCHEME}{{run}}/{ARTIFACTS}/{{+path}}"), "artifact")
            .with_description("A stored artifact of a run (`<session>/<file>`)"),
    ]
}

/// Each run's journal and artifacts.
pub(crate) async fn list(fleets: &dyn Fleets, runs: &RunList) -> Vec<Resource> {
    let dirs: Vec<(String, PathBuf)> = runs
        .runs
        .iter()
        .filter_map(|r| fleets.run_dir(&r.run).map(|d| (r.run.clone(), d)))
        .collect();
    let listed = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for (run, dir) in dirs {
            let size = std::fs::metadata(dir.join(JOURNAL_FILE)).map_or(0, |m| m.len());
            out.push(
                Resource::new(journal_uri(&run), format!("{run} journal"))
                    .with_mime_type("application/x-ndjson")
                    .with_size(size),
            );
            for (rel, bytes) in files(&dir.join(ARTIFACTS)) {
                out.push(
                    Resource::new(artifact_uri(&run, &rel), format!("{run} {rel}"))
                        .with_mime_type(mime_of(&rel))
                        .with_size(bytes),
                );
            }
        }
        out
    })
    .await;
    listed.unwrap_or_default()
}

/// The resource at `uri`.
pub(crate) async fn read(fleets: &dyn Fleets, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let missing = || ErrorData::resource_not_found(format!("no resource `{uri}`"), None);
    let rest = uri.strip_prefix(SCHEME).ok_or_else(missing)?;
    let (run, what) = rest.split_once('/').ok_or_else(missing)?;
    let dir = fleets.run_dir(run).ok_or_else(missing)?;
    let (bytes, mime) = if what == "journal" {
        let mut bytes = read_inside(&dir, JOURNAL_FILE).await.ok_or_else(missing)?;
        if bytes.len() > JOURNAL_MAX {
            // From the first whole line of the last JOURNAL_MAX bytes.
            let cut = bytes.len() - JOURNAL_MAX;
            let start = bytes[cut..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(cut, |i| cut + i + 1);
            bytes.drain(..start);
        }
        (bytes, "application/x-ndjson")
    } else {
        let rel = what
            .strip_prefix(ARTIFACTS)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(missing)?;
        let bytes = read_inside(&dir.join(ARTIFACTS), rel)
            .await
            .ok_or_else(missing)?;
        (bytes, mime_of(rel))
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(mime),
    ]))
}
