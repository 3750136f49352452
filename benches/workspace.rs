//! Worktree provisioning, with a same-run baseline: 50 worktrees of a repository of
//! 10,000 files through capfleet's `provision` (libgit2), one session per call and
//! a batch per call (checkouts on a few threads), against `git worktree add -b` run
//! by the `git` CLI on the same repository — interleaved in rounds so that the load
//! of a shared machine falls on each alike. Also the diff of one worktree with a
//! change, as the end-of-run collection and race pickers take it.
//!
//! Run: `cargo bench --bench workspace`. `CAPFLEET_BENCH_FILES` and
//! `CAPFLEET_BENCH_WORKTREES` change the sizes.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use capfleet_engine::workspace::diff::diff;
use capfleet_engine::workspace::provision::{Request, provision};

mod support;

use support::env_or;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository of `files` small files in directories of 100, one commit.
fn make_repo(dir: &Path, files: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let sub = dir.join(format!("src/m{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).expect("mkdir");
        }
        let text = format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n");
        std::fs::write(sub.join(format!("f{i:05}.rs")), text).expect("write");
    }
    git(dir, &["add", "-A"]);
    git(
        dir,
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            "commit",
            "-q",
            "-m",
            "files",
        ],
    );
}

fn request(repo: &Path, session: &str) -> Request {
    Request {
        session: session.to_owned(),
        cwd: repo.to_owned(),
        paths: Vec::new(),
        test_command: None,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    let files = env_or("CAPFLEET_BENCH_FILES", 10_000);
    let n = env_or("CAPFLEET_BENCH_WORKTREES", 50);
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let made = Instant::now();
    make_repo(&repo, files);
    println!(
        "capfleet workspace bench: {n} worktrees of a {files}-file repository (made in {})",
        secs(made.elapsed())
    );

    // Interleaved rounds, so that the machine's load falls on every variant alike:
    // the git CLI (one `git worktree add -b` per session, the baseline), capfleet's
    // `provision` one session at a time, and `provision` of a whole batch (threads).
    let rounds = 5.min(n).max(1);
    let per = n / rounds;
    let (mut cli, mut single, mut batch) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut last = None;
    for r in 0..rounds {
        let started = Instant::now();
        for i in 0..per {
            let path = format!(".cap-worktrees/cli/r{r}s{i}");
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("cli/r{r}s{i}"),
                    &path,
                ],
            );
        }
        cli += started.elapsed();

        let started = Instant::now();
        for i in 0..per {
            let one = [request(&repo, &format!("s{i}"))];
            provision(&format!("single{r}-{i}"), None, &one).expect("provision");
        }
        single += started.elapsed();

        let requests: Vec<Request> = (0..per).map(|i| request(&repo, &format!("s{i}"))).collect();
        let started = Instant::now();
        let provisioned = provision(&format!("batch{r}"), None, &requests).expect("provision");
        batch += started.elapsed();
        assert_eq!(provisioned.workspaces.len(), per);
        last = Some(provisioned);
    }
    let provisioned = last.expect("a round");
    let checked_out = std::fs::read_dir(provisioned.workspaces[per - 1].path.join("src/m000"))
        .expect("a checked-out worktree")
        .count();
    assert_eq!(checked_out, files.min(100));
    let total = per * rounds;
    let each = |d: Duration| d.as_secs_f64() * 1000.0 / total as f64;
    println!(
        "  git worktree add (CLI, one by one):        {} for {total}, {:.0} ms per worktree",
        secs(cli),
        each(cli)
    );
    println!(
        "  capfleet provision, one session per call:  {} for {total}, {:.0} ms per worktree",
        secs(single),
        each(single)
    );
    println!(
        "  capfleet provision, {per} per call (threads): {} for {total}, {:.0} ms per worktree",
        secs(batch),
        each(batch)
    );
    println!(
        "  ratio to the git CLI: one by one {:.2}, batched {:.2}",
        single.as_secs_f64() / cli.as_secs_f64(),
        batch.as_secs_f64() / cli.as_secs_f64()
    );

    // One session's change, diffed against the base (end-of-run collection).
    let ws = &provisioned.workspaces[0];
    std::fs::write(ws.path.join("src/m000/f00000.rs"), "// changed\n").expect("write");
    std::fs::write(ws.path.join("NEW.md"), "new\n").expect("write");
    let started = Instant::now();
    let summary = diff(ws, &mut std::io::sink(), &mut |_, _, _| {}).expect("diff");
    let took = started.elapsed();
    assert_eq!(summary.files.len(), 2);
    println!(
        "  diff of one worktree ({} files scanned, 2 changed): {:.0} ms",
        files,
        took.as_secs_f64() * 1000.0
    );
}
