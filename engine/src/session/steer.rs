//! Steering a running turn (CAP queued input, core §7.7): text that joins the turn
//! the agent is on instead of waiting for the next. Taken where the manifest says
//! `capabilities.queued_input` and the binding can (the contract's
//! [`steers_mid_turn`]: a Codex app-server's `turn/steer`); refused otherwise with
//! `cap_queued_input_unsupported`, and refused with no turn running (ask instead).
//! A steer taken is published (`cap.user_input.inject`, journaled) and goes to the
//! driver; the turn's reply says what the agent made of it.

use ractor::RpcReplyPort;

use super::SessionError;
use super::machine::Core;
use crate::protocol::CapEvent;
use capfleet_wire::driver::{DriverMsg, steers_mid_turn};
use capfleet_wire::events::EventBody;

impl Core {
    pub(super) async fn steer(
        &mut self,
        text: String,
        reply: RpcReplyPort<Result<(), SessionError>>,
    ) {
        let refused = if self.state.is_terminal() || self.closing {
            Some(SessionError::Closed)
        } else if !self.spec.launch.manifest.capabilities.queued_input {
            Some(SessionError::QueuedInputUnsupported {
                why: "the manifest says capabilities.queued_input = false".into(),
            })
        } else if !steers_mid_turn(self.spec.binding) {
            Some(SessionError::QueuedInputUnsupported {
                why: format!("capfleet steers no turn over {}", self.spec.binding),
            })
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
        self.slot.send(DriverMsg::Steer { text });
        let _caller_gone = reply.send(Ok(()));
    }
}
