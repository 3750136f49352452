//! A run of a conversation cut short (its process killed mid-run), found when the
//! conversation is gone on with (`--resume`, `session/load`): it is finished first,
//! as `capfleet run --resume` finishes a run (its fleet as it was, completed
//! deliveries replayed, the cut turn re-issued, its worktrees reused), on the task of
//! the next message's run, so a stop of that turn stops it too. Its events answered a
//! message of the process that was killed: they are not passed on.

use capfleet_engine::run::{RunSpec, Stop, run_fleet_stoppable};
use capfleet_wire::events::{RunOutcome, SUBSCRIBER_CAPACITY};
use tokio::sync::mpsc;

use super::{FleetAgent, FleetEnd, FleetError, load, watch};
use crate::fleet::RunDir;
use crate::fleet::run_dir::RunLock;
use crate::{resume, workspaces};

/// A cut run made ready to go on.
pub(super) struct CutRun {
    run: RunDir,
    /// Held until it has ended.
    lock: RunLock,
    spec: RunSpec,
    answerer: String,
}

/// Read `run`'s journal and fleet back, as `run --resume` does.
pub(super) async fn prepare(agent: &FleetAgent, run: RunDir) -> Result<CutRun, FleetError> {
    let failed = |e: resume::ResumeError| FleetError::Cut(e.to_string());
    let opened = resume::open_in(&agent.base, &run.id).map_err(failed)?;
    let mut fleet = load(&opened.fleet, opened.task.as_deref(), &agent.base).await?;
    let (lock, recovered) = match resume::check(&opened, &fleet.name, false).map_err(failed)? {
        resume::Verdict::Go { lock, resume } => (lock, resume),
        resume::Verdict::Ended(outcome) => {
            return Err(FleetError::Cut(format!("it had ended ({outcome})")));
        }
    };
    let run = opened.run;
    fleet.bind_run_dir(&run);
    let workspace = workspaces::reuse(&mut fleet, &run, false)
        .map_err(|e| FleetError::Workspaces(e.to_string()))?;
    let spec = agent.spec(&fleet, &run, workspace, Some(*recovered), None);
    Ok(CutRun {
        answerer: capfleet_wire::events::urn(&fleet.name, &fleet.answer_from),
        run,
        lock,
        spec,
    })
}

impl CutRun {
    /// Run it to its end, what arrives on `stops` passed on to it; the stop that cut
    /// it short again, if one did.
    pub(super) async fn finish(self, stops: &mut mpsc::Receiver<Stop>) -> Option<Stop> {
        let CutRun {
            run,
            lock,
            spec,
            answerer,
        } = self;
        tracing::warn!(run = %run.id, "finishing the run a kill cut short");
        let (relay, relayed) = mpsc::channel(4);
        let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let (nobody, _) = mpsc::channel(1);
        let both = async {
            tokio::join!(
                run_fleet_stoppable(spec, vec![tx], relayed),
                watch::forward(rx, answerer, nobody)
            )
        };
        tokio::pin!(both);
        let mut stopped = None;
        let (report, seen) = loop {
            tokio::select! {
                done = &mut both => break done,
                Some(stop) = stops.recv(), if stopped.is_none() => {
                    stopped = Some(stop.clone());
                    if relay.send(stop).await.is_err() {
                        tracing::debug!("the cut run had ended");
                    }
                }
            }
        };
        let end = seen.end(&run, report);
        drop(lock);
        tracing::info!(run = %run.id, outcome = ?end.outcome, "the run cut short has ended");
        stopped
    }
}

/// The end of the run `run` that never began: `stop` came while the cut run before
/// it was being finished (its journal ended, so it is not taken for a cut one).
pub(super) fn stopped_before(run: &RunDir, stop: &Stop) -> FleetEnd {
    if let Err(e) = run.record_end(crate::launch::EXIT_INTERRUPTED) {
        tracing::error!("{e}");
    }
    let why = match stop {
        Stop::Cancel(why) => why.clone(),
        Stop::Signal(signal) => format!("stopped by {signal}"),
    };
    FleetEnd {
        run_id: run.id.clone(),
        journal: run.journal(),
        outcome: Some(RunOutcome::Interrupted),
        ..FleetEnd::failed(format!(
            "{why}, while the run a kill had cut short was being finished"
        ))
    }
}
