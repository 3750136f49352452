//! The run's workspaces as `run` says them: one line per workspace before the run,
//! and after it the summary lines (worktrees, branches, diffs, findings, tests,
//! commits, artifacts).

use capfleet_engine::run::{RunReport, WorkspacePhase};
use capfleet_engine::workspace::Kind;

use capfleet_app::fleet::RunDir;
use capfleet_app::human::fit::Fit;
use capfleet_app::human::table::{Col, Overflow, Table, cell, with_unit};
use capfleet_app::style::Style;

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
    let artifacts = run.path.join(capfleet_engine::workspace::ARTIFACTS_DIR);
    if artifacts.is_dir() {
        say(&format!("  artifacts {}", fit.path(&artifacts)), 4);
    }
}

/// The files stored for `session` under the run's artifacts, sorted.
fn stored(run: &std::path::Path, session: &str) -> Vec<String> {
    let dir = run
        .join(capfleet_engine::workspace::ARTIFACTS_DIR)
        .join(capfleet_engine::workspace::sanitize(session));
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
