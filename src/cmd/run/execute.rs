//! Running a validated fleet. (Minimal for now: every session spawned, each start
//! session asked the task once, the results printed; the router-driven run replaces
//! this body.)

use std::process::ExitCode;

use capfleet_actors::root::{Orchestrator, RootArgs};
use capfleet_actors::session::{SessionMsg, TurnOutcome};

use super::{EXIT_INTERRUPTED, EXIT_SESSION_FAILED, RunArgs};
use crate::fleet::{Fleet, RunDir};

pub async fn execute(mut fleet: Fleet, args: &RunArgs) -> ExitCode {
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
    let orchestrator = match Orchestrator::start(RootArgs {
        fleet_name: fleet.name.clone(),
        journal: Some(run.journal()),
        policy: fleet.policy.clone(),
        human: None,
        fleet_events: None,
    })
    .await
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("capfleet: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = tokio::select! {
        code = ask_start_sessions(&orchestrator, &fleet, args.json) => code,
        _ = tokio::signal::ctrl_c() => EXIT_INTERRUPTED,
    };
    orchestrator.shutdown().await;
    if let Err(e) = run.record_end(code) {
        eprintln!("capfleet: {e}");
    }
    ExitCode::from(code)
}

async fn ask_start_sessions(orchestrator: &Orchestrator, fleet: &Fleet, json: bool) -> u8 {
    let mut start = Vec::new();
    for spec in fleet.specs() {
        match orchestrator.spawn_session(spec.clone(), Vec::new()).await {
            Ok(session) if fleet.routing.start.contains(&spec.name) => {
                start.push((spec.name.clone(), session));
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("capfleet: {e}");
                return EXIT_SESSION_FAILED;
            }
        }
    }
    // One task per start session: their turns run concurrently.
    let turns: Vec<_> = start
        .into_iter()
        .map(|(name, session)| {
            let prompt = fleet.routing.task.clone();
            let turn = tokio::spawn(async move {
                ractor::call!(session, |reply| SessionMsg::Ask { prompt, reply })
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
            });
            (name, turn)
        })
        .collect();
    let mut code = 0;
    for (name, turn) in turns {
        match turn.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(turn) if json => {
                println!("{}", serde_json::json!({ "session": name, "turn": turn }));
                code = code.max(failed(turn.outcome));
            }
            Ok(turn) => {
                println!("[{name}] {:?}: {}", turn.outcome, turn.text.trim());
                code = code.max(failed(turn.outcome));
            }
            Err(e) => {
                eprintln!("[{name}] {e}");
                code = EXIT_SESSION_FAILED;
            }
        }
    }
    code
}

fn failed(outcome: TurnOutcome) -> u8 {
    match outcome {
        TurnOutcome::Completed => 0,
        TurnOutcome::Cancelled | TurnOutcome::Failed => EXIT_SESSION_FAILED,
    }
}
