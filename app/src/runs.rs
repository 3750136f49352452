//! The runs of a data dir (`.capfleet/runs/`) as `capfleet runs` lists them and
//! `capfleet serve` answers them: each with its state — `completed`, `failed`
//! (a session failed, a budget was exceeded, the disk failed), `interrupted` (a
//! signal stopped it, or its capfleet died before the run ended), `running` with its
//! capfleet's pid —, its cost (the `cap.usage` estimates in its journal), its
//! sessions and its start time. A process that looks again and again (the MCP
//! tools' `list_runs`, `run_status` and `wait_run` polls) keeps [`Rows`]: each
//! journal read on from where its last look stopped.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::fleet::run_dir::{Orchestrator, RunDir};

mod rows;
pub use rows::Rows;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Completed,
    Failed,
    Interrupted,
    Running,
    /// Waits to start (a server's queue, on disk).
    Queued,
}

/// One run, as listed.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub run: String,
    pub state: RunState,
    /// The outcome its journal ended with, if it ended.
    pub outcome: Option<String>,
    /// The capfleet running it (only while it runs).
    pub pid: Option<u32>,
    pub cost_usd: f64,
    pub sessions: usize,
    /// The first record's time (ms since the epoch), if it has one.
    pub started_ms: Option<u64>,
    /// When it ended and its exit code, once it has.
    pub ended_ms: Option<u64>,
    pub exit_code: Option<u8>,
}

/// What the run's lock and journal say about it (its journal read whole; [`Rows`]
/// reads on from where it stopped).
pub fn row(run: &RunDir) -> RunRow {
    row_of(run, &read_journal(&run.journal()))
}

/// What the run's lock and `read`, its journal so far, say about it.
fn row_of(run: &RunDir, read: &JournalRead) -> RunRow {
    let (state, pid) = match run.orchestrator() {
        _ if run.is_queued() && !read.ended => (RunState::Queued, None),
        Orchestrator::Running => (RunState::Running, lock_pid(&run.path)),
        _ => (read.state(), None),
    };
    RunRow {
        run: run.id.clone(),
        state,
        outcome: read.outcome.clone(),
        pid,
        cost_usd: read.cost_usd,
        sessions: read.sessions.len(),
        started_ms: read.started_ms,
        ended_ms: read.ended_ms,
        exit_code: read.exit_code,
    }
}

pub fn state_of(outcome: Option<&str>, ended: bool) -> RunState {
    match outcome {
        Some("completed") => RunState::Completed,
        Some("interrupted") => RunState::Interrupted,
        Some(_) => RunState::Failed,
        // Ended without an outcome: capfleet's own `run_ended` for a run whose tree
        // never started (a workspace that could not be made).
        None if ended => RunState::Failed,
        None => RunState::Interrupted,
    }
}

fn lock_pid(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join(crate::fleet::run_dir::LOCK_FILE)).ok()?;
    serde_json::from_str::<Value>(text.trim()).ok()?["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
}

/// What one pass over a run's journal says.
#[derive(Debug, Default)]
pub struct JournalRead {
    /// The last `run_ended`'s outcome (none once the run went on after it).
    pub outcome: Option<String>,
    /// A `run_ended` that nothing went on after.
    pub ended: bool,
    /// When that `run_ended` was written, and its exit code.
    pub ended_ms: Option<u64>,
    pub exit_code: Option<u8>,
    pub cost_usd: f64,
    pub sessions: BTreeSet<String>,
    pub started_ms: Option<u64>,
    /// The run has workspaces (`worktree` records).
    pub worktrees: bool,
    /// They were collected after the last `run_ended` (`collected`).
    pub collected: bool,
}

fn read_journal(path: &Path) -> JournalRead {
    std::fs::read_to_string(path)
        .map(|text| JournalRead::of(text.lines()))
        .unwrap_or_default()
}

impl JournalRead {
    /// One pass over the journal's lines; a line that does not parse (a torn last
    /// line) is skipped. A run taken over, resumed or handed back after a
    /// `run_ended` has not ended.
    pub fn of<'a>(lines: impl Iterator<Item = &'a str>) -> JournalRead {
        let mut read = JournalRead::default();
        for line in lines {
            let Ok(rec) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            read.add(&rec);
        }
        read
    }

    /// The run's state as its journal says, as `run --resume` decides it: a run
    /// with workspaces has ended only once they were collected after its end (a cut
    /// between `run_ended` and `collected` still owes the end-of-run pass, `--commit`
    /// included, which a resume makes).
    pub(crate) fn state(&self) -> RunState {
        if self.ended && self.worktrees && !self.collected {
            return RunState::Interrupted;
        }
        state_of(self.outcome.as_deref(), self.ended)
    }

    /// Take one more record into account.
    pub fn add(&mut self, rec: &Value) {
        let read = self;
        if read.started_ms.is_none() {
            read.started_ms = rec["ts_ms"].as_u64();
        }
        match rec["type"].as_str() {
            Some("run_ended") => {
                read.ended = true;
                read.ended_ms = rec["ts_ms"].as_u64();
                // The engine's `run_ended` says its outcome (and signal): its code.
                let code = rec["exit_code"]
                    .as_u64()
                    .and_then(|c| u8::try_from(c).ok())
                    .or_else(|| {
                        let outcome = serde_json::from_value(rec["outcome"].clone()).ok()?;
                        let signal = serde_json::from_value(rec["signal"].clone()).ok();
                        Some(crate::launch::code_of(outcome, signal))
                    });
                if code.is_some() {
                    read.exit_code = code;
                }
                if let Some(o) = rec["outcome"].as_str() {
                    read.outcome = Some(o.to_owned());
                }
                read.collected = false;
            }
            Some("worktree") => read.worktrees = true,
            Some("collected") => read.collected = true,
            Some("lease_taken" | "resumed" | "handed_back") => {
                read.ended = false;
                read.outcome = None;
                read.ended_ms = None;
                read.exit_code = None;
            }
            Some("turn_started") => {
                if let Some(urn) = rec["urn"].as_str() {
                    read.sessions.insert(urn.to_owned());
                }
            }
            Some("cap") if rec["event"]["kind"] == "cap.usage" => {
                read.cost_usd += rec["event"]["cost_usd_estimate"].as_f64().unwrap_or(0.0);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{JournalRead, RunState, state_of};

    fn read(lines: &[&str]) -> JournalRead {
        JournalRead::of(lines.iter().copied())
    }

    #[test]
    fn a_run_that_went_on_after_its_end_has_not_ended_until_it_ends_again() {
        let stopped = [
            r#"{"type":"turn_started","urn":"cap://f/a","ts_ms":5}"#,
            r#"{"type":"run_ended","outcome":"interrupted","exit_code":130,"ts_ms":7}"#,
        ];
        let r = read(&stopped);
        assert!(r.ended);
        assert_eq!(r.outcome.as_deref(), Some("interrupted"));
        assert_eq!(
            (r.started_ms, r.ended_ms, r.exit_code),
            (Some(5), Some(7), Some(130))
        );
        // Handed back, then taken over: going on, nothing ended.
        let mut lines = stopped.to_vec();
        lines.push(r#"{"type":"handed_back","ts_ms":8}"#);
        lines.push(r#"{"type":"lease_taken","ts_ms":9}"#);
        let r = read(&lines);
        assert!(!r.ended);
        assert_eq!((r.outcome, r.ended_ms, r.exit_code), (None, None, None));
        assert_eq!(state_of(None, false), RunState::Interrupted);
        // Its second end is the one that counts; a torn last line is skipped.
        lines.push(r#"{"type":"run_ended","outcome":"completed","exit_code":0,"ts_ms":12}"#);
        // The engine's own `run_ended` names no code: it is its outcome's.
        let engine = [r#"{"type":"run_ended","outcome":"interrupted","signal":"SIGTERM"}"#];
        assert_eq!(read(&engine).exit_code, Some(143));
        let engine = [r#"{"type":"run_ended","outcome":"budget_exceeded"}"#];
        assert_eq!(read(&engine).exit_code, Some(crate::launch::EXIT_BUDGET));
        lines.push(r#"{"type":"cap","event":{"kind":"cap.usage","cost_usd_estimate":0.5}}"#);
        lines.push(r#"{"type":"st"#);
        let r = read(&lines);
        assert!(r.ended);
        assert_eq!(r.outcome.as_deref(), Some("completed"));
        assert_eq!((r.ended_ms, r.exit_code), (Some(12), Some(0)));
        assert!((r.cost_usd - 0.5).abs() < 1e-9);
        assert_eq!(r.sessions.len(), 1);
    }

    #[test]
    fn a_run_with_workspaces_has_ended_once_they_were_collected_after_its_end() {
        let ended = [
            r#"{"type":"worktree","session":"a","ts_ms":1}"#,
            r#"{"type":"run_ended","outcome":"completed","exit_code":0,"ts_ms":7}"#,
        ];
        // Killed between `run_ended` and `collected`: a resume owes the end-of-run pass.
        assert_eq!(read(&ended).state(), RunState::Interrupted);
        let mut lines = ended.to_vec();
        lines.push(r#"{"type":"collected","sessions":1,"ts_ms":8}"#);
        assert_eq!(read(&lines).state(), RunState::Completed);
        // A resume's new end owes a new collection.
        lines.push(r#"{"type":"resumed","ts_ms":9}"#);
        lines.push(r#"{"type":"run_ended","outcome":"failed","exit_code":1,"ts_ms":10}"#);
        assert_eq!(read(&lines).state(), RunState::Interrupted);
        lines.push(r#"{"type":"collected","sessions":1,"ts_ms":11}"#);
        assert_eq!(read(&lines).state(), RunState::Failed);
        // Without workspaces, the end is the end.
        assert_eq!(read(&ended[1..]).state(), RunState::Completed);
    }
}
