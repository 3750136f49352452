//! Provisioning: one workspace per coding session, before any agent starts.
//!
//! A session whose `cwd` is in a git repository gets a worktree at
//! `<repo>/.cap-worktrees/<run-id>/<session>/` on a new branch
//! `capfleet/<run-id>/<session>` at the fleet's `base` (default `HEAD`), and its
//! agent runs in the same subdirectory of it that `cwd` was of the repository. A
//! session outside any repository gets a plain directory
//! `<cwd>/.cap-worktrees/<run-id>/<session>/`. (Worktrees stay after a run, so the
//! run id keeps the next run's apart.)
//!
//! Branches are created first (cheap), then the worktrees are checked out on a few
//! threads, each with its own handle on the repository. Any failure undoes what this
//! call made (fresh, empty worktrees and branches) and reports the git error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{BranchType, Repository, WorktreeAddOptions};

use super::WORKTREES_DIR;
use super::error::{Context, WorkspaceError};
use super::record::{Kind, RunWorkspaces, Workspace};
use super::repo;
use super::testrun::TestCommand;

/// Worktrees checked out at once, at most.
pub(crate) const MAX_THREADS: usize = 8;

/// One session that needs a workspace.
#[derive(Debug, Clone)]
pub struct Request {
    pub session: String,
    /// The session's working directory as configured (absolute, existing).
    pub cwd: PathBuf,
    pub paths: Vec<String>,
    pub test_command: Option<TestCommand>,
}

/// The branch of `session` in run `run_id`.
pub(crate) fn branch_name(run_id: &str, session: &str) -> String {
    format!("capfleet/{run_id}/{session}")
}

/// The worktree name git keeps (`.git/worktrees/<name>`): one path component.
pub(crate) fn worktree_name(run_id: &str, session: &str) -> String {
    format!("capfleet-{run_id}-{session}")
}

/// Provision a workspace for every request (see the module doc).
pub fn provision(
    run_id: &str,
    base: Option<&str>,
    requests: &[Request],
) -> Result<RunWorkspaces, WorkspaceError> {
    // (No span of its own: it runs before the run's trace starts.)
    let started = std::time::Instant::now();
    let mut made = Made::default();
    match provision_all(run_id, base, requests, &mut made) {
        Ok(workspaces) => {
            tracing::info!(
                run = run_id,
                workspaces = workspaces.len(),
                ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "workspaces provisioned"
            );
            Ok(RunWorkspaces {
                run_id: run_id.to_owned(),
                workspaces,
            })
        }
        Err(e) => {
            made.undo();
            Err(e)
        }
    }
}

/// A worktree to check out.
struct Job {
    index: usize,
    name: String,
    branch: String,
    path: PathBuf,
}

fn provision_all(
    run_id: &str,
    base: Option<&str>,
    requests: &[Request],
    made: &mut Made,
) -> Result<Vec<Workspace>, WorkspaceError> {
    let mut out: Vec<Option<Workspace>> = vec![None; requests.len()];
    // Repositories by working directory, with the requests in each.
    let mut repos: BTreeMap<PathBuf, (Repository, Vec<usize>)> = BTreeMap::new();
    for (i, r) in requests.iter().enumerate() {
        match repo::discover(&r.cwd)? {
            Some(found) => {
                let workdir = repo::workdir(&found)?;
                repos
                    .entry(workdir)
                    .or_insert((found, Vec::new()))
                    .1
                    .push(i);
            }
            None => {
                let path = r.cwd.join(WORKTREES_DIR).join(run_id).join(&r.session);
                std::fs::create_dir_all(&path)
                    .ctx("cannot create the session's directory", &path)?;
                made.dirs.push(path.clone());
                out[i] = Some(workspace(r, path.clone(), path, Kind::Plain));
            }
        }
    }
    let mut jobs: Vec<(PathBuf, Vec<Job>)> = Vec::new();
    for (workdir, (repository, indices)) in &repos {
        let spec = base.unwrap_or("HEAD");
        let commit = repo::base_commit(repository, spec)?;
        let commit = repository
            .find_commit(commit)
            .ctx("cannot read the base commit", workdir)?;
        repo::ensure_excludes(repository)?;
        let root = workdir.join(WORKTREES_DIR).join(run_id);
        std::fs::create_dir_all(&root).ctx("cannot create", &root)?;
        let admin = repository.commondir().join("worktrees");
        std::fs::create_dir_all(&admin).ctx("cannot create", &admin)?;
        let mut repo_jobs = Vec::with_capacity(indices.len());
        for &i in indices {
            let r = &requests[i];
            let branch = branch_name(run_id, &r.session);
            repository
                .branch(&branch, &commit, false)
                .ctx(format!("cannot create branch {branch}"), workdir)?;
            made.branches.push((workdir.clone(), branch.clone()));
            let path = root.join(&r.session);
            let subdir = canonical(&r.cwd)?
                .strip_prefix(workdir)
                .map(Path::to_owned)
                .unwrap_or_default();
            let kind = Kind::Worktree {
                repo: workdir.clone(),
                branch: branch.clone(),
                base: commit.id().to_string(),
                name: worktree_name(run_id, &r.session),
            };
            out[i] = Some(workspace(r, path.clone(), path.join(subdir), kind));
            repo_jobs.push(Job {
                index: i,
                name: worktree_name(run_id, &r.session),
                branch,
                path,
            });
        }
        jobs.push((workdir.clone(), repo_jobs));
    }
    check_out(&jobs, made)?;
    let workspaces: Vec<Workspace> = out.into_iter().flatten().collect();
    // The session's subdirectory may hold nothing tracked at the base.
    for w in &workspaces {
        std::fs::create_dir_all(&w.cwd).ctx("cannot create the session's cwd", &w.cwd)?;
    }
    Ok(workspaces)
}

fn workspace(r: &Request, path: PathBuf, cwd: PathBuf, kind: Kind) -> Workspace {
    Workspace {
        session: r.session.clone(),
        path,
        cwd,
        kind,
        paths: r.paths.clone(),
        test_command: r.test_command.clone(),
    }
}

fn canonical(p: &Path) -> Result<PathBuf, WorkspaceError> {
    std::fs::canonicalize(p).ctx("cannot resolve the session's cwd", p)
}

/// Check out every job's worktree, spread over up to [`MAX_THREADS`] threads.
fn check_out(jobs: &[(PathBuf, Vec<Job>)], made: &mut Made) -> Result<(), WorkspaceError> {
    let all: Vec<(&Path, &Job)> = jobs
        .iter()
        .flat_map(|(w, js)| js.iter().map(move |j| (w.as_path(), j)))
        .collect();
    if all.is_empty() {
        return Ok(());
    }
    // Like git itself, read objects without re-hashing each one (libgit2 checks every
    // object's SHA-1 on read by default: most of a checkout's time).
    git2::opts::strict_hash_verification(false);
    let threads = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .clamp(1, MAX_THREADS)
        .min(all.len());
    let per = all.len().div_ceil(threads);
    let results: Vec<Vec<(usize, Result<(), WorkspaceError>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = all
            .chunks(per)
            .map(|chunk| s.spawn(move || chunk.iter().map(|(w, j)| (j.index, add(w, j))).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut first_err = None;
    let mut done = 0;
    for (index, r) in results.into_iter().flatten() {
        done += 1;
        match r {
            Ok(()) => {
                if let Some((w, j)) = all.iter().find(|(_, j)| j.index == index) {
                    made.worktrees
                        .push((w.to_path_buf(), j.name.clone(), j.path.clone()));
                }
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if done != all.len() {
        return Err(WorkspaceError::Repo {
            path: jobs[0].0.clone(),
            reason: "a worktree checkout thread panicked".into(),
        });
    }
    Ok(())
}

/// `git worktree add <path> <branch>`, through libgit2.
fn add(workdir: &Path, job: &Job) -> Result<(), WorkspaceError> {
    let repository = Repository::open(workdir).ctx("cannot open the repository", workdir)?;
    let branch = repository
        .find_branch(&job.branch, BranchType::Local)
        .ctx(format!("cannot find branch {}", job.branch), workdir)?;
    let reference = branch.into_reference();
    let mut opts = WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    repository
        .worktree(&job.name, &job.path, Some(&opts))
        .ctx(format!("cannot add the worktree {}", job.name), &job.path)?;
    Ok(())
}

/// What one provisioning made, to undo it when a later step fails.
#[derive(Default)]
struct Made {
    dirs: Vec<PathBuf>,
    /// (repository workdir, branch)
    branches: Vec<(PathBuf, String)>,
    /// (repository workdir, worktree name, path)
    worktrees: Vec<(PathBuf, String, PathBuf)>,
}

impl Made {
    /// Remove what was made; everything is fresh, so no work is lost.
    fn undo(self) {
        for (workdir, name, path) in &self.worktrees {
            if let Err(e) = super::clean::remove_worktree(workdir, name, path) {
                tracing::warn!("undoing a worktree: {e}");
            }
        }
        for (workdir, branch) in &self.branches {
            let deleted = Repository::open(workdir).and_then(|r| {
                r.find_branch(branch, BranchType::Local)
                    .and_then(|mut b| b.delete())
            });
            if let Err(e) = deleted {
                tracing::warn!(%branch, "undoing a branch: {e}");
            }
        }
        for dir in &self.dirs {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::warn!(dir = %dir.display(), "undoing a directory: {e}");
            }
        }
    }
}
