//! Steering a running turn (CAP queued input, core §7.7): text that joins the turn
//! the agent is on instead of waiting for the next. Taken where the session's agent
//! takes queued input over its binding ([`queued_input`]: the manifest's
//! `capabilities.queued_input`, or its `x-binding.<binding>` value, and a binding
//! capfleet steers, a Codex app-server's `turn/steer`); refused otherwise with
//! `cap_queued_input_unsupported`, and refused with no turn running (ask instead).
//! A steer sent is published (`cap.user_input.inject`, journaled and counted) and
//! goes to the driver; the reply comes once the agent took it, or says `NoTurn` when
//! it did not (its turn ended first): the caller then asks for a turn of its own.

use ractor::RpcReplyPort;

use super::SessionError;
use super::machine::Core;
use crate::protocol::CapEvent;
use capfleet_wire::driver::{DriverMsg, queued_input};
use capfleet_wire::events::EventBody;

impl Core {
    pub(super) async fn steer(
        &mut self,
        text: String,
        reply: RpcReplyPort<Result<(), SessionError>>,
    ) {
        let refused = if self.state.is_terminal() || self.closing {
            Some(SessionError::Closed)
        } else if let Err(why) = queued_input(&self.spec.launch.manifest, self.spec.binding) {
            Some(SessionError::QueuedInputUnsupported { why })
        } else if !self.book.current().is_some_and(|t| t.sent) {
            Some(SessionError::NoTurn)
        } else {
            None
        };
        if let Some(err) = refused {
            let _caller_gone = reply.send(Err(err));
            return;
        }
        self.publish(EventBody::Cap {
            event: CapEvent::inject_text(&text),
        })
        .await;
        let (taken, heard) = tokio::sync::oneshot::channel();
        self.slot.send(DriverMsg::Steer { text, taken });
        // The agent's word comes while the session goes on with the turn's outputs.
        tokio::spawn(async move {
            let took = heard.await.unwrap_or(false);
            let _caller_gone = reply.send(if took {
                Ok(())
            } else {
                Err(SessionError::NoTurn)
            });
        });
    }
}
