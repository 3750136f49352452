//! `capfleet runs`: the runs of a data dir (`.capfleet/runs/` under the current
//! directory or `--dir`), oldest first, as [`capfleet_app::runs`] reads them; with
//! `--server`, those of a `capfleet serve` ([`remote`]).
//!
//! `capfleet runs` (`src/cmd/runs/`, the rows in `app/src/runs.rs`): every run directory, oldest first, with its
//! state read from its lock (held: `running`, with the lock file's pid) and journal
//! (`run_ended`'s outcome: `completed`, `interrupted`, anything else `failed`; no
//! `run_ended` and a free lock: `interrupted`), the sum of its `cap.usage` cost
//! estimates, the sessions that started a turn, and its first record's time.
//! `capfleet clean --all` / `--older-than AGE` run `clean`'s never-lose-work rules on
//! every run that is not running (and started before now - AGE).

mod remote;

use std::path::PathBuf;
use std::process::ExitCode;

use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::human::fit::Fit;
use capfleet_app::human::table::{Col, Overflow, Table, cell};
use capfleet_app::runs::{RunRow, RunState, row};
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet runs
      the runs started from this directory, oldest first
  capfleet runs --json
      one JSON object per run
  capfleet runs --server http://127.0.0.1:7878
      the runs of a `capfleet serve` (token from $CAPFLEET_TOKEN)

Exit codes: 0 listed (also when there are none), 1 the runs directory cannot be read.")]
pub(crate) struct RunsArgs {
    /// The directory the runs were started from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// List the runs of this `capfleet serve` instead (its base URL).
    #[arg(long, value_name = "URL", conflicts_with = "dir")]
    pub server: Option<String>,
    /// With --server: the environment variable holding the bearer token.
    #[arg(long, value_name = "VAR", default_value = "CAPFLEET_TOKEN")]
    pub token_env: String,
}

pub(crate) fn run(args: RunsArgs, color: ColorChoice) -> ExitCode {
    if let Some(server) = &args.server {
        return remote::runs(server, &args.token_env, args.json, color);
    }
    let err = Style::for_stderr(color);
    let base = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let runs = match RunDir::all(&base) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::FAILURE;
        }
    };
    let rows: Vec<RunRow> = runs.iter().map(row).collect();
    if args.json {
        for r in &rows {
            if let Ok(line) = serde_json::to_string(r) {
                println!("{line}");
            }
        }
        return ExitCode::SUCCESS;
    }
    let fit = Fit::stdout();
    if rows.is_empty() {
        let line = format!("no runs under {}", fit.path(&base.join(".capfleet/runs")));
        println!("{}", fit.wrap(&line, 4));
        return ExitCode::SUCCESS;
    }
    let mut table = Table::new(&COLUMNS);
    table.row(
        ["run", "state", "cost", "sessions", "started (UTC)"]
            .map(cell)
            .to_vec(),
    );
    for r in &rows {
        let state = match (r.state, r.pid, &r.outcome) {
            (RunState::Running, Some(pid), _) => format!("running (pid {pid})"),
            (RunState::Failed, _, Some(o)) => format!("failed ({o})"),
            (s, _, _) => serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
        };
        let started = r.started_ms.map_or_else(
            || "-".to_owned(),
            |ms| capfleet_wire::clock::rfc3339_secs(i64::try_from(ms / 1000).unwrap_or(0)),
        );
        table.row(vec![
            cell(&r.run),
            cell(state),
            cell(format!("${:.4}", r.cost_usd)),
            cell(r.sessions.to_string()),
            cell(started),
        ]);
    }
    for line in table.lines(&fit, Overflow::Next).concat() {
        println!("{line}");
    }
    ExitCode::SUCCESS
}

/// The table's columns: run, state, cost, sessions, start; the run and its state
/// stay on the row's line longest.
const COLUMNS: [Col; 5] = [
    Col::left("", 24, 0),
    Col::left(" ", 22, 1),
    Col::left(" ", 10, 2).right(),
    Col::left(" ", 8, 4).right(),
    Col::left("  ", 0, 3),
];
