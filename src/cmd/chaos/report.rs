//! `capfleet chaos report <run-id|latest>`: the report of a chaos run, computed from
//! its journal (`capfleet_engine::chaos::report`), with the orphan check done on this
//! machine once the run's orchestrator is gone. Readable, `--json` (the documented,
//! stable shape) or `--openmetrics` (the `capfleet_chaos_*` figures).

use std::path::PathBuf;
use std::process::ExitCode;

use capfleet_engine::chaos::Report;

use capfleet_app::fleet::run_dir::{LATEST, Orchestrator};
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet chaos report latest
      the report of the most recent run
  capfleet chaos report 20261130T121500Z-3fa9 --json | jq .invariants
      each invariant's verdict, for machines
  capfleet chaos report latest --openmetrics > /var/lib/node_exporter/capfleet_chaos.prom
      the capfleet_chaos_* figures for Prometheus

Exit codes: 0 every invariant checked holds, 1 one is broken, 2 no such run or its \
journal cannot be read.")]
pub(crate) struct ReportArgs {
    /// The run id (a directory of .capfleet/runs) or `latest`.
    #[arg(default_value = LATEST)]
    pub run: String,
    /// The report as one JSON object (its shape: the doc of capfleet-engine's `chaos::report`).
    #[arg(long, conflicts_with = "openmetrics")]
    pub json: bool,
    /// The report's figures as OpenMetrics text (`capfleet_chaos_*`).
    #[arg(long)]
    pub openmetrics: bool,
    /// The directory the run was started from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub(crate) fn run(args: &ReportArgs, color: ColorChoice) -> ExitCode {
    let run = match crate::cmd::find_run(args.dir.as_deref(), &args.run, color) {
        Ok(run) => run,
        Err(code) => return code,
    };
    // The journal unreadable, or the report unprintable: exit 2, as for no such run.
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
        ExitCode::from(2)
    };
    let mut report = match Report::from_journal(&run.journal()) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    // Orphans are looked for once the run's orchestrator is gone: the processes its
    // pid (or any dead capfleet) marked for the run's sessions.
    match run.orchestrator() {
        Orchestrator::Running => {}
        Orchestrator::Gone(owner) => report.check_orphans(&[owner.pid]),
        Orchestrator::Unknown => report.check_orphans(&[]),
    }
    let printed = if args.json {
        serde_json::to_string(&report).map_err(std::io::Error::other)
    } else if args.openmetrics {
        Ok(report.openmetrics())
    } else {
        Ok(report.to_string())
    };
    match printed {
        Ok(text) => println!("{}", text.trim_end()),
        Err(e) => return fail(&e),
    }
    if report.holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
