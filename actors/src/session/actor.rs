//! The session actor's message loop and supervision of its driver.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::Semaphore;

use super::handlers::Core;
use super::spans::Spans;
use super::{SessionArgs, SessionMsg, SessionState};
use crate::driver::DriverMsg;
use crate::driver::sink::DEFAULT_CREDITS;
use crate::protocol::CancelScope;
use crate::supervision::{ExitCause, RestartTracker};

/// The session actor (see the module doc of [`crate::session`]).
pub struct Session;

impl Actor for Session {
    type Msg = SessionMsg;
    type State = Core;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<Core, ActorProcessingErr> {
        let SessionArgs {
            spec,
            subscribers,
            answerer,
            parent,
        } = args;
        let urn: Arc<str> = Arc::from(spec.urn());
        let spans = Spans::new(&spec, &parent);
        let tracker = RestartTracker::new(spec.policy);
        let _started = myself.cast(SessionMsg::StartDriver);
        Ok(Core {
            launch: Arc::new(spec.launch.clone()),
            spec,
            urn,
            state: SessionState::Starting,
            seq: 0,
            subscribers,
            answerer,
            driver: None,
            generation: 0,
            ready_generation: 0,
            credits: Arc::new(Semaphore::new(DEFAULT_CREDITS)),
            tracker,
            resume_id: None,
            turn: None,
            reply: None,
            turns_done: 0,
            open: HashMap::new(),
            kill_expected: false,
            closing: false,
            usage: Default::default(),
            spans,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        core: &mut Core,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Ask { prompt, reply } => core.ask(&myself, prompt, reply).await,
            SessionMsg::Permission {
                req_id,
                decision,
                rule,
            } => core.answer_permission(req_id, decision, rule).await,
            SessionMsg::Answer {
                ask_id,
                value,
                rule,
            } => core.answer_ask(ask_id, value, rule).await,
            SessionMsg::Cancel { scope, reason } => match scope {
                CancelScope::CurrentTurn => core.cancel_turn(&myself, &reason).await,
                CancelScope::Session => {
                    // Stop the turn first, so the agent is free to end promptly.
                    core.cancel_turn(&myself, &reason).await;
                    core.close(&myself).await
                }
            },
            SessionMsg::Close => core.close(&myself).await,
            SessionMsg::Resize { rows, cols } => resize(core, rows, cols),
            SessionMsg::Snapshot(reply) => {
                let _caller_gone = reply.send(core.snapshot());
            }
            SessionMsg::Output {
                generation,
                batch,
                credit,
            } => {
                if generation == core.generation {
                    for out in batch {
                        core.on_output(&myself, out).await;
                    }
                }
                drop(credit);
            }
            SessionMsg::StartDriver => core.start_driver(&myself).await,
            SessionMsg::DriverExited { generation, cause } => {
                if generation == core.generation {
                    // Outputs of this driver still in flight (a reader racing a kill)
                    // are stale from now on.
                    core.generation += 1;
                    core.on_driver_exit(&myself, cause).await;
                }
            }
            SessionMsg::InitTimeout { generation } => {
                if generation == core.generation && core.ready_generation != generation {
                    core.kill_driver(ExitCause::hung(core.spec.init_timeout));
                }
            }
            SessionMsg::TurnTimeout { turn, attempt } => {
                let current = core.turn.as_ref().map(|t| (t.id, t.attempts));
                if current == Some((turn, attempt)) {
                    core.kill_driver(ExitCause::hung(core.spec.turn_timeout));
                }
            }
            SessionMsg::CancelDeadline { turn } => {
                if core.turn.as_ref().is_some_and(|t| t.id == turn) {
                    tracing::warn!(urn = %core.urn, turn, "cancel not honoured in time; killing the agent");
                    core.kill_expected = true;
                    core.kill_driver(ExitCause::Normal);
                }
            }
        }
        if core.state.is_terminal() && core.driver.is_none() {
            myself.stop(Some(core.stop_reason()));
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SessionMsg>,
        evt: SupervisionEvent,
        core: &mut Core,
    ) -> Result<(), ActorProcessingErr> {
        let is_driver = |cell: &ractor::ActorCell| {
            core.driver
                .as_ref()
                .is_some_and(|d| d.get_id() == cell.get_id())
        };
        let cause = match evt {
            SupervisionEvent::ActorFailed(cell, err) if is_driver(&cell) => {
                ExitCause::from_error(err.as_ref())
            }
            SupervisionEvent::ActorTerminated(cell, _, _) if is_driver(&cell) => ExitCause::Normal,
            _ => return Ok(()),
        };
        core.driver = None;
        // Everything the driver sent before it ended is already queued in our mailbox;
        // handle the exit after it (see `SessionMsg::DriverExited`).
        let generation = core.generation;
        let _self_gone = myself.cast(SessionMsg::DriverExited { generation, cause });
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SessionMsg>,
        core: &mut Core,
    ) -> Result<(), ActorProcessingErr> {
        // Stopped from above (fleet shutdown): the driver is linked and stops with us,
        // its post_stop kills the agent's group. A caller still waiting gets an answer.
        core.fail_pending_reply();
        Ok(())
    }
}

/// Forwards a resize to the driver and keeps the size for the next agent.
fn resize(core: &mut Core, rows: u16, cols: u16) {
    if rows == 0 || cols == 0 {
        return;
    }
    let pty = &mut Arc::make_mut(&mut Arc::make_mut(&mut core.launch).manifest).pty;
    (pty.rows, pty.cols) = (rows, cols);
    if let Some(d) = &core.driver {
        let _gone = d.cast(DriverMsg::Resize { rows, cols });
    }
}
