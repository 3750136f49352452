//! The fleet supervisor: a dynamic supervisor with one session per child.
//!
//! Sessions apply their own restart policies to their drivers; the fleet learns how
//! each session ended (closed, failed with a meltdown, …) through supervision
//! messages and reports it to whoever watches the fleet. `Shutdown` closes every
//! session gracefully (their agents get end-of-input, then the group kill) and
//! answers once all are gone, or after a deadline by stopping them outright.

use std::collections::HashMap;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::mpsc;

use crate::error::TreeError;
use crate::session::{Session, SessionArgs, SessionMsg, SessionSpec};
use crate::telemetry::TreeTelemetry;
use crate::telemetry::metrics::{SessionInfo, UNKNOWN_MODEL};
use capfleet_wire::events::Decider;
use capfleet_wire::events::Published;

/// How long `Shutdown` waits for sessions to close before stopping them.
pub(crate) const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

pub(crate) struct Fleet;

/// Start arguments of the fleet.
pub(crate) struct FleetArgs {
    /// Who decides the sessions' requests (the answerer, handed down by the root).
    pub answerer: Option<Decider>,
    /// Every session also publishes here (journal, budget, telemetry).
    pub taps: Vec<mpsc::Sender<Published>>,
    /// Where the fleet reports sessions ending.
    pub events: Option<mpsc::Sender<FleetEvent>>,
    /// The parent of the sessions' spans; the metrics sessions are counted in.
    pub telemetry: TreeTelemetry,
}

/// What the fleet reports.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetEvent {
    /// A session ended; `reason` is its stop reason (e.g. `session cap://f/a failed`).
    SessionEnded {
        urn: String,
        reason: Option<String>,
        /// The session actor itself crashed (a bug), as opposed to ending by itself.
        crashed: bool,
    },
}

pub enum FleetMsg {
    /// Start a session.
    Spawn {
        spec: Box<SessionSpec>,
        subscribers: Vec<mpsc::Sender<Published>>,
        /// The parent of the session's span, if not the run's (a research session's
        /// is its question's `research` span).
        parent: Option<tracing::Span>,
        reply: RpcReplyPort<Result<ActorRef<SessionMsg>, TreeError>>,
    },
    /// Close every session; reply when all are gone.
    Shutdown(RpcReplyPort<()>),
    /// Internal: the shutdown deadline passed.
    ShutdownDeadline,
}

pub(crate) struct FleetState {
    args: FleetArgs,
    sessions: HashMap<ractor::ActorId, (String, ActorRef<SessionMsg>)>,
    shutdown_replies: Vec<RpcReplyPort<()>>,
}

impl FleetState {
    fn answer_shutdown_if_done(&mut self) {
        if self.sessions.is_empty() && !self.shutdown_replies.is_empty() {
            // No session will publish again: let go of the taps' senders so their
            // readers (the journal) see the end. (Not on stop: ractor hands a stopped
            // actor's state to its supervisor, which would keep them alive.)
            self.args.taps.clear();
            for reply in self.shutdown_replies.drain(..) {
                let _caller_gone = reply.send(());
            }
        }
    }
}

impl Actor for Fleet {
    type Msg = FleetMsg;
    type State = FleetState;
    type Arguments = FleetArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<FleetMsg>,
        args: FleetArgs,
    ) -> Result<FleetState, ActorProcessingErr> {
        Ok(FleetState {
            args,
            sessions: HashMap::new(),
            shutdown_replies: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<FleetMsg>,
        msg: FleetMsg,
        st: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            FleetMsg::Spawn {
                spec,
                mut subscribers,
                parent,
                reply,
            } => {
                if !st.shutdown_replies.is_empty() {
                    let urn = spec.urn().to_owned();
                    let _caller_gone = reply.send(Err(TreeError::ShuttingDown { urn }));
                    return Ok(());
                }
                subscribers.extend(st.args.taps.iter().cloned());
                let urn = spec.urn().to_owned();
                if let Some(m) = &st.args.telemetry.metrics {
                    let config = &spec.launch.config;
                    let info = SessionInfo {
                        agent: spec.launch.manifest.agent.name.clone(),
                        model: config.model.get().cloned().unwrap_or(UNKNOWN_MODEL.into()),
                    };
                    m.add_session(&urn, info);
                }
                let args = SessionArgs {
                    spec: *spec,
                    subscribers,
                    answerer: st.args.answerer.clone(),
                    parent: parent.unwrap_or_else(|| st.args.telemetry.span.clone()),
                };
                let result = match Actor::spawn_linked(None, Session, args, myself.get_cell()).await
                {
                    Ok((session, _join)) => {
                        st.sessions.insert(session.get_id(), (urn, session.clone()));
                        Ok(session)
                    }
                    Err(e) => {
                        if let Some(m) = &st.args.telemetry.metrics {
                            m.remove_session(&urn);
                        }
                        let reason = match TreeError::spawn("session", e) {
                            TreeError::Start { reason, .. } => reason,
                            other => other.to_string(),
                        };
                        Err(TreeError::Session { urn, reason })
                    }
                };
                let _caller_gone = reply.send(result);
            }
            FleetMsg::Shutdown(reply) => {
                st.shutdown_replies.push(reply);
                for (_, session) in st.sessions.values() {
                    let _gone = session.cast(SessionMsg::Close);
                }
                let _timer = myself.send_after(SHUTDOWN_DEADLINE, || FleetMsg::ShutdownDeadline);
                st.answer_shutdown_if_done();
            }
            FleetMsg::ShutdownDeadline => {
                for (urn, session) in st.sessions.values() {
                    tracing::warn!(%urn, "session did not close in time; stopping it");
                    session.stop(Some("fleet shutdown deadline".into()));
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<FleetMsg>,
        evt: SupervisionEvent,
        st: &mut FleetState,
    ) -> Result<(), ActorProcessingErr> {
        let (id, reason, crashed) = match evt {
            SupervisionEvent::ActorTerminated(cell, _, reason) => (cell.get_id(), reason, false),
            SupervisionEvent::ActorFailed(cell, err) => {
                (cell.get_id(), Some(err.to_string()), true)
            }
            _ => return Ok(()),
        };
        if let Some((urn, _)) = st.sessions.remove(&id) {
            if crashed {
                tracing::error!(%urn, ?reason, "session actor crashed");
            }
            if let Some(events) = &st.args.events {
                let _watcher_gone = events
                    .send(FleetEvent::SessionEnded {
                        urn,
                        reason,
                        crashed,
                    })
                    .await;
            }
        }
        st.answer_shutdown_if_done();
        Ok(())
    }
}
