//! What the driver's outputs do to the session: readiness (and the prompt that waited
//! for it), the agent's events (hooks, spans, the turn book, the stream; its requests
//! to the answerer), a turn's end, a withdrawn request. Late output (an event marked
//! `capfleet.late_output`) is filed under the last ended turn, never the running one.

use ractor::ActorRef;

use super::SessionMsg;
use super::machine::Core;
use crate::protocol::{CapEvent, HasMeta, StopReason, is_late_output};
use capfleet_wire::driver::DriverOutput;
use capfleet_wire::events::{Decide, MAX_CONTEXT, OpenRequest, fail_safe};
use capfleet_wire::events::{EventBody, SessionState, TurnOutcome};

impl Core {
    pub(super) async fn on_output(&mut self, myself: &ActorRef<SessionMsg>, out: DriverOutput) {
        let event = match &out {
            DriverOutput::Event(e) => Some(e),
            _ => None,
        };
        self.watch_output(myself, event);
        if let Some(CapEvent::Error(e)) = event {
            self.book.note_error(e.code.as_str());
        }
        match out {
            DriverOutput::Ready {
                resume_id,
                resumed,
                meta,
            } => {
                self.slot.set_ready();
                self.slot.resumed_natively = resumed;
                self.spans.ready();
                if resume_id.is_some() {
                    self.slot.resume_id = resume_id;
                }
                let mut event = CapEvent::ready(self.slot.resume_id.as_deref());
                if meta.is_some() {
                    *event.meta_mut() = meta;
                }
                self.publish(EventBody::Cap { event }).await;
                if self.book.prompt_pending() {
                    self.send_prompt(myself, Some(resumed)).await;
                } else if self.book.done() == 0 {
                    self.set_state(SessionState::Ready).await;
                } else {
                    self.set_state(SessionState::Done).await;
                }
            }
            DriverOutput::ResumeId(id) => {
                // Journaled: a resumed run resumes the agent's session by it.
                if self.slot.resume_id.as_deref() != Some(id.as_str()) {
                    self.publish(EventBody::ResumeId { id: id.clone() }).await;
                }
                self.slot.resume_id = Some(id);
            }
            DriverOutput::Event(event) if capfleet_wire::driver::is_lost_turn_end(&event) => {
                self.on_lost_end(event).await
            }
            DriverOutput::Event(event) => self.on_event(myself, event).await,
            DriverOutput::TurnEnd(end) => {
                let cancelled =
                    self.book.cancel_requested() || end.stop_reason == StopReason::Cancelled;
                if end.is_error && !cancelled && self.pause_instead(myself).await {
                    return;
                }
                let outcome = match (cancelled, end.is_error) {
                    (true, _) => TurnOutcome::Cancelled,
                    (false, true) => TurnOutcome::Failed,
                    (false, false) => TurnOutcome::Completed,
                };
                self.end_turn(outcome, end.stop_reason).await;
            }
            DriverOutput::Audit(record) => {
                self.spans.audit(&record);
                self.publish(EventBody::Audit { record }).await;
            }
            DriverOutput::Withdrawn { req_id } => {
                self.book.withdraw(&req_id);
                self.spans
                    .permission_answered(&req_id, "withdrawn", "agent");
                self.after_answer().await;
            }
        }
    }

    async fn on_event(&mut self, myself: &ActorRef<SessionMsg>, mut event: CapEvent) {
        self.hooks.apply(self.bus.urn(), &mut event);
        self.spans.on_event(&event);
        if is_late_output(event.meta()) {
            // The ended turn's output, even if the next turn has started meanwhile.
            let ended = Some(self.book.done()).filter(|&n| n > 0);
            self.bus.publish(ended, EventBody::Cap { event }).await;
            return;
        }
        self.book.record(&event);
        self.note_rate_limit(&event);
        let request = match &event {
            CapEvent::PermissionRequest(p) => Some(OpenRequest::Permission {
                req_id: p.req_id.clone(),
                tool: p.tool.clone(),
                intent: p.intent.get().cloned(),
                scope: p.scope,
                risk: p.risk_level,
                why: capfleet_wire::bindings::risk::reasons(&event),
            }),
            CapEvent::AskUser(a) => Some(OpenRequest::Ask {
                ask_id: a.ask_id.clone(),
                prompt: a.prompt.clone(),
                form: a.form.get().cloned(),
            }),
            _ => None,
        };
        self.publish(EventBody::Cap { event }).await;
        if let Some(request) = request {
            self.book.open(request.clone());
            self.set_state(SessionState::InputRequired).await;
            match &self.answerer {
                Some(a) => {
                    let _gone = a.cast(Decide {
                        urn: self.bus.urn().clone(),
                        session: myself.get_derived(),
                        span: self.spans.request(request.id()),
                        context: self.book.context(MAX_CONTEXT),
                        request,
                    });
                }
                None => {
                    let _self_gone = myself.cast(fail_safe(&request).into());
                }
            }
        }
    }
}
