//! What `chat`, `speak`, `acp` and serve's A2A agents share: one session under the full
//! supervision tree (root, answerer, fleet, session, driver) in a trace of its own,
//! a workflow of one agent (the GenAI conventions' `invoke_workflow`, as a fleet's run).

use std::path::PathBuf;
use std::process::ExitCode;

use capfleet_engine::answerer::{HumanQuestion, Policy};
use capfleet_engine::fault::DiskFault;
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::{SessionError, SessionMsg, SessionSpec, TurnResult};
use capfleet_engine::telemetry::TreeTelemetry;
use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY};
use ractor::ActorRef;
use tokio::sync::mpsc;

use crate::style::Style;

/// How the session's tree is set up.
pub struct Setup<'a> {
    /// The verb: the fleet's and the workflow's name.
    pub verb: &'static str,
    pub agent_type: &'a str,
    pub journal: Option<PathBuf>,
    pub policy: Policy,
    /// Where what the policy leaves open is asked (else: denied fail-safe).
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    /// The trace the workflow continues (the command's `TRACEPARENT`, when spans are
    /// exported).
    pub traceparent: Option<String>,
}

/// The running tree and its one session.
pub struct OneSession {
    pub orchestrator: Orchestrator,
    pub session: ActorRef<SessionMsg>,
    /// Every event of the session.
    pub events: mpsc::Receiver<Published>,
    /// A journal write that failed.
    pub faults: mpsc::Receiver<DiskFault>,
}

/// Start the tree and `spec`'s session; `Err` once said on stderr (the tree is down).
pub async fn start(
    setup: Setup<'_>,
    spec: SessionSpec,
    err: Style,
) -> Result<OneSession, ExitCode> {
    let (orchestrator, faults) = tree(setup, err).await?;
    let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
    match orchestrator.spawn_session(spec, vec![events_tx]).await {
        Ok(session) => Ok(OneSession {
            orchestrator,
            session,
            events,
            faults,
        }),
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            orchestrator.shutdown().await;
            Err(ExitCode::FAILURE)
        }
    }
}

/// Start the tree alone (its sessions come later), with the receiver of its journal's
/// write faults; `Err` once said on stderr.
pub async fn tree(
    setup: Setup<'_>,
    err: Style,
) -> Result<(Orchestrator, mpsc::Receiver<DiskFault>), ExitCode> {
    let span = tracing::info_span!(
        "workflow",
        otel.name = %format!("invoke_workflow {}", setup.verb),
        gen_ai.operation.name = "invoke_workflow",
        gen_ai.workflow.name = setup.verb,
        cap.agent.type = setup.agent_type,
    );
    if let Some(tp) = &setup.traceparent {
        capfleet_wire::events::trace::adopt_parent(&span, tp);
    }
    let (faults_tx, faults) = mpsc::channel(capfleet_engine::fault::FAULTS_CAPACITY);
    let orchestrator = Orchestrator::start(RootArgs {
        journal: setup.journal.map(Into::into),
        faults: Some(faults_tx),
        policy: setup.policy,
        human: setup.human,
        telemetry: TreeTelemetry {
            span,
            metrics: None,
        },
        ..RootArgs::new(setup.verb)
    })
    .await
    .map_err(|e| {
        eprintln!("{} {e}", err.err("error:"));
        ExitCode::FAILURE
    })?;
    Ok((orchestrator, faults))
}

/// Stop the tree; `code`, unless its journal lost records (then said, and a failure).
pub async fn finish(orchestrator: Orchestrator, code: ExitCode, err: Style) -> ExitCode {
    let kept = orchestrator.finish().await;
    if kept.lost > 0 {
        eprintln!(
            "{} the journal lost {} records",
            err.err("error:"),
            kept.lost
        );
        return ExitCode::FAILURE;
    }
    code
}

/// Ask `session` for a turn with `prompt` on a task of its own; its result comes on
/// the receiver (a session gone: `Closed`), so the caller listens to more meanwhile.
/// The turn's span is a child of `traceparent` when given (else of the session's).
pub fn ask(
    session: &ActorRef<SessionMsg>,
    prompt: String,
    traceparent: Option<String>,
) -> tokio::sync::oneshot::Receiver<Result<TurnResult, SessionError>> {
    let (tx, reply) = tokio::sync::oneshot::channel();
    let target = session.clone();
    tokio::spawn(async move {
        let asked = target.call(
            |reply| SessionMsg::Ask {
                prompt,
                traceparent,
                reply,
            },
            None,
        );
        let result = match asked.await {
            Ok(ractor::rpc::CallResult::Success(r)) => r,
            Ok(_) | Err(_) => Err(SessionError::Closed),
        };
        let _asker_gone = tx.send(result);
    });
    reply
}

/// Answer `q` fail-safe (deny / no answer), saying why.
pub fn refuse(q: HumanQuestion, why: &str) {
    tracing::warn!(request = q.request.id(), "{why}: answered fail-safe");
    let _session_gone = q.session.cast(capfleet_wire::events::fail_safe(&q.request));
}
