//! A run's workspaces: provisioned before any agent starts (a failure fails the run
//! with the git error), recorded in the run directory, each coding session's `cwd`
//! pointed into its own.

use std::sync::Arc;

use capfleet_engine::run::WorkspacePhase;
use capfleet_engine::workspace::provision::{Request, provision};
use capfleet_engine::workspace::{ArtifactStore, Kind, RunWorkspaces, Workspace, WorkspaceError};
use serde_json::{Value, json};

use crate::fleet::{Fleet, RunDir};

/// Provision every coding session's workspace and bind every session to the run's
/// artifact store.
pub async fn prepare(
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
pub fn reuse(
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
