//! One admitted run, driven to its end by the engine `capfleet run` uses: the
//! workspaces provisioned, the spec built (`capfleet_app::launch`), `run_fleet`
//! with a tally of every event for the run's live view (`GET /v1/runs/{id}`), the
//! journal ended, the run's share freed and the queued runs that fit then started.
//! What the fleet's policy leaves open goes to the API's clients ([`super::asks`]),
//! unless the fleet says `auto_answer` (then it is answered fail-safe at once).

use std::sync::Arc;

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::run::RunTelemetry;
use capfleet_wire::events::trace::{adopt_parent, traceparent};
use capfleet_wire::events::{Published, RunOutcome, SUBSCRIBER_CAPACITY};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::asks;
use super::state::{Pending, RunState, Server};
use capfleet_app::launch::{self, InProcess};
use capfleet_app::notify::{Notifier, notices};
use capfleet_app::tally;
use capfleet_wire::clock::now_ms;

/// How long a run's own webhook may go on delivering after the run's end.
const NOTIFY_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What a run started for someone other than the HTTP API gets beside it (an
/// exposed fleet's A2A task: `super::a2a`).
#[derive(Default)]
pub(crate) struct RunHooks {
    /// Further subscribers to every event of the run.
    pub subscribers: Vec<mpsc::Sender<Published>>,
    /// Who answers what the policy leaves open, instead of the API's asks.
    pub human: Option<mpsc::Sender<HumanQuestion>>,
}

/// Start `pending` on its own task.
pub(crate) fn spawn(server: Arc<Server>, pending: Pending) {
    let span = tracing::info_span!("serve.run", cap.run.id = %pending.entry.id, cap.fleet = %pending.entry.fleet);
    if let Some(tp) = &pending.traceparent {
        adopt_parent(&span, tp);
    }
    if let Some(trace) = traceparent(&span)
        .as_deref()
        .and_then(|tp| tp.split('-').nth(1))
    {
        let _set_once = pending.entry.trace_id.set(trace.to_owned());
    }
    tokio::spawn(drive(server, pending).instrument(span));
}

async fn drive(server: Arc<Server>, pending: Pending) {
    let Pending {
        entry,
        mut fleet,
        run,
        lock,
        stops,
        hooks,
        traceparent: _,
    } = pending;
    fleet.bind_run_dir(&run);
    super::queued::started(&run);
    // The server's webhook and the fleet's own; the fleet's is delivered by tasks of
    // this run, given a grace at its end.
    let (own, workers) = Notifier::start(
        fleet.notify.iter().cloned().collect(),
        &server.metrics.notify,
    );
    let notifier = server.notifier.and(&own);
    let RunHooks { subscribers, human } = hooks;
    let human = (!fleet.auto_answer).then(|| {
        human.unwrap_or_else(|| {
            let (tx, rx) = mpsc::channel(16);
            let timeout = fleet.ask_timeout.unwrap_or(server.ask_timeout);
            let to = asks::Notify {
                notifier: notifier.clone(),
                run: entry.id.clone(),
                fleet: entry.fleet.clone(),
            };
            tokio::spawn(asks::take(entry.asks.clone(), rx, timeout, to));
            tx
        })
    });
    let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let tally = tokio::spawn(tally(entry.clone(), rx, notifier.clone()));
    let mut taps = vec![tx];
    taps.extend(subscribers);
    // The MCP tool calls on the run go to its journal once it is up.
    let (calls, log) = tokio::sync::oneshot::channel();
    let slot = entry.clone();
    tokio::spawn(async move {
        if let Ok(log) = log.await {
            slot.calls.live(log);
        }
    });
    let ended = launch::in_process(
        &mut fleet,
        &run,
        InProcess {
            human,
            telemetry: RunTelemetry {
                metrics: Some(server.fleet_metrics.clone()),
                // The run's span is under `serve.run`, which continues the
                // submitter's trace (`spawn`).
                traceparent: None,
            },
            resume: None,
            reuse_workspaces: false,
            taps,
            stops,
            replica: None,
            calls: Some(calls),
        },
    )
    .await;
    let _tallied = tally.await;
    if let Some(reason) = &ended.error {
        entry.update(|p| p.error = Some(reason.clone()));
    }
    let (outcome, code, spent) = (ended.outcome, ended.code, ended.spent_usd);
    entry.asks.withdraw_all();
    // The journal is complete: the run's lock goes before the run counts as ended.
    drop(lock);
    // Calls made before its journal came up (a run that failed before it did).
    capfleet_mcp::append_later(entry.id.clone(), entry.dir.clone(), entry.calls.close());
    entry.update(|p| {
        p.state = state_of(outcome);
        p.ended_ms = Some(now_ms());
        p.outcome = outcome.and_then(|o| {
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        });
        p.exit_code = Some(code);
        p.spent_usd = spent;
    });
    tracing::info!(run = %entry.id, exit_code = code, "run ended");
    let outcome = entry.progress().outcome;
    notifier.send(&notices::run_ended(
        &entry.id,
        &entry.fleet,
        outcome.as_deref(),
        code,
    ));
    tokio::spawn(workers.finish(NOTIFY_GRACE));
    for next in server.finished(&entry) {
        spawn(server.clone(), next);
    }
}

fn state_of(outcome: Option<RunOutcome>) -> RunState {
    match outcome {
        Some(RunOutcome::Completed) => RunState::Completed,
        Some(RunOutcome::Interrupted) => RunState::Interrupted,
        _ => RunState::Failed,
    }
}

/// Count every event of the run into its progress; a budget crossed is notified.
async fn tally(
    entry: Arc<super::state::RunEntry>,
    mut rx: mpsc::Receiver<Published>,
    notifier: Notifier,
) {
    while let Some(e) = rx.recv().await {
        entry.update(|p| tally::update(&mut p.seen, &e));
        if let Some(n) = notices::of_event(&e, &entry.id, &entry.fleet) {
            notifier.send(&n);
        }
    }
}
