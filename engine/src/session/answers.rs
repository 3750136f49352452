//! Answers to the agent's open permission requests and asks (from the answerer, a
//! human, research or the fail-safe), and what happens to an answer for nothing open.

use serde_json::Value;

use super::machine::Core;
use crate::protocol::{CapCode, CapEvent, Decision, ErrorKind, HasMeta};
use capfleet_wire::driver::DriverMsg;
use capfleet_wire::events::{Answer, META_RESEARCH};
use capfleet_wire::events::{EventBody, SessionState};

impl Core {
    pub(super) async fn on_answer(&mut self, answer: Answer) {
        let (answer, note) = match answer {
            Answer::Researched { answer, note } => (*answer, Some(note)),
            other => (other, None),
        };
        match answer {
            Answer::Permission {
                req_id,
                decision,
                rule,
            } => self.answer_permission(req_id, decision, rule, note).await,
            Answer::Ask {
                ask_id,
                value,
                rule,
            } => self.answer_ask(ask_id, value, rule, note).await,
            // Research answers are never nested.
            Answer::Researched { .. } => {}
        }
    }

    async fn answer_permission(
        &mut self,
        req_id: String,
        decision: Decision,
        rule: String,
        note: Option<Value>,
    ) {
        if !self.book.answer_permission(&req_id) {
            self.reject_answer(&req_id).await;
            return;
        }
        self.spans
            .permission_answered(&req_id, decision.as_str(), &rule);
        let mut event = CapEvent::permission_response(req_id.clone(), decision);
        event.set_meta("capfleet.rule", Value::String(rule.clone()));
        if let Some(note) = note {
            event.set_meta(META_RESEARCH, note);
        }
        self.publish(EventBody::Cap { event }).await;
        let message = (decision == Decision::Deny).then(|| format!("denied by capfleet ({rule})"));
        self.slot.send(DriverMsg::Permission {
            req_id,
            decision,
            message,
        });
        self.after_answer().await;
    }

    async fn answer_ask(
        &mut self,
        ask_id: String,
        value: Option<Value>,
        rule: String,
        note: Option<Value>,
    ) {
        if !self.book.answer_ask(&ask_id) {
            self.reject_answer(&ask_id).await;
            return;
        }
        self.spans.ask_answered(&ask_id, value.is_some(), &rule);
        let mut event = CapEvent::ask_answer(ask_id.clone(), value.clone().unwrap_or(Value::Null));
        event.set_meta("capfleet.rule", Value::String(rule));
        if let Some(note) = note {
            event.set_meta(META_RESEARCH, note);
        }
        self.publish(EventBody::Cap { event }).await;
        self.slot.send(DriverMsg::Answer { ask_id, value });
        self.after_answer().await;
    }

    async fn reject_answer(&mut self, id: &str) {
        let event = CapEvent::error(
            ErrorKind::Cap(CapCode::UnknownPermission),
            format!("answer for {id}, which is not open (answered, withdrawn or unknown)"),
            false,
        );
        self.publish(EventBody::Cap { event }).await;
    }

    pub(super) async fn after_answer(&mut self) {
        if self.book.open_requests() == 0 && self.state == SessionState::InputRequired {
            self.set_state(SessionState::Working).await;
        }
    }
}
