//! Where a run keeps its records: `.capfleet/runs/<run-id>/` in the directory the
//! run was started from, with `journal.jsonl` inside. A run id is the UTC start time
//! and a short random suffix (`20261130T121500Z-3fa9`), so ids sort by time.
//!
//! While its orchestrator lives, the run holds an exclusive `flock` on
//! `orchestrator.lock` (which names its pid, fleet file and directory): the kernel
//! drops the lock when the process dies, however it dies, so `capfleet log -f` can
//! tell a run still going from one whose orchestrator is gone ([`RunDir::orchestrator`]).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use capfleet_engine::journal::replay::{Mended, mend_tail};
use capfleet_wire::clock::civil_from_days;

/// The runs directory, relative to where runs are started.
pub const RUNS_DIR: &str = ".capfleet/runs";
/// The journal's file name inside a run directory.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// The id `capfleet log` reads as "the most recent run".
pub const LATEST: &str = "latest";
/// The lock file the orchestrator holds while it lives.
pub(crate) const LOCK_FILE: &str = "orchestrator.lock";
/// Present while a run waits to start (a server's queue): what it starts with.
pub(crate) const QUEUED_FILE: &str = "queued.json";

/// The lock a running orchestrator holds (released when dropped or when it dies).
#[derive(Debug)]
pub struct RunLock {
    _file: std::fs::File,
}

/// Who the lock file says started the run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// The fleet file, as given to `capfleet run`.
    pub fleet: PathBuf,
    /// The directory `capfleet run` was started in.
    pub cwd: PathBuf,
}

/// Whether a run's orchestrator still lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Orchestrator {
    Running,
    /// Gone (its lock is free); what its lock file said.
    Gone(Owner),
    /// No lock file (a run older than the lock, or one that could not write it).
    Unknown,
}

/// One run's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    pub id: String,
    pub path: PathBuf,
}

/// Why a run directory could not be found or made.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("no runs under {}", dir.display())]
    NoRuns { dir: PathBuf },
    #[error("no run `{id}` under {} (see `ls {}`)", dir.display(), dir.display())]
    NotFound { id: String, dir: PathBuf },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl RunDir {
    /// Make a new run directory under `base/.capfleet/runs`.
    pub fn create(base: &Path) -> Result<RunDir, RunDirError> {
        Self::create_in(&base.join(RUNS_DIR))
    }

    /// Make a new run directory in the runs directory `runs` (made when missing).
    pub fn create_in(runs: &Path) -> Result<RunDir, RunDirError> {
        let runs = runs.to_owned();
        std::fs::create_dir_all(&runs).map_err(|source| RunDirError::Io {
            path: runs.clone(),
            source,
        })?;
        loop {
            let id = run_id(SystemTime::now(), random_suffix());
            let path = runs.join(&id);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(RunDir { id, path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(RunDirError::Io { path, source }),
            }
        }
    }

    /// Make the directory of run `id` (an id made elsewhere: a queued run's) under
    /// `base/.capfleet/runs`; an existing one is an error.
    pub fn create_named(base: &Path, id: &str) -> Result<RunDir, RunDirError> {
        let runs = base.join(RUNS_DIR);
        let path = runs.join(id);
        std::fs::create_dir_all(&runs)
            .and_then(|()| std::fs::create_dir(&path))
            .map_err(|source| RunDirError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(RunDir {
            id: id.to_owned(),
            path,
        })
    }

    /// A new run id, for a run whose directory another process makes.
    pub(crate) fn new_id() -> String {
        run_id(SystemTime::now(), random_suffix())
    }

    /// The run `id` (or [`LATEST`]) under `base/.capfleet/runs`.
    pub fn find(base: &Path, id: &str) -> Result<RunDir, RunDirError> {
        let runs = base.join(RUNS_DIR);
        if id != LATEST {
            let path = runs.join(id);
            if path.is_dir() && !id.contains('/') {
                return Ok(RunDir {
                    id: id.to_owned(),
                    path,
                });
            }
            return Err(RunDirError::NotFound {
                id: id.to_owned(),
                dir: runs,
            });
        }
        let entries = match std::fs::read_dir(&runs) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RunDirError::NoRuns { dir: runs });
            }
            Err(source) => return Err(RunDirError::Io { path: runs, source }),
        };
        // Ids sort by their start second; within one second the later directory wins.
        let latest = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let made = e.metadata().and_then(|m| m.modified()).ok();
                let id = e.file_name().into_string().ok()?;
                Some(((id.split('-').next().unwrap_or("").to_owned(), made), id))
            })
            .max()
            .map(|(_, id)| id);
        match latest {
            Some(id) => Ok(RunDir {
                path: runs.join(&id),
                id,
            }),
            None => Err(RunDirError::NoRuns { dir: runs }),
        }
    }

    /// Every run under `base/.capfleet/runs`, oldest first (none when there is no
    /// such directory).
    pub fn all(base: &Path) -> Result<Vec<RunDir>, RunDirError> {
        Self::all_in(&base.join(RUNS_DIR))
    }

    /// Every run in the runs directory `runs`, oldest first.
    pub fn all_in(runs: &Path) -> Result<Vec<RunDir>, RunDirError> {
        let runs = runs.to_owned();
        let entries = match std::fs::read_dir(&runs) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(RunDirError::Io { path: runs, source }),
        };
        // By the start second in the id, then (within one second) by when the
        // directory was made.
        let mut all: Vec<(String, Option<SystemTime>, RunDir)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let made = e.metadata().and_then(|m| m.created().or(m.modified()));
                let id = e.file_name().into_string().ok()?;
                let second = id.split('-').next().unwrap_or("").to_owned();
                Some((second, made.ok(), RunDir { id, path: e.path() }))
            })
            .collect();
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(all.into_iter().map(|(_, _, run)| run).collect())
    }

    /// The run's journal.
    pub fn journal(&self) -> PathBuf {
        self.path.join(JOURNAL_FILE)
    }

    /// Take the orchestrator's lock for this process, naming `fleet` (hold it for the
    /// run's life).
    pub fn lock(&self, fleet: &Path) -> Result<RunLock, RunDirError> {
        use std::io::Write as _;
        let path = self.path.join(LOCK_FILE);
        let io = |source| RunDirError::Io {
            path: path.clone(),
            source,
        };
        let owner = Owner {
            pid: std::process::id(),
            fleet: fleet.to_owned(),
            cwd: std::env::current_dir().map_err(io)?,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        flock(&file, libc::LOCK_EX | libc::LOCK_NB).map_err(io)?;
        let text = serde_json::to_string(&owner).map_err(|e| io(e.into()))?;
        writeln!(file, "{text}").map_err(io)?;
        Ok(RunLock { _file: file })
    }

    /// Whether the run's orchestrator still lives (holds the lock).
    pub fn orchestrator(&self) -> Orchestrator {
        let path = self.path.join(LOCK_FILE);
        let Ok(file) = std::fs::File::open(&path) else {
            return Orchestrator::Unknown;
        };
        if flock(&file, libc::LOCK_SH | libc::LOCK_NB).is_err() {
            return Orchestrator::Running;
        }
        let owner = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Owner>(t.trim()).ok());
        match owner {
            Some(owner) => Orchestrator::Gone(owner),
            // Locked and written in one go by the orchestrator: an empty file is one
            // caught between the two, still starting.
            None => Orchestrator::Running,
        }
    }

    /// Append the run's last record, `{"type":"run_ended",…}`, to the journal
    /// (`capfleet log --follow` stops there).
    pub fn record_end(&self, exit_code: u8) -> Result<(), RunDirError> {
        self.append(serde_json::json!({
            "type": "run_ended",
            "run_id": self.id,
            "exit_code": exit_code,
        }))
    }

    /// Append `record` (an object; `ts_ms` added) to the journal as one line, synced.
    /// The line is built whole and written in one call; a journal whose last line a
    /// kill left unended is mended first (ended if it is a record, cut if it is not),
    /// so that a cut write is only ever a torn last line, never damage mid-journal.
    pub fn append(&self, record: serde_json::Value) -> Result<(), RunDirError> {
        self.append_all([record])
    }

    /// [`RunDir::append`] for several records at once: one write and one sync for
    /// them all (each its own line, all stamped with the same `ts_ms`).
    pub fn append_all(
        &self,
        records: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<(), RunDirError> {
        use std::io::Write as _;
        let path = self.journal();
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let mut lines = Vec::new();
        for mut record in records {
            record["ts_ms"] = serde_json::json!(ts_ms);
            lines.extend(record.to_string().into_bytes());
            lines.push(b'\n');
        }
        if lines.is_empty() {
            return Ok(());
        }
        let io = |source| RunDirError::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let is_record = |l: &[u8]| serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok();
        if let Mended::Cut(torn) = mend_tail(&mut file, is_record).map_err(io)? {
            tracing::warn!(journal = %path.display(), "{torn}: cut before appending");
        }
        file.write_all(&lines)
            .and_then(|()| file.sync_all())
            .map_err(io)
    }

    /// Mark the run queued with `what` it starts with, on disk (synced, the file
    /// then the directory) when this returns.
    pub fn mark_queued(&self, what: &serde_json::Value) -> Result<(), RunDirError> {
        use std::io::Write as _;
        let path = self.path.join(QUEUED_FILE);
        let tmp = path.with_extension("json.tmp");
        let io = |source| RunDirError::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        writeln!(file, "{what}").map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        std::fs::File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(io)
    }

    /// What the run waits to start with, while it is queued.
    pub fn queued(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.path.join(QUEUED_FILE)).ok()?;
        serde_json::from_str(text.trim()).ok()
    }

    /// Whether the run waits to start.
    pub fn is_queued(&self) -> bool {
        self.path.join(QUEUED_FILE).is_file()
    }

    /// The run waits no more (it starts, or it never will).
    pub fn unmark_queued(&self) -> Result<(), RunDirError> {
        let path = self.path.join(QUEUED_FILE);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(RunDirError::Io { path, source: e })
            }
            _ => Ok(()),
        }
    }

    /// A simulator session's state directory.
    pub(crate) fn sim_state(&self, session: &str) -> PathBuf {
        self.path.join("sim").join(session)
    }
}

/// `flock(2)` on `file` (the lock goes with the file's last descriptor).
fn flock(file: &std::fs::File, op: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock(2) on a descriptor we own; no memory is passed.
    match unsafe { libc::flock(file.as_raw_fd(), op) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `YYYYMMDDTHHMMSSZ-xxxx` for `at` (UTC).
pub(crate) fn run_id(at: SystemTime, suffix: u16) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z-{suffix:04x}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn random_suffix() -> u16 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() & 0xffff) as u16
}

/// The artifacts directory inside a run's directory.
pub const ARTIFACTS: &str = "artifacts";

/// Every file under `root`, as paths relative to it (sorted).
pub fn files(root: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(e.path());
            } else if meta.is_file()
                && let Ok(rel) = e.path().strip_prefix(root)
            {
                out.push((rel.display().to_string(), meta.len()));
            }
        }
    }
    out.sort();
    out
}

/// The file `rel` under `root`, none unless it stays inside it (a plain relative
/// path, no link out) and can be read.
pub async fn read_inside(root: &Path, rel: &str) -> Option<Vec<u8>> {
    if !super::plain_relative(rel) {
        return None;
    }
    let base = tokio::fs::canonicalize(root).await.ok()?;
    let path = tokio::fs::canonicalize(root.join(rel)).await.ok()?;
    if !path.starts_with(&base) {
        return None;
    }
    tokio::fs::read(&path).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn run_ids_are_utc_timestamps_with_a_suffix() {
        let at = UNIX_EPOCH + Duration::from_secs(1_796_040_900);
        assert_eq!(run_id(at, 0x3fa9), "20261130T121500Z-3fa9");
        assert_eq!(run_id(UNIX_EPOCH, 0), "19700101T000000Z-0000");
        // 2024-02-29 (a leap day), 23:59:59.
        let leap = UNIX_EPOCH + Duration::from_secs(1_709_251_199);
        assert_eq!(run_id(leap, 0xffff), "20240229T235959Z-ffff");
    }

    #[test]
    fn an_append_after_a_cut_write_leaves_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        run.append(serde_json::json!({"type": "a"})).unwrap();
        let whole = std::fs::read(run.journal()).unwrap();
        // A kill inside the next record's write.
        let mut cut = whole.clone();
        cut.extend_from_slice(b"{\"type\":\"merge_sta");
        std::fs::write(run.journal(), &cut).unwrap();
        run.append(serde_json::json!({"type": "b"})).unwrap();
        let text = std::fs::read_to_string(run.journal()).unwrap();
        let types: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("every line a record");
                v["type"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(types, ["a", "b"], "{text}");
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn create_then_find_latest_and_by_id() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            RunDir::find(dir.path(), LATEST),
            Err(RunDirError::NoRuns { .. })
        ));
        std::fs::create_dir_all(dir.path().join(RUNS_DIR).join("20000101T000000Z-0000")).unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        assert!(run.path.is_dir());
        assert_eq!(RunDir::find(dir.path(), LATEST).unwrap(), run);
        assert_eq!(RunDir::find(dir.path(), &run.id).unwrap(), run);
        assert!(matches!(
            RunDir::find(dir.path(), "../x"),
            Err(RunDirError::NotFound { .. })
        ));
        assert_eq!(run.orchestrator(), Orchestrator::Unknown);
        let lock = run.lock(Path::new("fleet.toml")).unwrap();
        assert_eq!(run.orchestrator(), Orchestrator::Running);
        drop(lock);
        match run.orchestrator() {
            Orchestrator::Gone(owner) => {
                assert_eq!(owner.pid, std::process::id());
                assert_eq!(owner.fleet, Path::new("fleet.toml"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!run.is_queued());
        run.mark_queued(&serde_json::json!({"by": "ci"})).unwrap();
        assert!(run.is_queued());
        assert_eq!(run.queued().unwrap()["by"], "ci");
        run.unmark_queued().unwrap();
        run.unmark_queued().unwrap();
        assert!(!run.is_queued() && run.queued().is_none());
        run.record_end(3).unwrap();
        let journal = std::fs::read_to_string(run.journal()).unwrap();
        let rec: serde_json::Value = serde_json::from_str(journal.trim()).unwrap();
        assert_eq!(rec["type"], "run_ended");
        assert_eq!(rec["exit_code"], 3);
    }
}
