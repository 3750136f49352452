//! The run's workspaces as the CLI handles them: provisioned before any agent starts
//! (a failure fails the run with the git error), recorded in the run directory, each
//! coding session's `cwd` pointed into its own; and after the run, the summary lines
//! (worktrees, branches, diffs, findings, tests, commits, artifacts).

use std::sync::Arc;

use capfleet_actors::run::{RunReport, WorkspacePhase};
use capfleet_actors::workspace::provision::{Request, provision};
use capfleet_actors::workspace::{ArtifactStore, Kind, RunWorkspaces, Workspace, WorkspaceError};
use serde_json::{Value, json};

use crate::fleet::{Fleet, RunDir};
use crate::style::Style;

/// Provision every coding session's workspace and bind every session to the run's
/// artifact store.
pub(crate) async fn prepare(
    fleet: &mut Fleet,
    run: &RunDir,
    commit: bool,
) -> Result<WorkspacePhase, WorkspaceError> {
    let requests: Vec<Request> = fleet
        .sessions
        .iter()
        .filter(|s| s.coding)
        .map(|s| Request {
            session: s.spec.name.clone(),
            cwd: s.spec.launch.config.cwd.clone().into(),
            paths: s.paths.clone(),
            test_command: s.test_command.clone(),
        })
        .collect();
    let (id, base) = (run.id.clone(), fleet.base.clone());
    let provisioned =
        tokio::task::spawn_blocking(move || provision(&id, base.as_deref(), &requests))
            .await
            .map_err(|e| WorkspaceError::Repo {
                path: run.path.clone(),
                reason: format!("the provisioning task failed: {e}"),
            })??;
    provisioned.save(&run.path)?;
    Ok(bind(fleet, run, provisioned, commit))
}

/// A resumed run's workspaces: those it provisioned (`workspaces.json`), reused as
/// they are — never reset, never provisioned again over work.
pub(crate) fn reuse(
    fleet: &mut Fleet,
    run: &RunDir,
    commit: bool,
) -> Result<WorkspacePhase, WorkspaceError> {
    let provisioned = RunWorkspaces::load(&run.path)?;
    Ok(bind(fleet, run, provisioned, commit))
}

/// Point every coding session at its workspace and every session at the run's
/// artifact store.
fn bind(
    fleet: &mut Fleet,
    run: &RunDir,
    provisioned: RunWorkspaces,
    commit: bool,
) -> WorkspacePhase {
    let store = Arc::new(ArtifactStore::new(&run.path));
    store.limit_text_to(fleet.journal_max_bytes);
    for s in &mut fleet.sessions {
        s.spec.artifacts = Some(store.clone());
        if let Some(w) = provisioned.find(&s.spec.name) {
            let config = &mut s.spec.launch.config;
            config.cwd = w.cwd.display().to_string();
            *config = config
                .clone()
                .with_profile_config("coding", coding_config(w));
        }
    }
    WorkspacePhase {
        run_id: run.id.clone(),
        store,
        workspaces: provisioned.workspaces,
        commit,
        test_timeout: fleet.turn_timeout,
    }
}

/// What the agent is told of its workspace in `profile_config.coding`.
fn coding_config(w: &Workspace) -> Value {
    let mut c = json!({ "workspace": { "root": w.path } });
    if let Kind::Worktree { branch, base, .. } = &w.kind {
        c["workspace"]["branch"] = json!(branch);
        c["workspace"]["base"] = json!(base);
    }
    if !w.paths.is_empty() {
        c["paths"] = json!(w.paths);
    }
    if let Some(t) = &w.test_command {
        c["test_command"] = json!(t);
    }
    c
}

/// One line per provisioned workspace, before the run.
pub(super) fn announce(phase: &WorkspacePhase) {
    for w in &phase.workspaces {
        match &w.kind {
            Kind::Worktree { branch, .. } => eprintln!(
                "capfleet: {} works in {} (branch {branch})",
                w.session,
                w.path.display()
            ),
            Kind::Plain => eprintln!(
                "capfleet: {} works in {} (plain directory: not in a git repository)",
                w.session,
                w.path.display()
            ),
        }
    }
}

/// The workspace part of the run summary.
pub(super) fn summary(r: &RunReport, run: &RunDir, s: Style) {
    if r.workspaces.is_empty() && r.plan_doc.is_none() {
        return;
    }
    eprintln!(
        "  workspaces (capfleet diff {0} | merge {0} <session> | clean {0}):",
        run.id
    );
    for w in &r.workspaces {
        let place = match &w.branch {
            Some(b) => format!("{b}  {}", w.path.display()),
            None => format!("plain {}", w.path.display()),
        };
        let changes = if w.files == 0 {
            "no changes".to_owned()
        } else {
            format!("{} files +{} -{}", w.files, w.insertions, w.deletions)
        };
        let mut line = format!("    {:<20} {changes:<22} {place}", w.session);
        if let Some(c) = &w.commit {
            line.push_str(&format!("  commit {}", &c[..c.len().min(10)]));
        }
        if let Some(t) = &w.tests {
            let verdict = if t.ok { s.ok("ok") } else { s.err("FAILED") };
            line.push_str(&format!(
                "  tests ({}) {verdict}: {} passed, {} failed, {} skipped",
                t.framework, t.passed, t.failed, t.skipped
            ));
        }
        eprintln!("{line}");
        let stored = stored(&run.path, &w.session);
        if !stored.is_empty() {
            eprintln!("      artifacts: {}", stored.join(" "));
        }
        for f in &w.findings {
            eprintln!("      {} git_dirty: {}", s.warn("!"), f.describe());
        }
        if let Some(why) = &w.not_committed {
            eprintln!("      {}", why);
        }
        for e in &w.errors {
            eprintln!("      {} {e}", s.err("error:"));
        }
    }
    if let Some(doc) = &r.plan_doc {
        eprintln!("  plan_doc {}", doc.display());
    }
    let artifacts = run
        .path
        .join(capfleet_actors::workspace::artifacts::ARTIFACTS_DIR);
    if artifacts.is_dir() {
        eprintln!("  artifacts {}", artifacts.display());
    }
}

/// The files stored for `session` under the run's artifacts, sorted.
fn stored(run: &std::path::Path, session: &str) -> Vec<String> {
    let dir = run
        .join(capfleet_actors::workspace::artifacts::ARTIFACTS_DIR)
        .join(capfleet_actors::workspace::artifacts::sanitize(session));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
