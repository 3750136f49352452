//! `capfleet clean <run-id>`: remove the run's worktrees and branches, never losing
//! work: a worktree with uncommitted changes, or a branch with unmerged commits, is
//! refused with the files that would be lost, unless `--force` (which still keeps
//! unmerged branches). `--all` and `--older-than AGE` do the same for every finished
//! run (never one still running).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use capfleet_engine::workspace::RunWorkspaces;
use capfleet_engine::workspace::clean::clean;

use super::{EXIT_REFUSED, EXIT_USAGE, RunRef};
use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::runs::RunState;
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet clean latest
      remove what holds no unmerged or uncommitted work
  capfleet clean latest --force
      remove the worktrees anyway (unmerged branches stay)
  capfleet clean --all
      the same for every finished run (a running one is left alone)
  capfleet clean --older-than 7d
      every finished run that started more than 7 days ago (s, m, h, d)

Exit codes: 0 everything removed, 1 something was refused (listed), 2 unknown run.")]
pub(crate) struct CleanArgs {
    /// The run id (a directory of .capfleet/runs) or `latest`.
    #[arg(required_unless_present_any = ["all", "older_than"], conflicts_with_all = ["all", "older_than"])]
    pub run: Option<String>,
    /// The directory the run was started from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Every finished run (completed, failed or interrupted; not one still running).
    #[arg(long)]
    pub all: bool,
    /// Every finished run that started longer ago than AGE (`30m`, `12h`, `7d`).
    #[arg(long, value_name = "AGE", value_parser = parse_age, conflicts_with = "all")]
    pub older_than: Option<Duration>,
    /// Remove worktrees even with uncommitted changes (they are lost); branches with
    /// unmerged commits are kept.
    #[arg(long)]
    pub force: bool,
}

pub(crate) fn run(args: CleanArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let runs = match &args.run {
        Some(run) => vec![RunRef {
            run: run.clone(),
            dir: args.dir.clone(),
        }],
        None => finished_runs(&args),
    };
    let mut refused = false;
    for run in &runs {
        let (run, all) = match run.load() {
            Ok(x) => x,
            // One run named: its absence is the answer; among many, a run without
            // workspaces (one that never made any) is simply skipped.
            Err(e) if args.run.is_some() => {
                eprintln!("{} {e}", err.err("error:"));
                return ExitCode::from(EXIT_USAGE);
            }
            Err(_) => continue,
        };
        refused |= clean_one(&run.id, &all, args.force, err);
    }
    if refused {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    }
}

/// The finished runs `--all` or `--older-than` select (a running one never).
fn finished_runs(args: &CleanArgs) -> Vec<RunRef> {
    let base = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let now = capfleet_wire::clock::now_ms();
    RunDir::all(&base)
        .unwrap_or_default()
        .iter()
        .map(capfleet_app::runs::row)
        .filter(|r| r.state != RunState::Running)
        .filter(|r| {
            args.older_than.is_none_or(|age| {
                let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
                r.started_ms.is_some_and(|t| now.saturating_sub(t) > age_ms)
            })
        })
        .map(|r| RunRef {
            run: r.run,
            dir: args.dir.clone(),
        })
        .collect()
}

/// Clean one run's workspaces, printing what was removed and refused; whether
/// something was refused.
fn clean_one(id: &str, all: &RunWorkspaces, force: bool, err: Style) -> bool {
    let report = clean(all, force);
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
        println!("nothing left to clean in run {id}: {why}");
    }
    !report.refused.is_empty()
}

/// `30s`, `30m`, `12h`, `7d` (a number and a unit).
fn parse_age(text: &str) -> Result<Duration, String> {
    let (num, unit) = text.split_at(text.len().saturating_sub(1));
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "`{text}`: a number and a unit (s, m, h or d), e.g. 7d"
            ));
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}`: a number and a unit (s, m, h or d), e.g. 7d"))?;
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_a_number_and_a_unit() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_age("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_age("7").is_err());
        assert!(parse_age("d").is_err());
        assert!(parse_age("7w").is_err());
        assert!(parse_age("").is_err());
    }
}
