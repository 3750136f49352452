//! Worktrees end to end, in real git repositories in temp dirs: each coding session
//! of a `capfleet run` works in its own worktree on its own branch; diffs are per
//! session and never mixed; `merge` reports conflicts and changes nothing; `clean`
//! never loses work; the user's dirty working tree is left alone; outside git,
//! sessions get plain directories; a bad `base` is a config error and a repository
//! without commits fails the run before any agent starts.

use common::EnvMarker;
use common::repo::{Fixture, cap_events, stderr, stdout};
use common::sim::fleet_session;

use crate::common;

/// A session script: one turn that writes `file` with `text`, then says `said`.
fn writes(file: &str, text: &str, said: &str) -> String {
    format!(
        "[[turn]]\nsteps = [{{ write = \"{file}\", content = \"{text}\" }}, {{ say = \"{said}\" }}]\n"
    )
}

fn fleet(name: &str, start: &[&str], sessions: &str) -> String {
    let start: Vec<String> = start.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "[fleet]\nname = \"{name}\"\nstart = [{}]\ntask = \"change shared.txt\"\n\n{sessions}",
        start.join(", ")
    )
}

#[test]
fn two_sessions_edit_the_same_file_apart_and_the_second_merge_conflicts() {
    let f = Fixture::git_repo(&[("shared.txt", "base\n"), ("README.md", "# demo\n")]);
    let m = EnvMarker::new("ws-two");
    f.write("a.toml", &writes("shared.txt", "from a\\n", "a done"));
    f.write("b.toml", &writes("shared.txt", "from b\\n", "b done"));
    let sessions =
        fleet_session("a", "a.toml", &m, "") + fleet_session("b", "b.toml", &m, "").as_str();
    f.write("fleet.toml", &fleet("two", &["a", "b"], &sessions));
    let out = f.capfleet(&["run", "fleet.toml", "--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(m.processes().is_empty(), "no agent left behind");

    // Each worktree holds its own session's change only; the checkout is untouched.
    assert_eq!(
        std::fs::read_to_string(f.worktree("a").join("shared.txt")).unwrap(),
        "from a\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.worktree("b").join("shared.txt")).unwrap(),
        "from b\n"
    );
    assert_eq!(f.read("shared.txt"), "base\n");
    let run = f.run_id();
    let branches = f.git(&["branch", "--list", "capfleet/*"]);
    assert!(
        branches.contains(&format!("capfleet/{run}/a")),
        "{branches}"
    );
    assert!(
        branches.contains(&format!("capfleet/{run}/b")),
        "{branches}"
    );

    // Both diffs are right and neither carries the other's change.
    let diff_a = f.artifact("a", "diff.patch");
    let diff_b = f.artifact("b", "diff.patch");
    assert!(
        diff_a.starts_with("diff --git a/shared.txt b/shared.txt\n"),
        "{diff_a}"
    );
    assert!(
        diff_a.contains("-base\n+from a\n") && !diff_a.contains("from b"),
        "{diff_a}"
    );
    assert!(
        diff_b.contains("-base\n+from b\n") && !diff_b.contains("from a"),
        "{diff_b}"
    );
    let journal = f.journal();
    let diffs = cap_events(&journal, "cap.artifact")
        .into_iter()
        .filter(|a| a["mime_type"] == "application/vnd.cap.coding.diff.v1+text")
        .count();
    assert_eq!(diffs, 2);
    let commits = cap_events(&journal, "cap.artifact")
        .into_iter()
        .filter(|a| a["mime_type"] == "application/vnd.cap.coding.commit.v1+json")
        .map(|a| a["content"].clone())
        .collect::<Vec<_>>();
    assert_eq!(commits.len(), 2, "--commit committed both");
    assert_eq!(commits[0]["files_changed"], 1);
    assert_eq!(commits[0]["author"], "sim");
    let summary = stderr(&out);
    assert!(summary.contains(&format!("capfleet/{run}/a")), "{summary}");

    // `capfleet diff` shows the live diff of one session.
    let shown = f.capfleet(&["diff", "latest", "b"]);
    assert_eq!(shown.status.code(), Some(0));
    assert!(stdout(&shown).contains("+from b"), "{}", stdout(&shown));
    assert!(!stdout(&shown).contains("from a"));

    // The first merge fast-forwards; the second conflicts and changes nothing.
    let merged = f.capfleet(&["merge", "latest", "a"]);
    assert_eq!(merged.status.code(), Some(0), "{}", stderr(&merged));
    assert!(
        stdout(&merged).contains("fast-forward"),
        "{}",
        stdout(&merged)
    );
    assert_eq!(f.read("shared.txt"), "from a\n");
    let head = f.git(&["rev-parse", "HEAD"]);
    let conflict = f.capfleet(&["merge", "latest", "b"]);
    assert_eq!(conflict.status.code(), Some(1));
    let why = stderr(&conflict);
    assert!(
        why.contains("merge_conflict") && why.contains("shared.txt"),
        "{why}"
    );
    assert_eq!(
        f.read("shared.txt"),
        "from a\n",
        "never auto-resolved, no markers"
    );
    assert_eq!(f.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(
        f.git(&["status", "--porcelain", "--untracked-files=no"]),
        ""
    );
}

#[test]
fn clean_refuses_to_lose_work_force_removes_and_merged_branches_go_quietly() {
    let f = Fixture::git_repo(&[("shared.txt", "base\n")]);
    let m = EnvMarker::new("ws-clean");
    f.write("a.toml", &writes("notes/todo.txt", "keep me\\n", "a done"));
    f.write(
        "b.toml",
        "[[turn]]\nsteps = [{ say = \"nothing to change\" }]\n",
    );
    let sessions =
        fleet_session("a", "a.toml", &m, "") + fleet_session("b", "b.toml", &m, "").as_str();
    f.write("fleet.toml", &fleet("keep", &["a", "b"], &sessions));
    let out = f.capfleet(&["run", "fleet.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (run, wt_a, wt_b) = (f.run_id(), f.worktree("a"), f.worktree("b"));
    assert!(
        wt_a.join("notes/todo.txt").is_file(),
        "worktrees stay after the run"
    );

    let refused = f.capfleet(&["clean", &run]);
    assert_eq!(refused.status.code(), Some(1));
    let why = stderr(&refused);
    assert!(
        why.contains("notes/todo.txt") && why.contains("would be lost"),
        "{why}"
    );
    assert!(
        wt_a.join("notes/todo.txt").is_file(),
        "refused: nothing removed"
    );
    assert!(!wt_b.exists(), "b had no work: cleaned");
    assert!(!f.git(&["branch"]).contains(&format!("capfleet/{run}/b")));

    let forced = f.capfleet(&["clean", &run, "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert!(!wt_a.exists());
    assert!(stdout(&forced).contains("dropping 1 uncommitted file"));

    // Committed, merged: clean says nothing and removes worktree and branch.
    let m2 = EnvMarker::new("ws-merged");
    let sessions = fleet_session("a", "a.toml", &m2, "");
    f.write("fleet2.toml", &fleet("merged", &["a"], &sessions));
    let out = f.capfleet(&["run", "fleet2.toml", "--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = f.run_id();
    let unmerged = f.capfleet(&["clean", &run]);
    assert_eq!(unmerged.status.code(), Some(1));
    assert!(
        stderr(&unmerged).contains(&format!("capfleet merge {run} a,")),
        "the fix names the real run: {}",
        stderr(&unmerged)
    );
    let merged = f.capfleet(&["merge", &run, "a"]);
    assert_eq!(merged.status.code(), Some(0), "{}", stderr(&merged));
    let cleaned = f.capfleet(&["clean", &run]);
    assert_eq!(cleaned.status.code(), Some(0));
    assert_eq!(stderr(&cleaned), "", "a merged branch cleans silently");
    assert!(!f.worktree("a").exists());
    assert!(!f.git(&["branch"]).contains("capfleet/"));
    assert_eq!(f.read("notes/todo.txt"), "keep me\n", "the work is in main");
    assert!(f.git(&["worktree", "list"]).lines().count() == 1);
    let again = f.capfleet(&["clean", &run]);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(
        stdout(&again),
        format!("nothing left to clean in run {run}: an earlier clean removed its workspaces\n")
    );
    let late = f.capfleet(&["merge", &run, "a"]);
    assert_eq!(late.status.code(), Some(1));
    assert!(
        stderr(&late).contains("the run was cleaned: a's worktree and branch")
            && !stderr(&late).contains("class="),
        "in the user's words, not libgit2's: {}",
        stderr(&late)
    );
}

#[test]
fn a_dirty_working_tree_is_left_exactly_as_it_was() {
    let f = Fixture::git_repo(&[("shared.txt", "base\n"), ("staged.txt", "one\n")]);
    f.write("shared.txt", "the user's own edit\n");
    f.write("staged.txt", "staged edit\n");
    f.git(&["add", "staged.txt"]);
    f.write("scratch.txt", "untracked notes\n");
    let before = f.git(&["status", "--porcelain"]);
    let m = EnvMarker::new("ws-dirty");
    f.write("a.toml", &writes("shared.txt", "agent edit\\n", "done"));
    f.write(
        "fleet.toml",
        &fleet("dirty", &["a"], &fleet_session("a", "a.toml", &m, "")),
    );
    let out = f.capfleet(&["run", "fleet.toml", "--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(f.read("shared.txt"), "the user's own edit\n");
    assert_eq!(f.read("staged.txt"), "staged edit\n");
    assert_eq!(f.read("scratch.txt"), "untracked notes\n");
    // Same status, staged change still staged, capfleet's own dirs excluded.
    let after = f.git(&["status", "--porcelain"]);
    assert_eq!(
        after
            .replace("?? a.toml\n", "")
            .replace("?? fleet.toml\n", ""),
        before
    );
    let exclude = std::fs::read_to_string(f.path().join(".git/info/exclude")).unwrap();
    assert!(exclude.contains(".cap-worktrees/") && exclude.contains(".capfleet/"));
    assert!(
        !f.path().join(".gitignore").exists(),
        "the user's .gitignore is not touched"
    );
    // The session started from HEAD, not from the user's uncommitted state.
    let diff = f.artifact("a", "diff.patch");
    assert!(diff.contains("-base\n+agent edit\n"), "{diff}");
    assert_eq!(
        std::fs::read_to_string(f.worktree("a").join("staged.txt")).unwrap(),
        "one\n"
    );
    // Merging into a dirty tree is refused.
    let refused = f.capfleet(&["merge", "latest", "a"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("git_dirty"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(f.read("shared.txt"), "the user's own edit\n");
}

#[test]
fn outside_a_repository_sessions_work_in_plain_directories() {
    let f = Fixture::plain();
    let m = EnvMarker::new("ws-plain");
    f.write("a.toml", &writes("out/hello.txt", "hi\\n", "done"));
    f.write("b.toml", &writes("hello.txt", "other\\n", "done"));
    let sessions =
        fleet_session("a", "a.toml", &m, "") + fleet_session("b", "b.toml", &m, "").as_str();
    f.write("fleet.toml", &fleet("plain", &["a", "b"], &sessions));
    let out = f.capfleet(&["run", "fleet.toml", "--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("plain directory"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(f.worktree("a").join("out/hello.txt")).unwrap(),
        "hi\n"
    );
    assert!(
        !f.worktree("a").join("hello.txt").exists(),
        "b's file stays in b's directory"
    );
    assert!(!f.path().join("hello.txt").exists());
    let diff = f.artifact("a", "diff.patch");
    assert!(
        diff.contains("+++ b/out/hello.txt") && diff.contains("+hi"),
        "{diff}"
    );
    let stat = f.capfleet(&["diff", "latest", "a", "--stat"]);
    assert_eq!(stdout(&stat), "A out/hello.txt\n");
    let refused = f.capfleet(&["clean", "latest"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("out/hello.txt"));
    assert_eq!(
        f.capfleet(&["clean", "latest", "--force"]).status.code(),
        Some(0)
    );
    assert!(!f.worktree("a").exists() && !f.worktree("b").exists());
}

#[test]
fn base_is_validated_and_used() {
    let f = Fixture::git_repo(&[("v.txt", "one\n")]);
    f.git(&["tag", "v1"]);
    f.write("v.txt", "two\n");
    f.commit_all("second");
    let m = EnvMarker::new("ws-base");
    f.write("a.toml", "[[turn]]\nsteps = [{ say = \"ok\" }]\n");
    let session = fleet_session("a", "a.toml", &m, "");
    f.write(
        "bad.toml",
        &format!("[fleet]\nstart = \"a\"\ntask = \"t\"\nbase = \"no-such-rev\"\n\n{session}"),
    );
    let bad = f.capfleet(&["run", "bad.toml"]);
    assert_eq!(bad.status.code(), Some(2));
    let why = stderr(&bad);
    assert!(
        why.contains("bad.toml:4") && why.contains("fleet.base"),
        "{why}"
    );
    assert!(why.contains("no-such-rev"), "{why}");
    assert!(!f.path().join(".capfleet").exists(), "nothing ran");

    f.write(
        "good.toml",
        &format!("[fleet]\nstart = \"a\"\ntask = \"t\"\nbase = \"v1\"\n\n{session}"),
    );
    let good = f.capfleet(&["run", "good.toml"]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    assert_eq!(
        std::fs::read_to_string(f.worktree("a").join("v.txt")).unwrap(),
        "one\n"
    );
}

#[test]
fn a_repository_without_commits_fails_the_run_before_any_agent_starts() {
    let f = Fixture::plain();
    f.git(&["init", "-q", "-b", "main"]);
    let m = EnvMarker::new("ws-unborn");
    f.write("a.toml", "[[turn]]\nsteps = [{ say = \"never\" }]\n");
    f.write(
        "fleet.toml",
        &fleet("unborn", &["a"], &fleet_session("a", "a.toml", &m, "")),
    );
    let out = f.capfleet(&["run", "fleet.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let why = stderr(&out);
    assert!(
        why.contains("cannot provision the workspaces") && why.contains("no commit"),
        "{why}"
    );
    let journal = f.journal();
    assert!(
        journal.iter().all(|r| r["type"] != "state"),
        "no session started: {journal:?}"
    );
    assert_eq!(journal.last().unwrap()["type"], "run_ended");
    assert!(
        !f.path()
            .join(".cap-worktrees")
            .join(f.run_id())
            .join("a")
            .exists()
    );
}
