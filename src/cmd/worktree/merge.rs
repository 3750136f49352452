//! `capfleet merge <run-id> <session>`: the session's branch into the current
//! branch. Conflicts are reported (`merge_conflict`) and never resolved; a dirty
//! tree on either side is refused (`git_dirty`). `--commit` first commits what the
//! session left uncommitted in its worktree (vetted: a likely secret refuses).
//!
//! Never twice: the merge's intent is appended to the run's journal (`merge_started`,
//! synced) before anything changes and its end (`merged`) after; a merge cut between
//! the two is found in the journal and finished from where git is, not redone (one
//! cut after `HEAD` moved is recorded as that merge, `found`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use capfleet_engine::workspace::Vetter;
use capfleet_engine::workspace::WorkspaceError;
use capfleet_engine::workspace::commit::commit;
use capfleet_engine::workspace::diff::diff;
use capfleet_engine::workspace::merge::{Intent, MergeOutcome, merge};

use super::{EXIT_REFUSED, EXIT_USAGE, RunRef, said, session};
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet merge latest worker-a
      merge worker-a's branch into the current branch
  capfleet merge latest worker-b --commit
      commit what worker-b left uncommitted, then merge

Exit codes: 0 merged (or already merged), 1 refused (merge_conflict, git_dirty, a git \
error; nothing changed), 2 unknown run or session.")]
pub(crate) struct MergeArgs {
    #[command(flatten)]
    pub run: RunRef,
    /// The session whose branch to merge.
    pub session: String,
    /// Commit the session's uncommitted work on its branch first.
    #[arg(long)]
    pub commit: bool,
}

pub(crate) fn run(args: MergeArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let Some((run, all)) = said(args.run.load(), err) else {
        return ExitCode::from(EXIT_USAGE);
    };
    let Some(w) = said(session(&all, &args.session), err) else {
        return ExitCode::from(EXIT_USAGE);
    };
    if args.commit && w.path.exists() {
        match commit_vetted(w, &all.run_id) {
            Ok(Some(sha)) => eprintln!("capfleet: committed {}'s work: {sha}", w.session),
            Ok(None) => {}
            Err(e) => {
                eprintln!("{} {e}", err.err("error:"));
                return ExitCode::from(EXIT_REFUSED);
            }
        }
    }
    let here = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{} the current directory: {e}", err.err("error:"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let branch = w.branch().unwrap_or_default();
    let key = format!("merge:{branch}");
    let mut open = open_merges(&run);
    let pending = open.remove(&key);
    let mut started = |i: &Intent| {
        let mut record = serde_json::to_value(i).unwrap_or_default();
        record["type"] = "merge_started".into();
        record["key"] = key.clone().into();
        run.append(record).map_err(|e| WorkspaceError::Repo {
            path: run.journal(),
            reason: format!("cannot journal the merge before making it: {e}"),
        })
    };
    let merged = merge(w, &here, pending.as_ref(), &mut started);
    if let Ok(outcome) = &merged {
        let (how, sha, found) = match outcome {
            MergeOutcome::UpToDate => ("up_to_date", None, false),
            MergeOutcome::FastForward { sha, found } => ("fast_forward", Some(sha), *found),
            MergeOutcome::Merged { sha, found } => ("merged", Some(sha), *found),
        };
        let mut record =
            serde_json::json!({ "type": "merged", "key": key, "outcome": how, "sha": sha });
        if found {
            record["found"] = true.into();
        }
        if let Err(e) = run.append(record) {
            eprintln!(
                "{} the merge is made; journaling it failed: {e}",
                err.warn("warning:")
            );
        }
    }
    match merged {
        Ok(MergeOutcome::UpToDate) => {
            println!("{branch}: already merged");
            ExitCode::SUCCESS
        }
        Ok(MergeOutcome::FastForward { sha, found }) => {
            println!("{branch}: fast-forward to {sha}{}", by_the_cut(found));
            ExitCode::SUCCESS
        }
        Ok(MergeOutcome::Merged { sha, found }) => {
            println!("{branch}: merged as {sha}{}", by_the_cut(found));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            // A dirty tree another branch's cut merge left: that merge finishes it.
            if matches!(e, WorkspaceError::Dirty { .. }) {
                for cut in open.keys().filter_map(|k| k.strip_prefix("merge:")) {
                    let session = cut.rsplit('/').next().unwrap_or(cut);
                    eprintln!(
                        "{} the merge of {cut} was cut and is unfinished: \
                         `capfleet merge {} {session}` finishes it",
                        err.warn("hint:"),
                        all.run_id
                    );
                }
            }
            ExitCode::from(EXIT_REFUSED)
        }
    }
}

/// What a merge found made by a cut one adds to its line.
fn by_the_cut(found: bool) -> &'static str {
    if found {
        " (made by the cut merge; recorded now)"
    } else {
        ""
    }
}

/// Vet the worktree's changes; commit them unless a likely secret is among them.
fn commit_vetted(
    w: &capfleet_engine::workspace::Workspace,
    run_id: &str,
) -> Result<Option<String>, WorkspaceError> {
    let mut vetter = Vetter::new(&w.paths);
    let summary = diff(w, &mut std::io::sink(), &mut |p, l, c| {
        vetter.added_line(p, l, c)
    })?;
    let secrets: Vec<String> = vetter
        .finish(&summary.files)
        .iter()
        .filter(|f| f.blocks_commit())
        .map(|f| f.describe())
        .collect();
    if !secrets.is_empty() {
        return Err(WorkspaceError::Dirty {
            what: format!("{}'s worktree", w.session),
            files: secrets,
            fix: "; not committed: remove the secrets, or commit by hand".into(),
        });
    }
    let message = format!("capfleet: work of session {} (run {run_id})", w.session);
    Ok(commit(w, &message, &w.session)?.map(|c| c.sha))
}

/// The merges the run's journal has as started and not as ended, by key.
fn open_merges(run: &capfleet_app::fleet::RunDir) -> BTreeMap<String, Intent> {
    let text = std::fs::read_to_string(run.journal()).unwrap_or_default();
    let mut open = BTreeMap::new();
    for v in text
        .lines()
        .filter(|l| l.contains("\"merge:"))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let Some(key) = v["key"].as_str().map(str::to_owned) else {
            continue;
        };
        match v["type"].as_str() {
            Some("merge_started") => match serde_json::from_value(v) {
                Ok(intent) => {
                    open.insert(key, intent);
                }
                Err(_) => {
                    open.remove(&key);
                }
            },
            Some("merged") => {
                open.remove(&key);
            }
            _ => {}
        }
    }
    open
}
