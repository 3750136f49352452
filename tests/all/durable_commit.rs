//! Exactly-once `--commit` across kills (issue 17, point 5): each commit is journaled
//! as started (the branch head it goes on, synced) before it is made and as made
//! after. A run `SIGKILL`ed after one session's commit, during its test command, is
//! resumed to finish its workspaces: the commit made is not made again, the other
//! session's is made once. A run cut between a commit's start and its record (the
//! journal as a kill right after git's write leaves it) finds the commit on the
//! branch and records it instead of committing again; one cut before git's write
//! commits once. A `capfleet merge` cut after its checkout, before `HEAD` moved, is
//! finished by the next one (the merge journaled as started), not redone; one cut
//! after `HEAD` moved is recorded as made.

use std::time::Duration;

use serde_json::Value;

use crate::common::EnvMarker;
use crate::common::repo::{Fixture, stderr, stdout};
use crate::common::sim::fleet_session;
use crate::common::wait_until;

/// Two sessions, `a` and `b`, each writing its own file; `a_extra` goes into `a`.
fn two(f: &Fixture, m: &EnvMarker, a_extra: &str) {
    for s in ["a", "b"] {
        f.write(
            &format!("{s}.toml"),
            &format!(
                "[[turn]]\nsteps = [{{ write = \"{s}.txt\", content = \"{s}\\n\" }}, {{ say = \"{s} done\" }}]\n"
            ),
        );
    }
    let sessions =
        fleet_session("a", "a.toml", m, a_extra) + fleet_session("b", "b.toml", m, "").as_str();
    f.write(
        "fleet.toml",
        &format!("[fleet]\nname = \"c\"\nstart = [\"a\", \"b\"]\ntask = \"write\"\n\n{sessions}"),
    );
}

/// The commits on `session`'s branch since the base.
fn commits_on(f: &Fixture, session: &str) -> usize {
    let branch = format!("capfleet/{}/{session}", f.run_id());
    f.git(&["rev-list", "--count", &format!("main..{branch}")])
        .trim()
        .parse()
        .unwrap()
}

/// The journal records of `kind` for `session`.
fn records<'a>(j: &'a [Value], kind: &str, session: &str) -> Vec<&'a Value> {
    j.iter()
        .filter(|r| r["type"] == kind && r["session"] == session)
        .collect()
}

/// A run of [`two`] with `--commit`, completed.
fn committed(marker: &str) -> Fixture {
    let f = Fixture::git_repo(&[("README.md", "x\n")]);
    let m = EnvMarker::new(marker);
    two(&f, &m, "");
    let out = f.capfleet(&["run", "fleet.toml", "--commit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    f
}

/// Cut the journal right after `session`'s last `commit_started` (as a kill then
/// leaves it).
fn cut_after_last_start(f: &Fixture, session: &str) {
    let path = f.run_dir().join("journal.jsonl");
    let whole = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let at = lines
        .iter()
        .rposition(|l| {
            l.contains("\"commit_started\"") && l.contains(&format!("\"session\":\"{session}\""))
        })
        .unwrap();
    std::fs::write(&path, lines[..=at].join("\n") + "\n").unwrap();
}

/// `git` in `session`'s worktree, successfully; its output.
fn git_in(f: &Fixture, session: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(f.worktree(session))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    stdout(&out)
}

/// Undo `session`'s commit: its branch back where it was, the work staged as before.
fn unmake(f: &Fixture, session: &str) {
    git_in(f, session, &["reset", "-q", "--soft", "HEAD~1"]);
}

#[test]
fn a_run_killed_between_two_commits_commits_each_once_on_resume() {
    let f = Fixture::git_repo(&[("README.md", "x\n")]);
    let m = EnvMarker::new("commit-kill");
    let once = tempfile::tempdir().unwrap();
    let flag = once.path().join("tested");
    // `a`'s test command hangs the first time only: the kill comes there.
    let test = format!(
        "test_command = [\"sh\", \"-c\", \"test -e {0} || {{ touch {0}; sleep 300; }}\"]\n",
        flag.display()
    );
    two(&f, &m, &test);
    let mut child = f
        .command(&["run", "fleet.toml", "--commit"])
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(20), || flag
            .exists()),
        "a's test command runs"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(commits_on(&f, "a"), 1, "a committed before the kill");
    assert_eq!(commits_on(&f, "b"), 0, "b not yet");

    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(commits_on(&f, "a"), 1, "a's commit is not made again");
    assert_eq!(commits_on(&f, "b"), 1, "b's is made once");
    let j = f.journal();
    assert_eq!(records(&j, "commit_started", "a").len(), 1);
    assert_eq!(records(&j, "committed", "a").len(), 1);
    assert_eq!(records(&j, "committed", "b").len(), 1);
    let a_sha = records(&j, "committed", "a")[0]["sha"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        stderr(&out).contains(&format!("commit {}", &a_sha[..10])),
        "the summary names a's commit: {}",
        stderr(&out)
    );
    let end = j.iter().rposition(|r| r["type"] == "run_ended").unwrap();
    assert!(
        j[end..].iter().any(|r| r["type"] == "collected"),
        "collected after the end"
    );
    // Finished now: another resume is a no-op.
    let again = f.capfleet(&["run", "--resume", "latest"]);
    assert!(
        stderr(&again).contains("had ended (completed)"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn a_commit_started_and_not_recorded_is_found_on_its_branch_or_made_once() {
    let f = committed("commit-cut");
    let path = f.run_dir().join("journal.jsonl");
    let whole = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let started = |s: &str| {
        lines
            .iter()
            .position(|l| {
                l.contains("\"commit_started\"") && l.contains(&format!("\"session\":\"{s}\""))
            })
            .unwrap()
    };
    let (a, b) = (started("a"), started("b"));
    assert!(a < b, "a is collected first");
    // The journal a kill right after git made a's commit leaves: a's start on disk,
    // nothing after; b's commit not made (its branch back where it was, the work
    // staged as before a commit).
    let cut = |at: usize| {
        let mut kept = lines[..=at].join("\n");
        kept.push('\n');
        std::fs::write(&path, kept).unwrap();
    };
    cut(a);
    unmake(&f, "b");
    let a_sha = f.git(&["rev-parse", &format!("capfleet/{}/a", f.run_id())]);
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = f.journal();
    let found = records(&j, "committed", "a");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["found"], true, "{found:?}");
    assert_eq!(found[0]["sha"], a_sha.trim());
    assert_eq!(
        commits_on(&f, "a"),
        1,
        "a's commit is found, not made again"
    );
    assert_eq!(commits_on(&f, "b"), 1, "b's is made once");
    assert_eq!(records(&j, "commit_started", "a").len(), 1);

    // Cut right after a start whose commit git never made: it is made, once.
    cut_after_last_start(&f, "b");
    unmake(&f, "b");
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(commits_on(&f, "b"), 1, "b is committed once");
    let j = f.journal();
    let made = records(&j, "committed", "b");
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].get("found").is_none(), "{made:?}");
    assert_eq!(commits_on(&f, "a"), 1);
}

/// Drop the journal's last line (the `merged` record a kill before it leaves out).
/// `capfleet merge latest <branch>` that exits 0 saying `says`.
fn merge_says(f: &Fixture, branch: &str, says: &str) {
    let out = f.capfleet(&["merge", "latest", branch]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(says), "{}", stdout(&out));
}

fn cut_last(f: &Fixture) {
    let path = f.run_dir().join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.pop().unwrap().contains("\"merged\""));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_merge_cut_before_head_moved_is_finished_not_redone() {
    let f = committed("merge-cut");
    let run = f.run_id();
    let head = |f: &Fixture| f.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let base = head(&f);

    // A fast-forward cut after its checkout: HEAD where it was, the branch's tree
    // checked out (a plain rerun would refuse the dirty tree).
    let ff = f.capfleet(&["merge", "latest", "a"]);
    assert!(stdout(&ff).contains("fast-forward"), "{}", stdout(&ff));
    let a = head(&f);
    f.git(&["reset", "-q", "--soft", &base]);
    cut_last(&f);
    merge_says(&f, "a", "fast-forward");
    assert_eq!(head(&f), a);

    // A merge commit cut after its checkout: finished with one merge commit.
    let merged = f.capfleet(&["merge", "latest", "b"]);
    assert!(stdout(&merged).contains("merged as"), "{}", stdout(&merged));
    f.git(&["reset", "-q", "--soft", "HEAD~1"]);
    cut_last(&f);
    merge_says(&f, "b", "merged as");
    let merges = f.git(&["rev-list", "--merges", "--count", "HEAD"]);
    assert_eq!(merges.trim(), "1", "one merge commit");
    let b = f.git(&["rev-parse", &format!("capfleet/{run}/b")]);
    assert_eq!(f.git(&["rev-parse", "HEAD^2"]), b);
    assert_eq!(f.read("b.txt"), "b\n");
    // One cut after HEAD moved, before its end was journaled: the next merge records
    // the merge the cut one made, and makes none.
    cut_last(&f);
    merge_says(&f, "b", "made by the cut merge");
    let end = f.journal().pop().unwrap();
    assert_eq!(
        (&end["outcome"], &end["found"]),
        (&"merged".into(), &true.into())
    );
    assert_eq!(end["sha"], f.git(&["rev-parse", "HEAD"]).trim());
    // Each merge journaled as started once (the finish starts nothing).
    let j = f.journal();
    let started: Vec<&Value> = j.iter().filter(|r| r["type"] == "merge_started").collect();
    assert_eq!(started.len(), 2, "{started:?}");
    // Merged now: a third merge is up to date.
    let third = f.capfleet(&["merge", "latest", "b"]);
    assert!(
        stdout(&third).contains("already merged"),
        "{}",
        stdout(&third)
    );
}

/// A kill inside git's commit leaves its lock files (the branch's ref lock, the
/// worktree's index lock): the resume removes those its cut commit left and commits
/// once; a lock another live process holds is left, and the commit that could not
/// be made fails the run (exit 1, the reason in the summary), never a silent 0.
#[test]
fn a_commit_cut_inside_git_clears_its_stale_locks_and_commits_once() {
    let f = committed("commit-locks");
    // The journal and tree a kill inside b's commit leaves: b's start on disk and
    // nothing after, b's branch where it was, git's locks in place.
    let cut_in_b = || {
        cut_after_last_start(&f, "b");
        unmake(&f, "b");
        let git_dir = git_in(&f, "b", &["rev-parse", "--absolute-git-dir"]);
        let git_dir = std::path::PathBuf::from(git_dir.trim());
        let ref_lock = f
            .path()
            .join(".git/refs/heads/capfleet")
            .join(f.run_id())
            .join("b.lock");
        let index_lock = git_dir.join("index.lock");
        for lock in [&ref_lock, &index_lock] {
            std::fs::write(lock, "").unwrap();
        }
        (ref_lock, index_lock)
    };
    let (ref_lock, index_lock) = cut_in_b();
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !ref_lock.exists() && !index_lock.exists(),
        "stale locks removed"
    );
    assert_eq!(commits_on(&f, "b"), 1, "b is committed once");
    assert_eq!(records(&f.journal(), "committed", "b").len(), 1);

    // The same cut, but a live process holds the ref lock: left, and the run says
    // the commit failed.
    let (ref_lock, _) = cut_in_b();
    let _holder = std::fs::OpenOptions::new()
        .write(true)
        .open(&ref_lock)
        .unwrap();
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(ref_lock.exists(), "a held lock is never removed");
    assert!(
        stderr(&out).contains("commit:"),
        "the summary names the failed commit: {}",
        stderr(&out)
    );
    assert_eq!(commits_on(&f, "b"), 0, "b's work stays staged, reported");
}

/// A `capfleet merge` killed inside git's checkout leaves a half-checked-out tree
/// (the session's file written, or cut short, the index not yet) and git's locks
/// (the index's, the branch's ref): the next merge removes the locks no live process
/// holds and finishes the checkout; an edit made since the cut is refused, never
/// overwritten.
#[test]
fn a_merge_cut_inside_its_checkout_is_finished_by_the_next_merge() {
    let f = committed("merge-cut-checkout");
    let base = f.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let ff = f.capfleet(&["merge", "latest", "a"]);
    assert!(stdout(&ff).contains("fast-forward"), "{}", stdout(&ff));
    let a = f.git(&["rev-parse", "HEAD"]).trim().to_owned();
    // Back to the cut: HEAD and the index on the base, a.txt on disk, the locks.
    f.git(&["reset", "-q", "--mixed", &base]);
    cut_last(&f);
    let locks = [
        f.path().join(".git/index.lock"),
        f.path().join(".git/refs/heads/main.lock"),
    ];
    let plant = || {
        for lock in &locks {
            std::fs::write(lock, "").unwrap();
        }
    };
    plant();
    // An edit made since the cut is not the checkout's: refused, nothing lost.
    f.write("README.md", "mine\n");
    let refused = f.capfleet(&["merge", "latest", "a"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("README.md"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(f.read("README.md"), "mine\n");
    // Another branch's merge meanwhile: refused, the cut one named to finish first.
    let other = f.capfleet(&["merge", "latest", "b"]);
    assert_eq!(other.status.code(), Some(1), "{}", stderr(&other));
    let finish = format!("capfleet merge {} a", f.run_id());
    assert!(stderr(&other).contains(&finish), "{}", stderr(&other));
    f.write("README.md", "x\n");
    // The file the checkout was writing, cut short.
    f.write("a.txt", "a");
    plant();
    merge_says(&f, "a", "fast-forward");
    assert_eq!(f.git(&["rev-parse", "HEAD"]).trim(), a);
    assert!(locks.iter().all(|l| !l.exists()), "stale locks removed");
    let status = f.git(&["status", "--porcelain", "--untracked-files=no"]);
    assert_eq!(status.trim(), "", "a clean tree");
    assert_eq!(f.read("a.txt"), "a\n");
}
