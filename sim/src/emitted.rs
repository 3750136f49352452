//! `--emitted FILE`: the sim's own record of the turn results it writes, which the
//! chaos report compares with the journal (events lost,
//! the engine's `chaos::report::events`). Each result is recorded in two lines
//! around its write, so a process killed between the two is seen to have had a
//! result in flight:
//!
//! - before the `result` frame is written, `{"frame":N,"pid":…,"pgid":…,"ts_ms":…,
//!   "input_tokens":…,"output_tokens":…,"cost_usd":…}` (N counts this process's
//!   results from 1): the result is recorded, whatever happens next;
//! - once the frame is written and flushed, `{"written":N,"pid":…,"ts_ms":…}`.
//!
//! A `frame` line without its `written` line is a result in flight when the process
//! died: the frame may have reached the reader whole, or not at all. Each line is one
//! `write(2)` on a file opened for appending: the sims of several sessions may append
//! to one file (`--emitted` set by hand), and a line is never split by another's.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::PathBuf;

use capfleet_wire::clock::now_ms;
use serde_json::{Value, json};

use super::script::steps::Usage;

/// The record of the results one sim process writes.
pub(super) struct Emitted {
    path: PathBuf,
    file: Option<File>,
    /// Results recorded by this process.
    frames: u64,
}

impl Emitted {
    pub(super) fn new(path: PathBuf) -> Emitted {
        Emitted {
            path,
            file: None,
            frames: 0,
        }
    }

    /// Record a result about to be written, with its usage: its number.
    pub(super) fn recording(&mut self, u: &Usage) -> io::Result<u64> {
        self.frames += 1;
        // SAFETY: getpgrp(2) has no failure case and touches no memory.
        let pgid = unsafe { libc::getpgrp() };
        let line = json!({"frame": self.frames, "pid": std::process::id(), "pgid": pgid,
            "ts_ms": now_ms(), "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cost_usd": u.cost_usd});
        self.append(&line)?;
        Ok(self.frames)
    }

    /// Result `frame` is written and flushed.
    pub(super) fn written(&mut self, frame: u64) -> io::Result<()> {
        let line = json!({"written": frame, "pid": std::process::id(), "ts_ms": now_ms()});
        self.append(&line)
    }

    fn append(&mut self, line: &Value) -> io::Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            None => {
                if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?;
                self.file.insert(f)
            }
        };
        // One write(2) per line (a `writeln!` of a `Value` is many writes).
        file.write_all(format!("{line}\n").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_recorded_before_it_is_written_and_marked_written_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("emitted.jsonl");
        let mut e = Emitted::new(path.clone());
        let u = Usage {
            input_tokens: 5,
            cost_usd: 0.5,
            ..Usage::default()
        };
        let n = e.recording(&u).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let first: Value = serde_json::from_str(before.trim()).unwrap();
        assert_eq!(
            (n, &first["frame"], &first["input_tokens"]),
            (1, &json!(1), &json!(5))
        );
        assert_eq!(first["pid"], std::process::id());
        assert!(first["written"].is_null() && first["ts_ms"].as_u64().unwrap() > 0);
        e.written(n).unwrap();
        assert_eq!(e.recording(&u).unwrap(), 2);
        let lines: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["written"], 1);
        assert_eq!(lines[2]["frame"], 2);
    }
}
