//! `capfleet diff <run-id> [session]`: each workspace's changes against its base, as
//! a unified diff on stdout (pipe it to `git apply`), a header per session on
//! stderr; `--stat` lists the files instead. A workspace already cleaned away shows
//! the diff stored at the end of its run.

use std::io::Write;
use std::process::ExitCode;

use capfleet_engine::workspace::ARTIFACTS_DIR;
use capfleet_engine::workspace::diff::{Change, diff};
use capfleet_engine::workspace::{RunWorkspaces, Workspace};

use super::{EXIT_USAGE, RunRef, said, session};
use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet diff latest
      every session's changes in the last run
  capfleet diff 20261130T121500Z-3fa9 worker-a | git apply
      one session's changes, applied to the current checkout
  capfleet diff latest --stat
      changed files per session

Exit codes: 0 shown, 1 a workspace could not be read, 2 unknown run or session.")]
pub(crate) struct DiffArgs {
    #[command(flatten)]
    pub run: RunRef,
    /// Only this session.
    pub session: Option<String>,
    /// List changed files instead of the patch.
    #[arg(long)]
    pub stat: bool,
}

pub(crate) fn run(args: DiffArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let Some((run, all)) = said(args.run.load(), err) else {
        return ExitCode::from(EXIT_USAGE);
    };
    let chosen: Vec<&Workspace> = match &args.session {
        Some(name) => match said(session(&all, name), err) {
            Some(w) => vec![w],
            None => return ExitCode::from(EXIT_USAGE),
        },
        None => all.workspaces.iter().collect(),
    };
    let out_style = Style::for_stdout(color);
    let mut failed = false;
    for w in chosen {
        if let Err(e) = show(w, &run, &all, &args, out_style, err) {
            // The reader went away (`| head`): nothing more to say.
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("{} {}: {e}", err.err("error:"), w.session);
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn show(
    w: &Workspace,
    run: &RunDir,
    all: &RunWorkspaces,
    args: &DiffArgs,
    out: Style,
    err: Style,
) -> std::io::Result<()> {
    let place = match w.branch() {
        Some(b) => format!("branch {b}, {}", w.path.display()),
        None => format!("plain directory {}", w.path.display()),
    };
    eprintln!("{}", err.bold(&format!("== {} ({place})", w.session)));
    let mut stdout = std::io::stdout().lock();
    if !w.path.exists() {
        let stored = run
            .path
            .join(ARTIFACTS_DIR)
            .join(&w.session)
            .join("diff.patch");
        eprintln!(
            "   (removed by capfleet clean; the diff stored at the end of run {}:)",
            all.run_id
        );
        return match std::fs::read(&stored) {
            Ok(bytes) => stdout.write_all(&bytes),
            Err(_) => {
                eprintln!("   (no stored diff: the session changed nothing)");
                Ok(())
            }
        };
    }
    let mut patch = Vec::new();
    let summary =
        diff(w, &mut patch, &mut |_, _, _| {}).map_err(|e| std::io::Error::other(e.to_string()))?;
    if args.stat {
        for f in &summary.files {
            let mark = match f.change {
                Change::Added => "A",
                Change::Modified => "M",
                Change::Deleted => "D",
                Change::Renamed => "R",
                Change::TypeChange => "T",
            };
            let binary = if f.binary { "  (binary)" } else { "" };
            writeln!(stdout, "{mark} {}{binary}", f.path)?;
        }
        eprintln!(
            "   {} files, +{} -{}",
            summary.files.len(),
            summary.insertions,
            summary.deletions
        );
        return Ok(());
    }
    if summary.files.is_empty() {
        eprintln!("   (no changes)");
    }
    for line in String::from_utf8_lossy(&patch).split_inclusive('\n') {
        let shown =
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff --git")
            {
                out.bold(line)
            } else if line.starts_with('+') {
                out.ok(line)
            } else if line.starts_with('-') {
                out.err(line)
            } else if line.starts_with("@@") {
                out.dim(line)
            } else {
                line.to_owned()
            };
        stdout.write_all(shown.as_bytes())?;
    }
    stdout.flush()
}
