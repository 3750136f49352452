//! What capfleet prints for a person fits the terminal (issue 34, point 7): the
//! stock demo fleet run in a real terminal (tmux) of 80 and 120 columns, then
//! `capfleet runs` and `capfleet log latest` there: the whole history, with the
//! lines the terminal wrapped joined again (`capture-pane -J`), has no line wider
//! than the terminal (a wrapped word would make one); paths are relative to the
//! working directory (the fixture's absolute path is nowhere); each summary row
//! keeps its cost and restarts on its line. Without a terminal, `COLUMNS` is the
//! width; with neither, the lines are as they always were.

use std::path::{Path, PathBuf};

use crate::common::repo::{Fixture, stdout};
use crate::common::tmux::{EXITED, Tmux};

const SESSIONS: [&str; 4] = ["planner", "worker-a", "worker-b", "reviewer"];

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fleets/demo.toml")
}

/// Lines wider than `width` columns.
fn too_wide(screen: &str, width: usize) -> Vec<&str> {
    screen
        .lines()
        .filter(|l| l.trim_end().chars().count() > width)
        .collect()
}

/// The demo, then `runs` and `log latest`, in a terminal `width` columns wide.
fn demo_at(width: usize) {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let bin = crate::common::BIN;
    let line = format!(
        "env -u NO_COLOR -u COLUMNS XDG_CONFIG_HOME={config} sh -c '{bin} run {demo} && {bin} runs && {bin} log latest'",
        config = repo.path().join(".config-test").display(),
        demo = demo().display(),
    );
    let tmux = Tmux::start("width", width as u16, repo.path(), &line);
    let end = tmux.wait_for("the end of the run, runs and log", |s| s.contains(EXITED));
    assert!(end.contains(&format!("{EXITED} 0]")), "{end}");
    let joined = tmux.joined();
    let wide = too_wide(&joined, width);
    assert!(
        wide.is_empty(),
        "lines the terminal wrapped at {width} columns:\n{}\n\n{joined}",
        wide.join("\n")
    );
    assert_eq!(
        joined.lines().count(),
        end.lines().count(),
        "no line went on in the next one"
    );
    // The run's own lines (before `runs`' header; `log` shows the records' JSON as
    // it is) show no absolute path.
    let dir = repo.path().display().to_string();
    let runs_header = joined.find("started (UTC)").expect("runs' header");
    let run_part = &joined[..runs_header];
    assert!(
        !run_part.contains(&dir),
        "paths relative to the working directory ({dir}):\n{run_part}"
    );
    let journal = format!(".capfleet/runs/{}/journal.jsonl", repo.run_id());
    let words: Vec<&str> = run_part.split_whitespace().collect();
    assert!(
        words.contains(&format!("{journal})").as_str()),
        "the header's journal: {journal}\n{run_part}"
    );
    assert!(
        words.contains(&journal.as_str()),
        "the summary's journal: {journal}\n{run_part}"
    );

    // The summary: each session once, its cost and restarts on its line.
    for name in SESSIONS {
        let rows: Vec<&str> = joined
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter(|l| l.split_whitespace().next() == Some(name))
            .collect();
        assert_eq!(rows.len(), 1, "{name} once in the summary:\n{joined}");
        assert!(
            rows[0].contains(" $") && rows[0].contains("restarts "),
            "{name}'s row whole on its line: {:?}",
            rows[0]
        );
    }
    // Every worker's workspace: its branch and its (relative) worktree shown.
    for name in ["worker-a", "worker-b"] {
        let branch = format!("capfleet/{}/{name}", repo.run_id());
        assert!(joined.contains(&branch), "{branch}:\n{joined}");
        assert!(
            joined.contains(&format!(".cap-worktrees/{}/{name}", repo.run_id())),
            "{joined}"
        );
    }
    // `runs`: its header and the run's row; `log`: the routed task.
    assert!(
        joined
            .lines()
            .any(|l| l.starts_with(&repo.run_id()) && l.contains("completed")),
        "{joined}"
    );
    let flowing = joined.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flowing.contains("fleet -> planner via task"), "{joined}");
}

#[test]
fn the_demo_runs_and_logs_fit_80_columns() {
    demo_at(80);
}

#[test]
fn the_demo_runs_and_logs_fit_120_columns() {
    demo_at(120);
}

/// Not a terminal: `COLUMNS` is the width; without it the table is as it always was.
#[test]
fn without_a_terminal_columns_decides_and_nothing_changes_without_it() {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let out = repo.capfleet(&["run", demo().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let whole = stdout(&repo.command(&["runs"]).output().unwrap());
    assert_eq!(
        whole.lines().next(),
        Some(
            format!(
                "{:<24} {:<22} {:>10} {:>8}  started (UTC)",
                "run", "state", "cost", "sessions"
            )
            .as_str()
        ),
        "{whole}"
    );
    let narrow = stdout(
        &repo
            .command(&["runs"])
            .env("COLUMNS", "60")
            .output()
            .unwrap(),
    );
    assert!(too_wide(&narrow, 60).is_empty(), "{narrow}");
    assert!(
        narrow.lines().next().unwrap().starts_with("run "),
        "{narrow}"
    );
    assert!(
        narrow.contains(&repo.run_id()) && narrow.contains("completed"),
        "{narrow}"
    );
    let log = stdout(
        &repo
            .command(&["log", "latest"])
            .env("COLUMNS", "80")
            .output()
            .unwrap(),
    );
    assert!(too_wide(&log, 80).is_empty(), "{log}");
    let whole_log = stdout(&repo.command(&["log", "latest"]).output().unwrap());
    assert!(
        whole_log.lines().any(|l| l.chars().count() > 80),
        "without a width a record is one line, however long"
    );
}
