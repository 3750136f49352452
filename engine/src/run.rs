//! One fleet run, end to end: the supervision tree, every session, the router; the
//! task to the start sessions; budget crossings, disk faults, a fatal death in the
//! tree ([`crate::death`]) and stop signals turned into a stop (`SIGINT` cooperative;
//! `SIGTERM`/`SIGHUP` halting every agent at once; a second signal cutting the kill
//! grace short, see [`capfleet_wire::process::halt`]); the
//! workspaces collected (diffs, vetting, commits, tests, the plan, transcripts at
//! each session's end); the report when the run has ended. The application adds the
//! view and the exit code.

pub mod calls;
mod chaos;
mod preamble;
mod spec;
mod start;
mod stops;
mod timed;

pub use spec::{Resume, RunReport, RunSpec, RunTelemetry, Stop, WorkspacePhase};

use std::sync::Arc;

use ractor::Actor;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::budget::{BudgetBook, BudgetLimits, BudgetScope};
use crate::death::{DEATHS_CAPACITY, Handling};
use crate::error::TreeError;
use crate::fault::FAULTS_CAPACITY;
use crate::root::{Orchestrator, RootArgs};
use crate::router::{Router, RouterArgs, RouterMsg, RouterRecovery};
use crate::session::SessionSpec;
use crate::telemetry::TreeTelemetry;
use crate::workspace::candidates::Candidates;
use crate::workspace::collect::{CollectSpec, collect, publish_plan_doc};
use crate::workspace::transcript;
use capfleet_wire::events::trace::{self, adopt_parent, int};
use capfleet_wire::events::{EventBody, Published, ROUTER_URN_SEGMENT, RunOutcome, Signal, urn};

use self::stops::Stops;
pub use crate::resume::Sandboxes;

/// Run the fleet until it ends or a signal arrives on `signals`: then every session is
/// cancelled and closed (their agents' groups killed at once unless the signal is
/// `SIGINT`), and a second signal cuts the kill grace short. `watchers` see every
/// session's events and the router's records. A closed `signals` is no stop.
pub async fn run_fleet(
    spec: RunSpec,
    watchers: Vec<mpsc::Sender<Published>>,
    signals: mpsc::Receiver<Signal>,
) -> Result<RunReport, TreeError> {
    run_until(spec, watchers, signals).await
}

/// [`run_fleet`], stopped by signals or by a [`Stop::Cancel`] of this run alone (one
/// run among several of a server).
pub async fn run_fleet_stoppable(
    spec: RunSpec,
    watchers: Vec<mpsc::Sender<Published>>,
    stops: mpsc::Receiver<Stop>,
) -> Result<RunReport, TreeError> {
    run_until(spec, watchers, stops).await
}

async fn run_until<S: Into<Stop>>(
    mut spec: RunSpec,
    watchers: Vec<mpsc::Sender<Published>>,
    mut signals: mpsc::Receiver<S>,
) -> Result<RunReport, TreeError> {
    // Before anything spawns: every confined session's sandbox, its test command's too.
    let moved = match &spec.resume {
        Some(r) => preamble::keep_journaled(&mut spec.sessions, &r.recovered.sandboxes),
        None => Vec::new(),
    };
    let sandboxes = preamble::sandboxes(&spec.sessions)?;
    let (alerts_tx, mut alerts) = mpsc::channel(16);
    let (faults_tx, mut faults) = mpsc::channel(FAULTS_CAPACITY);
    let (deaths_tx, mut deaths) = mpsc::channel(DEATHS_CAPACITY);
    // The GenAI conventions' workflow span: a coordinated run of several agents.
    let run_span = tracing::info_span!(
        "fleet.run",
        otel.name = %format_args!("invoke_workflow {}", spec.fleet),
        gen_ai.operation.name = "invoke_workflow",
        gen_ai.workflow.name = %spec.fleet,
        cap.fleet = %spec.fleet,
        cap.sessions = int(spec.sessions.len()),
        cap.budget.limit_usd = spec.budget.total_usd,
        cap.run.outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if let Some(tp) = &spec.telemetry.traceparent {
        adopt_parent(&run_span, tp);
    }
    if let Some(m) = &spec.telemetry.metrics {
        let per_session: Vec<(String, f64)> = spec
            .budget
            .per_session_usd
            .iter()
            .map(|(urn, usd)| (urn.to_string(), *usd))
            .collect();
        m.set_budget(spec.budget.total_usd, &per_session);
    }
    let telemetry = TreeTelemetry {
        span: run_span.clone(),
        metrics: spec.telemetry.metrics.clone(),
    };
    let tree = Orchestrator::start(RootArgs {
        fleet_name: spec.fleet.clone(),
        journal: spec.journal,
        faults: Some(faults_tx.clone()),
        deaths: Some(deaths_tx),
        policy: spec.policy,
        budget: budget_book(spec.budget, alerts_tx, spec.resume.as_ref()),
        human: spec.human,
        research: spec.research,
        fleet_events: None,
        telemetry: telemetry.clone(),
    })
    .await?;
    // A journal that died meanwhile: its death is on its way to the loop below.
    let journal_sink = tree.journal_tap().await.ok().flatten();
    let mut sinks = watchers.clone();
    sinks.extend(journal_sink.clone());
    let mut resume = spec.resume;
    let seq_of = |segment: &str| {
        let of = urn(&spec.fleet, segment);
        resume
            .as_ref()
            .and_then(|r| r.recovered.seqs.get(&of).copied())
            .unwrap_or(0)
    };
    let mut publisher = crate::workspace::publisher(
        &spec.fleet,
        sinks,
        seq_of(crate::workspace::WORKSPACE_URN_SEGMENT),
    );
    let router_seq = seq_of(ROUTER_URN_SEGMENT);
    // Ended (dropped) before the router and the journal are: see `calls`.
    let call_stream = spec.calls.map(|to| {
        let mut sinks = watchers.clone();
        sinks.extend(journal_sink);
        let (log, stream) = calls::start(&spec.fleet, sinks, seq_of(calls::MCP_URN_SEGMENT));
        let _caller_gone = to.send(log);
        stream
    });
    let phase = spec.workspace;
    if let Some(p) = &phase {
        p.store.report_faults_to(faults_tx.clone());
    }
    let preamble = preamble::records(&spec.sessions, phase.as_ref(), &sandboxes);
    let agents: Vec<(String, String)> = spec
        .sessions
        .iter()
        .map(|s| (s.name.clone(), s.launch.manifest.agent.name.clone()))
        .collect();
    let names = agents.iter().map(|(name, _)| name.clone()).collect();
    let steering = (spec.sessions.iter())
        .filter(|s| s.steers())
        .map(|s| s.name.clone())
        .collect();
    let mut sessions = spec.sessions;
    for s in &mut sessions {
        s.recovered = resume
            .as_mut()
            .and_then(|r| r.recovered.sessions.remove(s.urn()));
    }
    let self_kills = resume
        .as_ref()
        .map(|r| r.recovered.self_kills)
        .unwrap_or_default();
    let metrics = spec.telemetry.metrics.as_ref();
    let run_chaos = chaos::prepare(spec.chaos, &mut sessions, metrics, self_kills);
    let transcripts = phase.as_ref().map(|p| (p.store.clone(), publisher.clone()));
    let (session_watchers, session_faults) = (watchers.clone(), faults_tx.clone());
    let subscribers: start::Subscribers = Box::new(move |s: &SessionSpec| {
        let mut subscribers = session_watchers.clone();
        if let Some((store, publisher)) = &transcripts {
            let subject = transcript::Subject {
                session: s.name.clone(),
                urn: s.urn().to_owned(),
                agent: s.launch.manifest.agent.name.clone(),
                model: s.launch.config.model.get().cloned(),
            };
            subscribers.extend(transcript::spawn(
                subject,
                store,
                publisher.clone(),
                session_faults.clone(),
            ));
        }
        subscribers
    });
    let mut sinks = watchers;
    sinks.extend(tree.journal_tap().await.ok().flatten());
    let marks = resume
        .as_mut()
        .map(|r| std::mem::take(&mut r.recovered.commits))
        .unwrap_or_default();
    let args = RouterArgs {
        fleet: spec.fleet.clone(),
        spec: spec.routing,
        sessions: names,
        sinks,
        abort_on_error: spec.abort_on_error,
        telemetry,
        // No router without the budget: a run never spends unbudgeted.
        budget: Some(tree.budget_actor().await?),
        durable: tree.journal_durable().await.ok().flatten(),
        preamble,
        steering,
        recovered: resume
            .map(|r| router_recovery(r, router_seq, preamble::anew(&moved, &sandboxes))),
        candidates: phase.as_ref().map(|p| {
            Arc::new(Candidates::new(
                &spec.fleet,
                &p.run_id,
                &p.workspaces,
                p.store.clone(),
            ))
        }),
    };
    let (router, _) = Actor::spawn_linked(None, Router, args, tree.root_cell())
        .await
        .map_err(|e| TreeError::spawn("router", e))?;
    let _started = router.cast(RouterMsg::Start);
    // The sessions come up while the router goes (a delivery waits for its session).
    let (stop_starting, stopped) = watch::channel(false);
    let mut starting = start::start_sessions(
        tree.spawner(),
        router.clone(),
        sessions,
        subscribers,
        run_chaos.as_ref().map(chaos::RunChaos::targets),
        stopped,
    );
    let mut all_started = false;
    // The timed faults go with the run: aborted when it ends.
    let chaos_task = run_chaos.map(|c| c.start(router.clone(), &run_span));

    let ended = router.call(RouterMsg::WaitEnd, None);
    tokio::pin!(ended);
    let mut stop = Stops::default();
    drop(faults_tx);
    let mut disk_faults = Vec::new();
    let mut child_deaths = Vec::new();
    let outcome = loop {
        tokio::select! {
            r = &mut ended => break match r {
                Ok(ractor::rpc::CallResult::Success(o)) => o,
                _ => RunOutcome::SessionFailed,
            },
            r = &mut starting, if !all_started => {
                all_started = true;
                if let Some(e) = start_failed(r) {
                    // As before the run began: no session could be spawned, the run fails.
                    drop(call_stream);
                    let _stopped = router.stop_and_wait(None, None).await;
                    tree.shutdown().await;
                    return Err(e);
                }
            }
            Some(crossing) = alerts.recv() => {
                let (scope, action) = match &crossing.scope {
                    BudgetScope::Fleet => ("fleet", "stop_run"),
                    BudgetScope::Session(urn) => (&**urn, "close_session"),
                };
                let _budget = budget_span(&run_span, scope, crossing.spent_usd, crossing.limit_usd, action).entered();
                let _gone = router.cast(RouterMsg::Budget(crossing));
            }
            Some(fault) = faults.recv() => {
                let reason = fault.to_string();
                disk_faults.push(fault);
                let _none_listen = stop_starting.send(true);
                let _gone = router.cast(RouterMsg::Stop { outcome: RunOutcome::DiskFailed, reason, signal: None });
            }
            Some(death) = deaths.recv() => {
                if death.handling() == Handling::FailsRun {
                    let _none_listen = stop_starting.send(true);
                    let _gone = router.cast(RouterMsg::Stop { outcome: RunOutcome::TreeFailed, reason: death.to_string(), signal: None });
                }
                child_deaths.push(death);
            }
            signal = signals.recv(), if stop.listening => {
                if let Some((reason, signal)) = stop.on(signal.map(Into::into)) {
                    let _none_listen = stop_starting.send(true);
                    let _gone = router.cast(RouterMsg::Stop { outcome: RunOutcome::Interrupted, reason, signal });
                }
            }
        }
    };
    drop(chaos_task);
    record_outcome(&run_span, outcome);
    // A run that ended by itself has every session started (as a run always had); one
    // stopped (a signal, a fault, the budget) starts no more.
    if !all_started {
        let by_itself = matches!(outcome, RunOutcome::Completed | RunOutcome::SessionFailed);
        if !by_itself || !disk_faults.is_empty() {
            let _none_listen = stop_starting.send(true);
        }
        if let Some(e) = start_failed((&mut starting).await) {
            tracing::error!("a session could not be started after the run ended: {e}");
        }
    }
    let mut workspaces = Vec::new();
    let mut plan_doc = None;
    if let Some(p) = &phase {
        let plan = router
            .call(RouterMsg::MasterPlan, None)
            .await
            .ok()
            .and_then(|r| match r {
                ractor::rpc::CallResult::Success(plan) => plan,
                _ => None,
            });
        let cs = CollectSpec {
            fleet: spec.fleet.clone(),
            run_id: p.run_id.clone(),
            // An interrupted run leaves everything as it is: no commits, no test runs.
            commit: p.commit && outcome != RunOutcome::Interrupted,
            tests: outcome != RunOutcome::Interrupted,
            test_timeout: p.test_timeout,
            agents,
            marks,
            durable: tree.journal_durable().await.ok().flatten(),
            sandboxes: sandboxes.clone(),
        };
        let router_urn = urn(&spec.fleet, ROUTER_URN_SEGMENT);
        let gather = async {
            let doc = match plan {
                Some(entries) => {
                    let doc = crate::protocol::Plan {
                        entries,
                        ..Default::default()
                    };
                    publish_plan_doc(&doc, &p.store, &mut publisher, &router_urn).await
                }
                None => None,
            };
            (
                doc,
                collect(&cs, &p.workspaces, &p.store, &mut publisher).await,
            )
        }
        // Each workspace's collection is a span of the run.
        .instrument(run_span.clone());
        tokio::pin!(gather);
        loop {
            tokio::select! {
                (doc, reports) = &mut gather => {
                    (plan_doc, workspaces) = (doc, reports);
                    break;
                }
                signal = signals.recv(), if stop.listening => {
                    let stopped = signal.is_some();
                    let _first = stop.on(signal.map(Into::into));
                    if stopped {
                        tracing::warn!("stopped while collecting the workspaces; they stay as they are");
                        break;
                    }
                }
            }
        }
    }
    drop(publisher);
    drop(call_stream);
    let races = match router.call(RouterMsg::Races, None).await {
        Ok(ractor::rpc::CallResult::Success(races)) => races,
        _ => Vec::new(),
    };
    let budget = tree.budget().await.unwrap_or_default();
    let counters = tree.counters().await.unwrap_or_default();
    // The router holds a journal sender: it goes before the journal is finished.
    if let Err(e) = router.stop_and_wait(None, None).await {
        tracing::error!("router stop: {e}");
    }
    // Signals during the shutdown still cut the agents' grace short.
    let finish = tree.finish();
    tokio::pin!(finish);
    let journal = loop {
        tokio::select! {
            kept = &mut finish => break kept,
            signal = signals.recv(), if stop.listening => {
                stop.on(signal.map(Into::into));
            }
        }
    };
    // Every session has ended (and its span with it): the run's span ends after them.
    trace::end(&run_span);
    // Faults of the last writes (the journal's final sync, a transcript's end).
    while let Ok(fault) = faults.try_recv() {
        disk_faults.push(fault);
    }
    child_deaths.extend(std::iter::from_fn(|| deaths.try_recv().ok()));
    let fatal = child_deaths
        .iter()
        .any(|d| d.handling() == Handling::FailsRun);
    let outcome = match outcome {
        RunOutcome::Completed | RunOutcome::SessionFailed | RunOutcome::BudgetExceeded
            if !disk_faults.is_empty() =>
        {
            RunOutcome::DiskFailed
        }
        RunOutcome::Completed | RunOutcome::SessionFailed | RunOutcome::BudgetExceeded if fatal => {
            RunOutcome::TreeFailed
        }
        o => o,
    };
    Ok(RunReport {
        outcome,
        budget,
        counters,
        journal,
        faults: disk_faults,
        deaths: child_deaths,
        workspaces,
        plan_doc,
        signal: stop.first,
        races,
        sandboxes,
    })
}

/// The error of the sessions' start, if it failed.
fn start_failed(r: Result<Result<(), TreeError>, tokio::task::JoinError>) -> Option<TreeError> {
    match r {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(TreeError::unreachable("the sessions' start", e)),
    }
}

/// The budget, with what a resumed run spent before counted.
fn budget_book(
    limits: BudgetLimits,
    alerts: mpsc::Sender<crate::budget::Crossing>,
    resume: Option<&Resume>,
) -> BudgetBook {
    use crate::tap::TapHandler as _;
    let mut book = BudgetBook::with_limits(limits, alerts);
    for usage in resume.iter().flat_map(|r| &r.recovered.usage) {
        book.on_event(usage);
    }
    book
}

/// The router's part of a resume, with the `resumed` record saying what was recovered.
fn router_recovery(
    r: Resume,
    seq: u64,
    sandboxes: std::collections::BTreeMap<String, capfleet_wire::process::sandbox::Sandbox>,
) -> RouterRecovery {
    let rec = r.recovered;
    let resumed = EventBody::Resumed {
        records: rec.tail.records,
        torn_bytes: rec.tail.torn.map(|t| t.bytes),
        replayed: rec.replay.len(),
        reissued: rec.interrupted.clone(),
        fleet_changed: r.fleet_changed,
        sandboxes,
    };
    RouterRecovery {
        replay: rec.replay,
        skip: rec.router_records,
        seq,
        resumed,
        fell_back: rec.fell_back,
    }
}

/// A budget crossing: instantaneous, under the run (the stop it causes is sent in it).
fn budget_span(
    run: &tracing::Span,
    scope: &str,
    spent: f64,
    limit: f64,
    action: &str,
) -> tracing::Span {
    tracing::info_span!(
        parent: run, "budget",
        cap.budget.scope = scope,
        cap.budget.spent_usd = spent,
        cap.budget.limit_usd = limit,
        cap.budget.action = action,
    )
}

fn record_outcome(run: &tracing::Span, outcome: RunOutcome) {
    let name = serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    run.record("cap.run.outcome", name.as_str());
    let failed = match outcome {
        RunOutcome::Completed => {
            run.record("otel.status_code", "ok");
            return;
        }
        RunOutcome::Interrupted => return,
        RunOutcome::SessionFailed => "a session failed",
        RunOutcome::BudgetExceeded => "the budget was exceeded",
        RunOutcome::DiskFailed => "the run's records could not be written",
        RunOutcome::TreeFailed => "a part of the supervision tree died",
    };
    trace::fail(run, &name, failed);
}
