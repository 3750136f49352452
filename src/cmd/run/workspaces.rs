//! The run's workspaces as the CLI handles them: provisioned before any agent starts
//! (a failure fails the run with the git error), recorded in the run directory, each
//! coding session's `cwd` pointed into its own; and after the run, the summary lines
//! (worktrees, branches, diffs, findings, tests, commits, artifacts).

use std::sync::Arc;

use capfleet_engine::run::{RunReport, WorkspacePhase};
use capfleet_engine::workspace::provision::{Request, provision};
use capfleet_engine::workspace::{ArtifactStore, Kind, RunWorkspaces, Workspace, WorkspaceError};
use serde_json::{Value, json};

use crate::fleet::{Fleet, RunDir};
use crate::human::fit::Fit;
use crate::human::table::{Col, Overflow, Table, cell, with_unit};
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
pub(super) fn announce(phase: &WorkspacePhase, fit: &Fit) {
    for w in &phase.workspaces {
        let line = match &w.kind {
            Kind::Worktree { branch, .. } => format!(
                "capfleet: {} works in {} (branch {branch})",
                w.session,
                fit.path(&w.path)
            ),
            Kind::Plain => format!(
                "capfleet: {} works in {} (plain directory: not in a git repository)",
                w.session,
                fit.path(&w.path)
            ),
        };
        eprintln!("{}", fit.wrap(&line, 4));
    }
}

/// A workspace's row: session, changes, branch (or `plain`), path, commit, tests.
/// The path, commit and tests go on the next line first.
const COLUMNS: [Col; 6] = [
    Col::left("    ", 20, 0),
    Col::left(" ", 22, 1),
    Col::left(" ", 0, 2),
    Col::left(" ", 0, 3),
    Col::left("", 0, 4),
    Col::left("", 0, 5),
];

/// The workspace part of the run summary.
pub(super) fn summary(r: &RunReport, run: &RunDir, s: Style, fit: &Fit) {
    if r.workspaces.is_empty() && r.plan_doc.is_none() {
        return;
    }
    let say = |line: &str, indent: usize| eprintln!("{}", fit.wrap(line, indent));
    say(
        &format!(
            "  workspaces (capfleet diff {0} | merge {0} <session> | clean {0}):",
            run.id
        ),
        4,
    );
    let mut table = Table::new(&COLUMNS);
    for w in &r.workspaces {
        // `branch  path`, or `plain path`.
        let place = match &w.branch {
            Some(b) => with_unit(b, " "),
            None => cell("plain"),
        };
        let changes = if w.files == 0 {
            "no changes".to_owned()
        } else {
            format!("{} files +{} -{}", w.files, w.insertions, w.deletions)
        };
        let commit = w.commit.as_ref().map_or_else(String::new, |c| {
            format!("  commit {}", &c[..c.len().min(10)])
        });
        let tests = w.tests.as_ref().map_or_else(String::new, |t| {
            let verdict = if t.ok { s.ok("ok") } else { s.err("FAILED") };
            format!(
                "  tests ({}) {verdict}: {} passed, {} failed, {} skipped",
                t.framework, t.passed, t.failed, t.skipped
            )
        });
        table.row(vec![
            cell(&w.session),
            cell(changes),
            place,
            cell(fit.path(&w.path)),
            cell(commit),
            cell(tests),
        ]);
    }
    for (w, lines) in r.workspaces.iter().zip(table.lines(fit, Overflow::Next)) {
        for line in lines {
            eprintln!("{line}");
        }
        let stored = stored(&run.path, &w.session);
        if !stored.is_empty() {
            say(&format!("      artifacts: {}", stored.join(" ")), 8);
        }
        for f in &w.findings {
            say(
                &format!("      {} git_dirty: {}", s.warn("!"), f.describe()),
                8,
            );
        }
        if let Some(why) = &w.not_committed {
            say(&format!("      {why}"), 8);
        }
        for e in &w.errors {
            say(&format!("      {} {e}", s.err("error:")), 8);
        }
    }
    if let Some(doc) = &r.plan_doc {
        say(&format!("  plan_doc {}", fit.path(doc)), 4);
    }
    let artifacts = run
        .path
        .join(capfleet_engine::workspace::artifacts::ARTIFACTS_DIR);
    if artifacts.is_dir() {
        say(&format!("  artifacts {}", fit.path(&artifacts)), 4);
    }
}

/// The files stored for `session` under the run's artifacts, sorted.
fn stored(run: &std::path::Path, session: &str) -> Vec<String> {
    let dir = run
        .join(capfleet_engine::workspace::artifacts::ARTIFACTS_DIR)
        .join(capfleet_engine::workspace::artifacts::sanitize(session));
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
