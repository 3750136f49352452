//! The end of a run, per workspace: the diff against the base (stored, announced as a
//! `diff` artifact), its vetting (each finding a `cap.error` `git_dirty` warning),
//! with `--commit` the session's work committed on its branch (a `commit` artifact;
//! a likely secret keeps it uncommitted), then the session's test command (a
//! `test_result` artifact; failures also a `cap.error` `test_failed`). Nothing is
//! ever removed. Git work runs on the blocking pool. A commit is keyed
//! (`commit:<session>`): its start journaled and synced before it is made, its end
//! after, so a resumed run never commits twice ([`commit_once`]); `collected` ends
//! the pass.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::Instrument;

use super::artifacts::{ArtifactStore, META_SESSION, artifact_event};
use super::commit::CommitMark;
use super::diff::{DiffSummary, INLINE_MAX, diff};
use super::error::WorkspaceError;
use super::record::Workspace;
use super::testrun::run_tests;
use super::vet::{Finding, Vetter};
use crate::protocol::coding::{CodingArtifact, Commit, PlanDoc, TestResult};
use crate::protocol::{CapEvent, ErrorKind, HasMeta, Nullable};
use capfleet_wire::events::Durable;
use capfleet_wire::events::{EventBody, Publisher, urn};

/// What the end-of-run pass does.
#[derive(Debug, Clone)]
pub(crate) struct CollectSpec {
    pub fleet: String,
    pub run_id: String,
    /// Commit each worktree's changes on its branch (`--commit`).
    pub commit: bool,
    /// Run the test commands (not after an interrupt).
    pub tests: bool,
    pub test_timeout: Duration,
    /// The agent of each session (the commit author), by session name.
    pub agents: Vec<(String, String)>,
    /// Where each session's commit stood in a resumed run's journal, by session name.
    pub marks: HashMap<String, CommitMark>,
    /// To have a commit's start on disk before it is made.
    pub durable: Option<Durable>,
    /// The sandbox of each session that has one, by session name: its test command
    /// runs inside.
    pub sandboxes: HashMap<String, capfleet_wire::process::sandbox::Sandbox>,
}

/// One session's workspace after the run.
#[derive(Debug, Clone, Default)]
pub struct SessionReport {
    pub session: String,
    pub path: PathBuf,
    pub branch: Option<String>,
    pub files: usize,
    pub insertions: u64,
    pub deletions: u64,
    /// The stored diff, when there were changes.
    pub diff: Option<PathBuf>,
    pub findings: Vec<Finding>,
    pub commit: Option<String>,
    /// Why `--commit` did not commit.
    pub not_committed: Option<String>,
    /// `--commit` owed a commit and could not make it (the reason is in `errors`):
    /// the run does not exit 0.
    pub commit_failed: bool,
    /// `framework passed/failed/skipped`.
    pub tests: Option<TestLine>,
    pub errors: Vec<String>,
}

/// A test run in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLine {
    pub framework: String,
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub ok: bool,
}

/// Collect every workspace, one after the other; then a `collected` record.
pub(crate) async fn collect(
    spec: &CollectSpec,
    workspaces: &[Workspace],
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
) -> Vec<SessionReport> {
    let mut out = Vec::with_capacity(workspaces.len());
    for ws in workspaces {
        let span = tracing::info_span!("workspace.collect", cap.session = %ws.session);
        out.push(
            collect_one(spec, ws, store, publisher)
                .instrument(span)
                .await,
        );
    }
    let sessions = out.len();
    publisher
        .publish(None, EventBody::Collected { sessions })
        .await;
    out
}

fn session_urn(spec: &CollectSpec, ws: &Workspace) -> String {
    urn(&spec.fleet, &ws.session)
}

async fn collect_one(
    spec: &CollectSpec,
    ws: &Workspace,
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
) -> SessionReport {
    let urn = session_urn(spec, ws);
    let mut report = SessionReport {
        session: ws.session.clone(),
        path: ws.path.clone(),
        branch: ws.branch().map(str::to_owned),
        ..SessionReport::default()
    };
    match diff_and_vet(ws.clone(), store.clone()).await {
        Ok((summary, findings, path)) => {
            report.files = summary.files.len();
            report.insertions = summary.insertions;
            report.deletions = summary.deletions;
            if !summary.files.is_empty() {
                let inline = (!summary.truncated).then(|| Value::String(summary.head.clone()));
                let event = artifact_event(
                    &format!("diff-{}", ws.session),
                    CodingArtifact::Diff.mime(),
                    &format!("{}.patch", ws.session),
                    &path,
                    summary.bytes,
                    inline,
                    &urn,
                );
                publisher.publish(None, EventBody::Cap { event }).await;
                report.diff = Some(path);
            }
            for f in &findings {
                publisher
                    .publish(
                        None,
                        EventBody::Cap {
                            event: finding_event(f, &ws.session, &urn),
                        },
                    )
                    .await;
            }
            report.findings = findings;
        }
        Err(e) => report.errors.push(format!("diff: {e}")),
    }
    if spec.commit && ws.branch().is_some() {
        if let Some(f) = report.findings.iter().find(|f| f.blocks_commit()) {
            report.not_committed = Some(format!("not committed: {}", f.describe()));
        } else {
            commit_once(spec, ws, store, publisher, &mut report).await;
        }
    }
    if let (Some(cmd), true) = (&ws.test_command, spec.tests) {
        let label = format!("{urn}/tests");
        let sandbox = spec.sandboxes.get(&ws.session);
        match run_tests(cmd, &ws.cwd, spec.test_timeout, &label, sandbox).await {
            Ok(run) => {
                let failed = run.failed();
                report.tests = Some(test_line(&run.result, !failed));
                publish_json(
                    store,
                    publisher,
                    ws,
                    &urn,
                    CodingArtifact::TestResult,
                    &run.result,
                )
                .await;
                if failed {
                    let message = format!(
                        "{}: `{}` failed: {} failed, {} passed{}",
                        ws.session,
                        cmd.display(),
                        run.result.failed,
                        run.result.passed,
                        if run.timed_out { " (timed out)" } else { "" }
                    );
                    let mut event = CapEvent::error(ErrorKind::TestFailed, message, false);
                    event.set_meta(META_SESSION, Value::String(urn.clone()));
                    publisher.publish(None, EventBody::Cap { event }).await;
                }
            }
            Err(e) => report.errors.push(format!("tests: {e}")),
        }
    }
    report
}

/// `--commit` of `ws`, exactly once across kills: a commit journaled as made is not
/// made again (its sha reported); one journaled as started is looked for on the
/// branch first; otherwise the branch head is journaled (and synced) as the commit's
/// start, the commit made, and journaled.
async fn commit_once(
    spec: &CollectSpec,
    ws: &Workspace,
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
    report: &mut SessionReport,
) {
    let key = super::commit::key(&ws.session);
    let message = format!(
        "capfleet: work of session {} (run {})",
        ws.session, spec.run_id
    );
    let author = spec
        .agents
        .iter()
        .find(|(s, _)| *s == ws.session)
        .map_or("capfleet-agent", |(_, a)| a.as_str())
        .to_owned();
    let found = match spec.marks.get(&ws.session) {
        Some(CommitMark::Done { sha }) => {
            report.commit = Some(sha.clone());
            return;
        }
        Some(CommitMark::Started { parent }) => {
            let (w, p, m) = (ws.clone(), parent.clone(), message.clone());
            blocking(ws, move || {
                super::commit::clear_cut_locks(&w)?;
                super::commit::made_on(&w, &p, &m)
            })
            .await
        }
        None => Ok(None),
    };
    let made = match found {
        Ok(Some(c)) => Ok(Some((c, true))),
        Ok(None) => first_commit(spec, ws, &key, message, author, publisher)
            .await
            .map(|c| c.map(|c| (c, false))),
        Err(e) => Err(e),
    };
    match made {
        Ok(Some((c, found))) => {
            let done = EventBody::Committed {
                key,
                session: ws.session.clone(),
                sha: c.sha.clone(),
                found,
            };
            publisher.publish(None, done).await;
            report.commit = Some(c.sha.clone());
            publish_commit(&c, ws, store, publisher, &session_urn(spec, ws)).await;
        }
        Ok(None) => report.not_committed = Some("nothing to commit".into()),
        Err(e) => {
            report.commit_failed = true;
            report.errors.push(format!("commit: {e}"));
        }
    }
}

/// The branch head journaled (and synced) as the commit's start, then the commit.
async fn first_commit(
    spec: &CollectSpec,
    ws: &Workspace,
    key: &str,
    message: String,
    author: String,
    publisher: &mut Publisher,
) -> Result<Option<Commit>, WorkspaceError> {
    let w = ws.clone();
    let Some(parent) = blocking(ws, move || super::commit::head(&w)).await? else {
        return Ok(None);
    };
    let started = EventBody::CommitStarted {
        key: key.to_owned(),
        session: ws.session.clone(),
        parent,
    };
    publisher.publish(None, started).await;
    if let Some(d) = &spec.durable {
        d.sync().await;
    }
    let w = ws.clone();
    blocking(ws, move || super::commit::commit(&w, &message, &author)).await
}

/// `f` (git work) on the blocking pool.
async fn blocking<T: Send + 'static>(
    ws: &Workspace,
    f: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(join_error(e, ws)))
}

/// Diff `ws` into `artifacts/<session>/diff.patch` and vet it.
async fn diff_and_vet(
    ws: Workspace,
    store: Arc<ArtifactStore>,
) -> Result<(DiffSummary, Vec<Finding>, PathBuf), WorkspaceError> {
    let name = ws.session.clone();
    let w = ws.clone();
    tokio::task::spawn_blocking(move || {
        let dir = store
            .session_dir(&name)
            .map_err(|source| io_err("cannot create the artifact directory", &name, source))?;
        let path = dir.join("diff.patch");
        let file = std::fs::File::create(&path)
            .map_err(|source| io_err("cannot create the diff file", &name, source))?;
        let mut out = std::io::BufWriter::new(file);
        let mut vetter = Vetter::new(&w.paths);
        let summary = diff(&w, &mut out, &mut |p, l, c| vetter.added_line(p, l, c))?;
        if summary.files.is_empty() {
            // No changes, no diff artifact.
            drop(out);
            let _already_gone = std::fs::remove_file(&path);
        }
        let findings = vetter.finish(&summary.files);
        Ok((summary, findings, path))
    })
    .await
    .unwrap_or_else(|e| Err(join_error(e, &ws)))
}

fn io_err(what: &str, session: &str, source: std::io::Error) -> WorkspaceError {
    WorkspaceError::Io {
        what: format!("{what} for {session}"),
        path: PathBuf::from(session),
        source,
    }
}

fn join_error(e: tokio::task::JoinError, ws: &Workspace) -> WorkspaceError {
    WorkspaceError::Repo {
        path: ws.path.clone(),
        reason: format!("the git task failed: {e}"),
    }
}

/// A vetting finding as a `cap.error` `git_dirty` warning.
pub(crate) fn finding_event(f: &Finding, session: &str, urn: &str) -> CapEvent {
    let mut event = CapEvent::error(
        ErrorKind::GitDirty,
        format!("{session}: {}", f.describe()),
        false,
    );
    if let CapEvent::Error(e) = &mut event {
        let mut details = serde_json::to_value(f).unwrap_or_else(|_| json!({}));
        if let Some(d) = details.as_object_mut() {
            d.insert("session".into(), Value::String(session.to_owned()));
        }
        e.details = Nullable::Value(details);
    }
    event.set_meta(META_SESSION, Value::String(urn.to_owned()));
    event.set_meta("capfleet.severity", Value::String("warning".into()));
    event
}

fn test_line(r: &TestResult, ok: bool) -> TestLine {
    TestLine {
        framework: r.framework.get().cloned().unwrap_or_default(),
        passed: r.passed,
        failed: r.failed,
        skipped: r.skipped.get().copied().unwrap_or(0),
        ok,
    }
}

async fn publish_commit(
    c: &Commit,
    ws: &Workspace,
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
    urn: &str,
) {
    publish_json(store, publisher, ws, urn, CodingArtifact::Commit, c).await;
}

/// Store a JSON payload as `artifacts/<session>/<type>.json` and announce it.
async fn publish_json<T: serde::Serialize>(
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
    ws: &Workspace,
    urn: &str,
    kind: CodingArtifact,
    payload: &T,
) {
    let Ok(value) = serde_json::to_value(payload) else {
        return;
    };
    let bytes = serde_json::to_vec_pretty(&value).unwrap_or_default();
    let file = format!("{}.json", kind.short_name());
    match store.write(&ws.session, &file, &bytes) {
        Ok(path) => {
            let inline = (bytes.len() <= INLINE_MAX).then_some(value);
            let event = artifact_event(
                &format!("{}-{}", kind.short_name(), ws.session),
                kind.mime(),
                &format!("{}.{file}", ws.session),
                &path,
                bytes.len() as u64,
                inline,
                urn,
            );
            publisher.publish(None, EventBody::Cap { event }).await;
        }
        Err(e) => tracing::error!(session = %ws.session, "cannot store {file}: {e}"),
    }
}

/// The final master plan as a `plan_doc` artifact (`artifacts/plan_doc.json`).
pub(crate) async fn publish_plan_doc(
    plan: &PlanDoc,
    store: &Arc<ArtifactStore>,
    publisher: &mut Publisher,
    router_urn: &str,
) -> Option<PathBuf> {
    let value = serde_json::to_value(plan).ok()?;
    let bytes = serde_json::to_vec_pretty(&value).ok()?;
    std::fs::create_dir_all(store.dir()).ok()?;
    let path = store.dir().join("plan_doc.json");
    if let Err(e) = std::fs::write(&path, &bytes) {
        tracing::error!(path = %path.display(), "cannot store the plan: {e}");
        return None;
    }
    let inline = (bytes.len() <= INLINE_MAX).then_some(value);
    let event = artifact_event(
        "plan_doc",
        CodingArtifact::PlanDoc.mime(),
        "plan_doc.json",
        &path,
        bytes.len() as u64,
        inline,
        router_urn,
    );
    publisher.publish(None, EventBody::Cap { event }).await;
    Some(path)
}
