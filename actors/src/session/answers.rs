//! Answers to the agent's open permission requests and asks (from the answerer, a
//! human or the fail-safe), and what happens to an answer for nothing open.

use serde_json::Value;

use super::events::EventBody;
use super::handlers::Core;
use super::state::SessionState;
use crate::answerer::OpenRequest;
use crate::driver::DriverMsg;
use crate::protocol::{CapCode, CapEvent, Decision, ErrorKind, HasMeta};

impl Core {
    pub(super) async fn answer_permission(
        &mut self,
        req_id: String,
        decision: Decision,
        rule: String,
    ) {
        if !matches!(self.open.get(&req_id), Some(OpenRequest::Permission { .. })) {
            self.reject_answer(&req_id).await;
            return;
        }
        self.open.remove(&req_id);
        self.spans
            .permission_answered(&req_id, decision.as_str(), &rule);
        let mut event = CapEvent::permission_response(req_id.clone(), decision);
        event.set_meta("capfleet.rule", Value::String(rule.clone()));
        self.publish(EventBody::Cap { event }).await;
        let message = (decision == Decision::Deny).then(|| format!("denied by capfleet ({rule})"));
        if let Some(d) = &self.driver {
            let _gone = d.cast(DriverMsg::Permission {
                req_id,
                decision,
                message,
            });
        }
        self.after_answer().await;
    }

    pub(super) async fn answer_ask(&mut self, ask_id: String, value: Option<Value>, rule: String) {
        if !matches!(self.open.get(&ask_id), Some(OpenRequest::Ask { .. })) {
            self.reject_answer(&ask_id).await;
            return;
        }
        self.open.remove(&ask_id);
        self.spans.ask_answered(&ask_id, value.is_some(), &rule);
        let mut event = CapEvent::ask_answer(ask_id.clone(), value.clone().unwrap_or(Value::Null));
        event.set_meta("capfleet.rule", Value::String(rule));
        self.publish(EventBody::Cap { event }).await;
        if let Some(d) = &self.driver {
            let _gone = d.cast(DriverMsg::Answer { ask_id, value });
        }
        self.after_answer().await;
    }

    async fn reject_answer(&mut self, id: &str) {
        let event = CapEvent::error(
            ErrorKind::Other(CapCode::UnknownPermission.symbol().into()),
            format!("answer for {id}, which is not open (answered, withdrawn or unknown)"),
            false,
        );
        self.publish(EventBody::Cap { event }).await;
    }

    pub(super) async fn after_answer(&mut self) {
        if self.open.is_empty() && self.state == SessionState::InputRequired {
            self.set_state(SessionState::Working).await;
        }
    }
}
