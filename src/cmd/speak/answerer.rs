//! Who answers `speak`'s turns: one session of an agent (`--agent`), or a whole
//! fleet, one run per turn (`--fleet`, [`capfleet_app::one_fleet`]).

use capfleet_engine::protocol::CancelScope;
use capfleet_engine::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::events::{Published, Signal};
use ractor::ActorRef;
use tokio::sync::{mpsc, oneshot};

use super::inbound::Message;
use capfleet_app::one_fleet::{FleetAgent, FleetEnd, FleetTurn};

pub(super) enum Answerer {
    Session(ActorRef<SessionMsg>),
    Fleet {
        agent: Box<FleetAgent>,
        /// Where each run's events go (the loop's event channel).
        events: mpsc::Sender<Published>,
    },
}

/// A turn's reply on its way.
pub(super) enum Pending {
    Session {
        session: ActorRef<SessionMsg>,
        reply: oneshot::Receiver<Result<TurnResult, SessionError>>,
    },
    Fleet(Box<FleetTurn>),
    /// A turn that could not start: its end is known at once.
    Refused(Option<Reply>),
}

/// How a turn ended.
pub(super) enum Reply {
    Session(Result<TurnResult, SessionError>),
    Fleet(Box<FleetEnd>),
}

impl Answerer {
    /// Start a turn with `message`, unless `max_turns` were taken (a session counts
    /// its own; a fleet's runs are counted here: `done` of them so far). The turn's span
    /// (a fleet's: its run's) is a child of the message's `traceparent`, if any.
    pub(super) async fn ask(
        &mut self,
        message: Message,
        max_turns: Option<u32>,
        done: u32,
    ) -> Pending {
        if let (Answerer::Fleet { .. }, Some(max)) = (&*self, max_turns)
            && done >= max
        {
            return Pending::Refused(Some(Reply::Session(Err(SessionError::MaxTurns { max }))));
        }
        match self {
            Answerer::Session(session) => Pending::Session {
                session: session.clone(),
                reply: capfleet_app::one_session::ask(session, message.text, message.traceparent),
            },
            Answerer::Fleet { agent, events } => match agent
                .start(
                    &message.text,
                    message.traceparent.as_deref(),
                    events.clone(),
                )
                .await
            {
                Ok(turn) => Pending::Fleet(Box::new(turn)),
                Err(e) => Pending::Refused(Some(Reply::Fleet(Box::new(FleetEnd::failed(
                    e.to_string(),
                ))))),
            },
        }
    }

    /// The conversation id to report: the fleet's (its first run's), the inner
    /// agent's own, else `fallback`.
    pub(super) async fn session_id(&self) -> Option<String> {
        match self {
            Answerer::Session(session) => ractor::call!(session, SessionMsg::Snapshot)
                .ok()
                .and_then(|s| s.resume_id),
            Answerer::Fleet { agent, .. } => agent.conversation().map(str::to_owned),
        }
    }

    /// What a finished run taught the fleet for its next one.
    pub(super) fn learn(&mut self, end: &FleetEnd) {
        if let Answerer::Fleet { agent, .. } = self {
            agent.learn(end);
        }
    }
}

impl Pending {
    /// Cancel the turn: the session's, or every inner session's turn of the run.
    pub(super) fn cancel(&self, why: &str) {
        match self {
            Pending::Session { session, .. } => {
                let _gone = session.cast(SessionMsg::Cancel {
                    scope: CancelScope::CurrentTurn,
                    reason: why.to_owned(),
                });
            }
            Pending::Fleet(turn) => turn.stopper.cancel(why),
            Pending::Refused(_) => {}
        }
    }

    /// A signal: a fleet's run is stopped by it (a session's tree is stopped by the
    /// caller).
    pub(super) fn signal(&self, signal: Signal) {
        if let Pending::Fleet(turn) = self {
            turn.stopper.signal(signal);
        }
    }

    /// The turn's end.
    pub(super) async fn wait(&mut self) -> Reply {
        match self {
            Pending::Session { reply, .. } => {
                Reply::Session(reply.await.unwrap_or(Err(SessionError::Closed)))
            }
            Pending::Fleet(turn) => {
                Reply::Fleet(Box::new((&mut turn.ended).await.unwrap_or_else(|_| {
                    FleetEnd::failed("the run's task ended without a report".into())
                })))
            }
            Pending::Refused(end) => match end.take() {
                Some(end) => end,
                None => std::future::pending().await,
            },
        }
    }

    /// The run's id, for a fleet's.
    pub(super) fn run_id(&self) -> Option<&str> {
        match self {
            Pending::Fleet(turn) => Some(&turn.run_id),
            _ => None,
        }
    }
}
