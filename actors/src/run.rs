//! One fleet run, end to end: the supervision tree, every session, the router; the
//! task to the start sessions; budget alerts and interrupts turned into a stop; the
//! report when the run has ended. The application adds the view and the exit code.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use ractor::{Actor, ActorRef};
use tokio::sync::mpsc;

use crate::answerer::{HumanQuestion, Policy};
use crate::budget::{BudgetAlert, BudgetBook, BudgetLimits, BudgetSnapshot};
use crate::protocol::CancelScope;
use crate::root::{Orchestrator, RootArgs};
use crate::router::{Router, RouterArgs, RouterMsg, RoutingSpec};
use crate::session::{Published, RunOutcome, SessionMsg, SessionSpec};
use crate::telemetry::Counters;

/// Everything a run needs, validated.
pub struct RunSpec {
    pub fleet: String,
    pub sessions: Vec<SessionSpec>,
    pub routing: RoutingSpec,
    pub policy: Policy,
    pub budget: BudgetLimits,
    pub journal: Option<PathBuf>,
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub abort_on_error: bool,
}

/// How the run went.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub outcome: RunOutcome,
    pub budget: BudgetSnapshot,
    pub counters: Counters,
    pub journal_records: u64,
}

/// Run the fleet until it ends or `interrupt` resolves (Ctrl-C): then every session is
/// cancelled and closed. `watchers` see every session's events and the router's records.
pub async fn run_fleet(
    spec: RunSpec,
    watchers: Vec<mpsc::Sender<Published>>,
    interrupt: impl Future<Output = ()>,
) -> Result<RunReport, String> {
    let (alerts_tx, mut alerts) = mpsc::channel(16);
    let tree = Orchestrator::start(RootArgs {
        fleet_name: spec.fleet.clone(),
        journal: spec.journal,
        policy: spec.policy,
        budget: BudgetBook::with_limits(spec.budget, alerts_tx),
        human: spec.human,
        fleet_events: None,
    })
    .await?;
    let mut sessions = Vec::with_capacity(spec.sessions.len());
    for s in spec.sessions {
        let name = s.name.clone();
        match tree.spawn_session(s, watchers.clone()).await {
            Ok(actor) => sessions.push((name, actor)),
            Err(e) => {
                tree.shutdown().await;
                return Err(e);
            }
        }
    }
    let by_urn: Vec<(Arc<str>, ActorRef<SessionMsg>)> = sessions
        .iter()
        .map(|(n, a)| (Arc::from(crate::fleet::urn(&spec.fleet, n)), a.clone()))
        .collect();
    let mut sinks = watchers;
    sinks.extend(tree.journal_tap().await);
    let args = RouterArgs {
        fleet: spec.fleet,
        spec: spec.routing,
        sessions,
        sinks,
        abort_on_error: spec.abort_on_error,
    };
    let (router, _) = Actor::spawn_linked(None, Router, args, tree.root_cell())
        .await
        .map_err(|e| format!("cannot start the router: {e}"))?;
    let _started = router.cast(RouterMsg::Start);

    let ended = router.call(RouterMsg::WaitEnd, None);
    tokio::pin!(ended);
    tokio::pin!(interrupt);
    let mut interrupted = false;
    let outcome = loop {
        tokio::select! {
            r = &mut ended => break match r {
                Ok(ractor::rpc::CallResult::Success(o)) => o,
                _ => RunOutcome::SessionFailed,
            },
            Some(alert) = alerts.recv() => match alert {
                BudgetAlert::Total { spent, limit } => {
                    let reason = format!("cap_budget_exceeded: ${spent:.4} spent, budget ${limit:.4}");
                    let _gone = router.cast(RouterMsg::Stop { outcome: RunOutcome::BudgetExceeded, reason });
                }
                BudgetAlert::Session { urn, spent, limit } => {
                    tracing::warn!(%urn, spent, limit, "session budget exceeded; closing the session");
                    if let Some((_, s)) = by_urn.iter().find(|(u, _)| *u == urn) {
                        let reason = format!("cap_budget_exceeded: ${spent:.4} of ${limit:.4}");
                        let _gone = s.cast(SessionMsg::Cancel { scope: CancelScope::Session, reason });
                    }
                }
            },
            () = &mut interrupt, if !interrupted => {
                interrupted = true;
                let reason = "interrupted".to_owned();
                let _gone = router.cast(RouterMsg::Stop { outcome: RunOutcome::Interrupted, reason });
            }
        }
    };
    let budget = tree.budget().await.unwrap_or_default();
    let counters = tree.counters().await.unwrap_or_default();
    // The router holds a journal sender: it goes before the journal is finished.
    if let Err(e) = router.stop_and_wait(None, None).await {
        tracing::error!("router stop: {e}");
    }
    let journal_records = tree.shutdown().await;
    Ok(RunReport {
        outcome,
        budget,
        counters,
        journal_records,
    })
}
