//! Running a validated fleet through the engine's `run_fleet` (router, budget,
//! answerer, journal). Minimal view: one line per event (`capfleet log`'s format), or
//! NDJSON with `--json`; the live view replaces it.

use std::process::ExitCode;
use std::sync::Arc;

use capfleet_actors::budget::BudgetLimits;
use capfleet_actors::fleet::urn;
use capfleet_actors::run::{RunSpec, run_fleet};
use capfleet_actors::session::{Published, RunOutcome, SUBSCRIBER_CAPACITY};
use tokio::sync::mpsc;

use super::{EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_SESSION_FAILED, RunArgs};
use crate::cmd::log;
use crate::fleet::{Fleet, OnError, RunDir};
use crate::style::{ColorChoice, Style};

pub async fn execute(mut fleet: Fleet, args: &RunArgs, color: ColorChoice) -> ExitCode {
    let run = match std::env::current_dir()
        .map_err(|e| e.to_string())
        .and_then(|dir| RunDir::create(&dir).map_err(|e| e.to_string()))
    {
        Ok(run) => run,
        Err(e) => {
            eprintln!("capfleet: cannot make the run directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    fleet.bind_run_dir(&run);
    eprintln!(
        "capfleet: run {} (journal {})",
        run.id,
        run.journal().display()
    );
    let spec = RunSpec {
        sessions: fleet.specs().cloned().collect(),
        budget: BudgetLimits {
            total_usd: fleet.budgets.total_usd,
            per_session_usd: fleet
                .budgets
                .per_session
                .iter()
                .map(|(name, usd)| (Arc::from(urn(&fleet.name, name)), *usd))
                .collect(),
        },
        journal: Some(run.journal()),
        human: None,
        abort_on_error: fleet.on_error == OnError::Abort,
        fleet: fleet.name,
        routing: fleet.routing,
        policy: fleet.policy,
    };
    let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let printer = tokio::spawn(print_events(rx, args.json, Style::for_stdout(color)));
    let interrupt = async {
        let _no_handler = tokio::signal::ctrl_c().await;
    };
    let code = match run_fleet(spec, vec![tx], interrupt).await {
        Ok(report) => match report.outcome {
            RunOutcome::Completed => 0,
            RunOutcome::SessionFailed => EXIT_SESSION_FAILED,
            RunOutcome::BudgetExceeded => EXIT_BUDGET,
            RunOutcome::Interrupted => EXIT_INTERRUPTED,
        },
        Err(e) => {
            eprintln!("capfleet: {e}");
            // The router never ran: end the journal here.
            if let Err(e) = run.record_end(EXIT_SESSION_FAILED) {
                eprintln!("capfleet: {e}");
            }
            EXIT_SESSION_FAILED
        }
    };
    let _printed = printer.await;
    ExitCode::from(code)
}

async fn print_events(mut rx: mpsc::Receiver<Published>, json: bool, style: Style) {
    while let Some(event) = rx.recv().await {
        let Ok(value) = serde_json::to_value(&*event) else {
            continue;
        };
        if json {
            println!("{value}");
        } else if let Some(rec) = value.as_object() {
            println!("{}", log::line(rec, style));
        }
    }
}
