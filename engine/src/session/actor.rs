//! The session actor's message loop and supervision of its driver.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::machine::Core;
use super::{Internal, Own, SessionArgs, SessionMsg};
use crate::protocol::CancelScope;
use capfleet_wire::events::SessionState;
use capfleet_wire::supervision::ExitCause;

/// The session actor (see the module doc of [`crate::session`]).
pub(crate) struct Session;

impl Actor for Session {
    type Msg = SessionMsg;
    type State = Core;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<Core, ActorProcessingErr> {
        let _started = myself.cast(Own::StartDriver.into());
        Ok(Core::new(args))
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        core: &mut Core,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Ask {
                prompt,
                traceparent,
                reply,
            } => core.ask(&myself, prompt, traceparent, reply).await,
            SessionMsg::Steer { text, reply } => core.steer(text, reply).await,
            SessionMsg::Answer(answer) => core.on_answer(answer).await,
            SessionMsg::Cancel { scope, reason } => match scope {
                CancelScope::CurrentTurn => core.cancel_turn(&myself, &reason).await,
                CancelScope::Session => {
                    // Stop the turn first, so the agent is free to end promptly.
                    core.cancel_turn(&myself, &reason).await;
                    core.close(&myself).await
                }
            },
            SessionMsg::Close => core.close(&myself).await,
            SessionMsg::Resize { rows, cols } => core.slot.resize(rows, cols),
            SessionMsg::Chaos { fault, seed_pos } => core.inject(fault, seed_pos).await,
            SessionMsg::Snapshot(reply) => {
                let _caller_gone = reply.send(core.snapshot());
            }
            SessionMsg::Internal(Internal(own)) => on_own(core, &myself, own).await,
        }
        if core.state.is_terminal() && core.slot.driver.is_none() {
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
        let cause = match evt {
            SupervisionEvent::ActorFailed(cell, err) if core.slot.holds(&cell) => {
                ExitCause::from_error(err.as_ref())
            }
            SupervisionEvent::ActorTerminated(cell, _, _) if core.slot.holds(&cell) => {
                ExitCause::Normal
            }
            _ => return Ok(()),
        };
        core.slot.driver = None;
        // Everything the driver sent before it ended is already queued in our mailbox;
        // handle the exit after it (see `Own::DriverExited`).
        let generation = core.slot.generation();
        let _self_gone = myself.cast(Own::DriverExited { generation, cause }.into());
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

/// A message the session sent itself, or its driver's outputs.
async fn on_own(core: &mut Core, myself: &ActorRef<SessionMsg>, own: Own) {
    match own {
        Own::Output(batch) => {
            if core.slot.is_current(batch.generation) {
                for out in batch.outputs {
                    core.on_output(myself, out).await;
                }
            }
            drop(batch.credit);
        }
        Own::StartDriver => core.start_driver(myself).await,
        Own::DriverExited { generation, cause } => {
            if core.slot.is_current(generation) {
                core.slot.next_generation();
                core.on_driver_exit(myself, cause).await;
            }
        }
        Own::InitTimeout { generation } => {
            if core.slot.awaits_ready(generation) {
                core.slot.kill(ExitCause::hung(core.spec.init_timeout));
            }
        }
        Own::TurnTimeout { turn, attempt } => {
            let current = core.book.current().map(|t| (t.id, t.attempts));
            // A paused turn is not running: its attempt's timer is moot.
            if current == Some((turn, attempt)) && core.state != SessionState::Paused {
                core.slot.kill(ExitCause::hung(core.spec.turn_timeout));
            }
        }
        Own::Resume { token } => core.resume(myself, token).await,
        Own::DroppedQuiet { turn, attempt } => core.on_dropped_quiet(myself, turn, attempt).await,
        Own::CancelDeadline { turn } => {
            if core.book.turn_id() == Some(turn) {
                tracing::warn!(urn = %core.bus.urn(), turn, "cancel not honoured in time; killing the agent");
                core.slot.kill_cancelled();
            }
        }
    }
}
