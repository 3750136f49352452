//! One module per CLI verb.

pub(crate) mod acp;
pub(crate) mod chaos;
pub(crate) mod chat;
pub(crate) mod log;
pub(crate) mod manifest;
pub(crate) mod mcp;
pub(crate) mod resolve;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod serve;
pub(crate) mod speak;
pub(crate) mod submit;
pub(crate) mod worker;
pub(crate) mod workers;
pub(crate) mod worktree;

use std::path::Path;
use std::process::ExitCode;

use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::style::{ColorChoice, Style};

/// The run `id` (a directory of `.capfleet/runs`, or `latest`) under `dir` (default:
/// the current directory) for the verbs that read a run (`log`, `chaos report`); when
/// there is none, the error said on stderr and their exit code for it, 2.
pub(crate) fn find_run(
    dir: Option<&Path>,
    id: &str,
    color: ColorChoice,
) -> Result<RunDir, ExitCode> {
    RunDir::find(dir.unwrap_or(Path::new(".")), id).map_err(|e| {
        eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
        ExitCode::from(2)
    })
}
