//! The binary under test: [`BIN`], the [`capfleet`] command every test starts from,
//! its registry [`sandbox`], and a run's journal read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The `capfleet` binary cargo built beside this test binary.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_capfleet");

/// `capfleet` run in `dir` with a config home of its own (`dir/config`), no colour
/// and no width (no `COLUMNS`: lines as they always were); stdin null, stdout and
/// stderr piped.
pub(crate) fn capfleet(dir: &Path) -> Command {
    configured(Command::new(BIN), dir)
}

/// [`capfleet`] with its open-file limit, soft and hard, set to `nofile` (by `sh`'s
/// `ulimit`, which then execs it: the same pid).
pub(crate) fn capfleet_with_nofile(dir: &Path, nofile: u64) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!(
            "ulimit -Sn {nofile} && ulimit -Hn {nofile} && exec \"$0\" \"$@\""
        ))
        .arg(BIN);
    configured(sh, dir)
}

/// `c` set up as [`capfleet`] sets up its command (also for a shell that runs it).
pub(crate) fn configured(mut c: Command, dir: &Path) -> Command {
    c.current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("NO_COLOR", "1")
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Confines `c`'s registry to the shipped manifests: `PATH`, the config home and
/// `HOME` are (empty) directories inside `dir`.
pub(crate) fn sandbox<'c>(c: &'c mut Command, dir: &Path) -> &'c mut Command {
    c.env("PATH", dir.join("bin"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("HOME", dir.join("home"))
}

/// [`capfleet`] in `dir` confined to the shipped manifests ([`sandbox`]).
pub(crate) fn sandboxed(dir: &Path) -> Command {
    let mut c = capfleet(dir);
    sandbox(&mut c, dir);
    c
}

/// The newest run directory under `dir/.capfleet/runs` (two runs may start within
/// one second, so by modification time, not by name).
pub(crate) fn latest_run(dir: &Path) -> PathBuf {
    newest_run(dir).expect("a run directory")
}

/// [`latest_run`], if there is one yet.
fn newest_run(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join(".capfleet/runs"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// Every record of the journal at `path`, parsed.
pub(crate) fn journal_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("journal {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line ({e}): {l}")))
        .collect()
}

/// The records of the newest run's journal under `dir`.
pub(crate) fn run_journal(dir: &Path) -> Vec<Value> {
    journal_records(&latest_run(dir).join("journal.jsonl"))
}

/// The records of the newest run's journal under `dir` while the run writes it: none
/// before it exists, and a last line still being written left out.
pub(crate) fn journal_so_far(dir: &Path) -> Vec<Value> {
    let Some(run) = newest_run(dir) else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(run.join("journal.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The outcome of a journal's `run_ended` record, if it has one.
pub(crate) fn run_ended(records: &[Value]) -> Option<String> {
    records
        .iter()
        .find(|r| r["type"] == "run_ended")
        .map(|r| r["outcome"].as_str().unwrap_or("").to_owned())
}
