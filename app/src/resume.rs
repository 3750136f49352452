//! `capfleet run --resume <run-id|latest>`: a run continued in place — the same run
//! id, run directory, journal (appended to) and worktrees (reused as they are). `run`
//! keeps beside each journal what a resume needs besides it: the fleet file as it
//! was (`fleet.toml`) and the arguments (`resume.json`: the fleet's path, `--task`,
//! `--commit`). A resume is refused while the run's orchestrator lives (its lock is
//! held: the holder's pid is named; a dead holder's lock is free, so it is taken
//! over), and when the fleet file changed since (the first differing line named),
//! unless `--force` (the change is journaled in the `resumed` record). A run that had
//! ended (completed, failed, over budget) is said so and left unchanged; one
//! interrupted (a signal) or cut (capfleet killed) goes on from its journal
//! (`capfleet_engine::resume`).

use std::io;
use std::path::{Path, PathBuf};

use capfleet_engine::journal::replay;
use capfleet_engine::resume::recover;
use capfleet_engine::run::Resume;
use serde::{Deserialize, Serialize};

use crate::fleet::RunDir;
use crate::fleet::run_dir::{Orchestrator, RunDirError, RunLock};

/// The copy of the fleet file inside the run directory.
const FLEET_COPY: &str = "fleet.toml";
/// The arguments of the run, inside the run directory.
const ARGS_FILE: &str = "resume.json";

/// What `run` was given, kept for its resume.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Saved {
    fleet: PathBuf,
    task: Option<String>,
    commit: bool,
    /// `--chaos`: a resumed run goes on with the same faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chaos: Option<String>,
}

/// Why a run cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Run(#[from] RunDirError),
    #[error(
        "run {id} cannot be resumed: it has no {ARGS_FILE} (started by a capfleet that did not keep one)"
    )]
    Unrecorded { id: String },
    #[error(
        "run {id} is running (pid {pid}): one orchestrator at a time; wait for it, or stop it first"
    )]
    Running { id: String, pid: String },
    #[error("the fleet file {} changed since run {id} started ({change}); `--force` resumes with it as it is now", fleet.display())]
    Changed {
        id: String,
        fleet: PathBuf,
        change: String,
    },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ResumeError + '_ {
    move |source| ResumeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Keep, beside the journal of `run` (of `fleet` with `task`), what `run --resume`
/// needs to go on with it (`run` keeps it for each run, a fleet answering as one
/// agent for each of its runs).
pub fn remember(
    run: &RunDir,
    fleet: &Path,
    task: Option<String>,
    commit: bool,
    chaos: Option<String>,
) -> Result<(), ResumeError> {
    let copy = run.path.join(FLEET_COPY);
    std::fs::copy(fleet, &copy).map_err(io_at(&copy))?;
    let saved = Saved {
        fleet: std::path::absolute(fleet).map_err(io_at(fleet))?,
        task,
        commit,
        chaos,
    };
    let path = run.path.join(ARGS_FILE);
    let text = serde_json::to_string(&saved).map_err(|e| io_at(&path)(e.into()))?;
    std::fs::write(&path, text).map_err(io_at(&path))
}

/// The run to resume, found: its directory and what it was started with.
pub struct Opened {
    pub run: RunDir,
    pub fleet: PathBuf,
    pub task: Option<String>,
    pub commit: bool,
    /// The run's `--chaos`, if it had one.
    pub chaos: Option<String>,
}

/// Find run `id` (or `latest`) under the current directory; refused while it runs.
pub fn open(id: &str) -> Result<Opened, ResumeError> {
    let cwd = std::env::current_dir().map_err(io_at(Path::new(".")))?;
    open_in(&cwd, id)
}

/// [`open`] under `base`.
pub fn open_in(base: &Path, id: &str) -> Result<Opened, ResumeError> {
    let run = RunDir::find(base, id)?;
    if run.orchestrator() == Orchestrator::Running {
        let lock = run.path.join(crate::fleet::run_dir::LOCK_FILE);
        let pid = std::fs::read_to_string(&lock)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t.trim()).ok())
            .and_then(|v| v["pid"].as_u64())
            .map_or_else(|| "unknown".to_owned(), |p| p.to_string());
        return Err(ResumeError::Running { id: run.id, pid });
    }
    let path = run.path.join(ARGS_FILE);
    let saved: Saved = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| io_at(&path)(e.into()))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ResumeError::Unrecorded { id: run.id });
        }
        Err(e) => return Err(io_at(&path)(e)),
    };
    Ok(Opened {
        run,
        fleet: saved.fleet,
        task: saved.task,
        commit: saved.commit,
        chaos: saved.chaos,
    })
}

/// What the checks decided.
pub enum Verdict {
    /// Go on: the run's lock (held for the resumed run's life) and its journal read.
    Go { lock: RunLock, resume: Box<Resume> },
    /// The run had ended, with this outcome: nothing to do.
    Ended(String),
}

/// Read the journal of `o` (fleet `name`); refuse a changed fleet unless `force`; take
/// the lock; cut a torn last line (reported).
pub fn check(o: &Opened, name: &str, force: bool) -> Result<Verdict, ResumeError> {
    let journal = o.run.journal();
    let recovered = recover(&journal, name).map_err(io_at(&journal))?;
    if recovered.has_ended() {
        return Ok(Verdict::Ended(recovered.ended.clone().unwrap_or_default()));
    }
    let copy = o.run.path.join(FLEET_COPY);
    let was = std::fs::read_to_string(&copy).map_err(io_at(&copy))?;
    let now = std::fs::read_to_string(&o.fleet).map_err(io_at(&o.fleet))?;
    let fleet_changed = first_change(&was, &now);
    if let Some(change) = &fleet_changed
        && !force
    {
        return Err(ResumeError::Changed {
            id: o.run.id.clone(),
            fleet: o.fleet.clone(),
            change: change.clone(),
        });
    }
    // Taken by another resume since we looked: its lock is held.
    let lock = o.run.lock(&o.fleet).map_err(|e| match e {
        RunDirError::Io { source, .. } if source.raw_os_error() == Some(libc::EWOULDBLOCK) => {
            ResumeError::Running {
                id: o.run.id.clone(),
                pid: "of another resume".to_owned(),
            }
        }
        other => other.into(),
    })?;
    if let Some(torn) = recovered.tail.torn {
        eprintln!("capfleet: warning: {torn}");
        replay::cut_torn(&journal, torn).map_err(io_at(&journal))?;
    }
    Ok(Verdict::Go {
        lock,
        resume: Box::new(Resume {
            recovered,
            fleet_changed,
        }),
    })
}

/// The first line that differs between `was` and `now`, said.
fn first_change(was: &str, now: &str) -> Option<String> {
    if was == now {
        return None;
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (was.lines().collect(), now.lines().collect());
    let n = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    let line = |l: Option<&&str>| l.map_or_else(|| "(none)".to_owned(), |l| format!("`{l}`"));
    Some(format!(
        "line {}: {} is now {}",
        n + 1,
        line(a.get(n)),
        line(b.get(n))
    ))
}

#[cfg(test)]
mod tests {
    use super::first_change;

    #[test]
    fn the_first_changed_line_is_named() {
        assert_eq!(first_change("a\nb\n", "a\nb\n"), None);
        assert_eq!(
            first_change("a\nb = 1\n", "a\nb = 2\n").unwrap(),
            "line 2: `b = 1` is now `b = 2`"
        );
        assert_eq!(
            first_change("a\n", "a\nc\n").unwrap(),
            "line 2: (none) is now `c`"
        );
    }
}
