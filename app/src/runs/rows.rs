//! Runs' rows looked at again and again (the MCP tools' `list_runs`, and
//! `run_status`/`wait_run` polls): what was learnt at the last look is kept, so that
//! a look costs what changed since, not every file of every run.
//!
//! - A run's journal is folded as far as it was read ([`JournalRead`] is a fold, one
//!   record at a time); the next look reads only the bytes appended since. Only
//!   whole lines are taken: a last line not ended yet (a write under way, or one a
//!   kill tore) is read once it is ended. A journal that is no longer the file read
//!   (replaced) or is shorter than what was read (its torn tail cut by the next
//!   append's mending) is read again from its start.
//! - A run ended for good — completed or failed, its workspaces collected, its
//!   orchestrator gone — is final: `run --resume` refuses it and nothing takes it
//!   over, so its row is kept and its files are not looked at again (records it
//!   still gets, such as tool calls, change nothing of its row).
//! - The runs directory's listing is kept while the directory is unchanged (its
//!   modification time, read once it is older than [`SETTLED`]: a change within the
//!   clock's coarse tick may keep the time it had).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::{JournalRead, RunRow, RunState, row_of};
use crate::fleet::run_dir::{RunDir, RunDirError};

/// How old the runs directory's modification time must be for its listing to be
/// kept on it (well above the coarse clock's tick, a few ms).
pub(crate) const SETTLED: Duration = Duration::from_millis(100);

/// One run as far as it was looked at.
#[derive(Debug, Default)]
struct Tail {
    /// The journal read (its inode).
    ino: u64,
    /// Where the last whole line read ends.
    offset: u64,
    read: JournalRead,
    /// The row of a run ended for good: final.
    settled: Option<RunRow>,
}

impl Tail {
    /// Read on to the journal's last whole line.
    fn catch_up(&mut self, path: &Path) -> io::Result<()> {
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.ino() != self.ino || meta.len() < self.offset {
            *self = Tail {
                ino: meta.ino(),
                ..Tail::default()
            };
        }
        if meta.len() == self.offset {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut appended = Vec::new();
        file.take(meta.len() - self.offset)
            .read_to_end(&mut appended)?;
        let whole = appended
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |end| end + 1);
        // A line that does not parse (torn mid-journal by an older capfleet) is
        // skipped, as a whole read skips it.
        for line in appended[..whole].split(|b| *b == b'\n') {
            if let Ok(rec) = serde_json::from_slice::<Value>(line) {
                self.read.add(&rec);
            }
        }
        self.offset += whole as u64;
        Ok(())
    }
}

/// The runs directory as last listed.
#[derive(Debug)]
struct Listing {
    dir: PathBuf,
    ino: u64,
    modified: SystemTime,
    runs: Vec<RunDir>,
}

#[derive(Debug, Default)]
struct Looked {
    tails: HashMap<PathBuf, Tail>,
    listing: Option<Listing>,
}

/// The runs as far as they were looked at. The files are read outside its lock:
/// two looks at one run at once each read on from where the last one stopped, and
/// the later one is kept.
#[derive(Debug, Default)]
pub struct Rows(Mutex<Looked>);

impl Rows {
    fn lock(&self) -> MutexGuard<'_, Looked> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the run's lock and journal say about it, as [`super::row`] says it.
    pub fn row(&self, run: &RunDir) -> RunRow {
        let journal = run.journal();
        let mut tail = self.lock().tails.remove(&journal).unwrap_or_default();
        let row = match &tail.settled {
            Some(row) => row.clone(),
            None => {
                if let Err(e) = tail.catch_up(&journal) {
                    if e.kind() != io::ErrorKind::NotFound {
                        tracing::debug!(journal = %journal.display(), "reading a run's journal: {e}");
                    }
                    tail = Tail::default();
                }
                let row = row_of(run, &tail.read);
                // Completed or failed once its orchestrator is gone: for good.
                if matches!(row.state, RunState::Completed | RunState::Failed) {
                    tail.settled = Some(row.clone());
                }
                row
            }
        };
        self.lock().tails.insert(journal, tail);
        row
    }

    /// Every run in the runs directory `runs`, oldest first, as
    /// [`RunDir::all_in`] lists them; the runs gone from it are forgotten.
    pub fn all_in(&self, runs: &Path) -> Result<Vec<RunDir>, RunDirError> {
        let meta = match std::fs::metadata(runs) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(RunDirError::Io {
                    path: runs.to_owned(),
                    source,
                });
            }
        };
        let stamp = meta.and_then(|m| Some((m.ino(), m.modified().ok()?)));
        if let Some((ino, modified)) = stamp
            && let Some(l) = &self.lock().listing
            && (l.dir.as_path(), l.ino, l.modified) == (runs, ino, modified)
        {
            return Ok(l.runs.clone());
        }
        let listed = RunDir::all_in(runs)?;
        let journals: HashSet<PathBuf> = listed.iter().map(RunDir::journal).collect();
        let mut looked = self.lock();
        looked.tails.retain(|journal, _| journals.contains(journal));
        let settled = |t: &SystemTime| t.elapsed().is_ok_and(|age| age >= SETTLED);
        looked.listing = stamp
            .filter(|(_, modified)| settled(modified))
            .map(|(ino, modified)| Listing {
                dir: runs.to_owned(),
                ino,
                modified,
                runs: listed.clone(),
            });
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::Rows;
    use crate::fleet::run_dir::RunDir;
    use crate::runs::{RunRow, RunState, row};

    fn same(a: &RunRow, b: &RunRow) {
        assert_eq!(
            (&a.run, a.state, &a.outcome, a.sessions, a.started_ms),
            (&b.run, b.state, &b.outcome, b.sessions, b.started_ms)
        );
        assert_eq!((a.ended_ms, a.exit_code), (b.ended_ms, b.exit_code));
        assert!((a.cost_usd - b.cost_usd).abs() < 1e-9);
    }

    fn append(run: &RunDir, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(run.journal())
            .expect("the journal");
        f.write_all(text.as_bytes()).expect("appended");
    }

    #[test]
    fn a_journal_read_on_from_the_last_look_says_what_a_whole_read_says() {
        let dir = tempfile::tempdir().expect("a dir");
        let run = RunDir {
            id: "20260101T000000Z-0001".into(),
            path: dir.path().to_owned(),
        };
        let rows = Rows::default();
        // No journal yet: an empty row, as a whole read says.
        same(&rows.row(&run), &row(&run));
        append(
            &run,
            "{\"type\":\"turn_started\",\"urn\":\"cap://f/a\",\"ts_ms\":5}\n",
        );
        same(&rows.row(&run), &row(&run));
        // A last line half written is not read until it is ended.
        append(&run, "{\"type\":\"cap\",\"event\":{\"kind\":\"cap.usage\",");
        assert!(rows.row(&run).cost_usd.abs() < 1e-9);
        append(
            &run,
            "\"cost_usd_estimate\":0.5}}\n{\"type\":\"turn_started\",\"urn\":\"cap://f/b\"}\n",
        );
        let looked = rows.row(&run);
        assert!((looked.cost_usd - 0.5).abs() < 1e-9);
        assert_eq!(looked.sessions, 2);
        same(&looked, &row(&run));
        // Replaced by a shorter journal: read again from its start.
        let replaced = run.path.join("journal.new");
        std::fs::write(
            &replaced,
            "{\"type\":\"turn_started\",\"urn\":\"cap://f/c\",\"ts_ms\":1}\n",
        )
        .expect("a new journal");
        std::fs::rename(&replaced, run.journal()).expect("replaced");
        let again = rows.row(&run);
        assert_eq!((again.sessions, again.outcome.as_deref()), (1, None));
        same(&again, &row(&run));
        // Interrupted: not final (a resume may take it on).
        append(
            &run,
            "{\"type\":\"run_ended\",\"outcome\":\"interrupted\",\"ts_ms\":8}\n",
        );
        assert_eq!(rows.row(&run).state, RunState::Interrupted);
        append(&run, "{\"type\":\"resumed\",\"ts_ms\":9}\n");
        append(
            &run,
            "{\"type\":\"run_ended\",\"outcome\":\"completed\",\"exit_code\":0,\"ts_ms\":12}\n",
        );
        let ended = rows.row(&run);
        assert_eq!(ended.state, RunState::Completed);
        same(&ended, &row(&run));
        // Ended for good: final, its files not read again.
        std::fs::remove_file(run.journal()).expect("removed");
        same(&rows.row(&run), &ended);
    }

    #[test]
    fn a_settled_listing_is_kept_until_the_runs_directory_changes() {
        let runs = tempfile::tempdir().expect("a dir");
        let rows = Rows::default();
        let make = |id: &str| std::fs::create_dir(runs.path().join(id)).expect("a run dir");
        let ids = |rows: &Rows| -> Vec<String> {
            let listed = rows.all_in(runs.path()).expect("listed");
            listed.into_iter().map(|r| r.id).collect()
        };
        make("20260101T000000Z-0001");
        assert_eq!(ids(&rows), ["20260101T000000Z-0001"]);
        // Once the directory has settled, its listing is kept; a change shows.
        std::thread::sleep(super::SETTLED * 2);
        assert_eq!(ids(&rows), ["20260101T000000Z-0001"]);
        make("20260101T000001Z-0002");
        assert_eq!(
            ids(&rows),
            ["20260101T000000Z-0001", "20260101T000001Z-0002"]
        );
        std::fs::remove_dir(runs.path().join("20260101T000000Z-0001")).expect("removed");
        assert_eq!(ids(&rows), ["20260101T000001Z-0002"]);
    }
}
