//! `capfleet clean <run-id>`: remove the run's worktrees and branches, never losing
//! work: a worktree with uncommitted changes, or a branch with unmerged commits, is
//! refused with the files that would be lost, unless `--force` (which still keeps
//! unmerged branches).

use std::process::ExitCode;

use capfleet_actors::workspace::clean::clean;

use super::{EXIT_REFUSED, EXIT_USAGE, RunRef};
use crate::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet clean latest
      remove what holds no unmerged or uncommitted work
  capfleet clean latest --force
      remove the worktrees anyway (unmerged branches stay)

Exit codes: 0 everything removed, 1 something was refused (listed), 2 unknown run.")]
pub(crate) struct CleanArgs {
    #[command(flatten)]
    pub run: RunRef,
    /// Remove worktrees even with uncommitted changes (they are lost); branches with
    /// unmerged commits are kept.
    #[arg(long)]
    pub force: bool,
}

pub(crate) fn run(args: CleanArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let (run, all) = match args.run.load() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let report = clean(&all, args.force);
    for r in &report.removed {
        let mut line = format!("removed {} ({})", r.session, r.path.display());
        if !r.dropped.is_empty() {
            line.push_str(&format!(
                ", dropping {} uncommitted file(s)",
                r.dropped.len()
            ));
        }
        if let Some(b) = &r.kept_branch {
            line.push_str(&format!(
                "; kept branch {b} (unmerged commits: git branch -D {b} deletes it)"
            ));
        }
        println!("{line}");
    }
    for refusal in &report.refused {
        eprintln!("{} kept {refusal}", err.warn("refused:"));
    }
    if report.removed.is_empty() && report.refused.is_empty() {
        let why = if report.gone.is_empty() {
            "it made no workspaces"
        } else {
            "an earlier clean removed its workspaces"
        };
        println!("nothing left to clean in run {}: {why}", run.id);
    }
    if report.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REFUSED)
    }
}
