//! The verbs on a run's workspaces after the run: `diff`, `merge`, `clean`. Each
//! finds the run like `capfleet log` does (`latest` or a run id, under the current
//! directory or `--dir`) and reads its `workspaces.json`.

pub(crate) mod clean;
pub(crate) mod diff;
pub(crate) mod merge;

use std::path::PathBuf;

use capfleet_engine::workspace::{RunWorkspaces, Workspace};

use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::style::Style;

/// Exit code for a refusal (`git_dirty`, `merge_conflict`, work that would be lost).
pub(crate) const EXIT_REFUSED: u8 = 1;
/// Exit code for bad usage (unknown run or session).
pub(crate) const EXIT_USAGE: u8 = 2;

/// Which run, and where it was started.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunRef {
    /// The run id (a directory of .capfleet/runs) or `latest`.
    pub run: String,
    /// The directory the run was started from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl RunRef {
    /// The run directory and its workspaces.
    pub(crate) fn load(&self) -> Result<(RunDir, RunWorkspaces), String> {
        let base = self.dir.clone().unwrap_or_else(|| PathBuf::from("."));
        let run = RunDir::find(&base, &self.run).map_err(|e| e.to_string())?;
        let ws = RunWorkspaces::load(&run.path).map_err(|e| e.to_string())?;
        Ok((run, ws))
    }
}

/// The workspace of `session`, or an error naming the run's sessions.
pub(crate) fn session<'a>(ws: &'a RunWorkspaces, session: &str) -> Result<&'a Workspace, String> {
    ws.find(session).ok_or_else(|| {
        format!(
            "run {} has no workspace for `{session}` (sessions with workspaces: {})",
            ws.run_id,
            ws.names()
        )
    })
}

/// `r`'s value; or, its error said on stderr, none (the verb then exits).
pub(crate) fn said<T>(r: Result<T, String>, err: Style) -> Option<T> {
    r.map_err(|e| eprintln!("{} {e}", err.err("error:"))).ok()
}
