//! The session's state and what each message does to it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ractor::{ActorRef, RpcReplyPort};
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};

use super::events::{EventBody, SessionEvent, TurnOutcome, now_ms};
use super::turn::{Turn, TurnResult, UsageTotals};
use super::{Published, SessionError, SessionMsg, SessionSnapshot, SessionSpec, SessionState};
use crate::answerer::{AnswererMsg, OpenRequest};
use crate::driver::acp::AcpDriver;
use crate::driver::pty::PtyDriver;
use crate::driver::stream_json::{DriverArgs, StreamJsonDriver};
use crate::driver::{DriverMsg, DriverOutput, ExitCause, LaunchSpec, OutputSink};
use crate::protocol::{CapCode, CapEvent, Decision, ErrorKind, HasMeta, StopReason};
use crate::registry::Binding;
use crate::supervision::{Decision as Restart, RestartTracker};

type Reply = RpcReplyPort<Result<TurnResult, SessionError>>;

/// The session's state (see [`super::Session`]).
pub struct Core {
    pub(super) spec: SessionSpec,
    pub(super) launch: Arc<LaunchSpec>,
    pub(super) urn: Arc<str>,
    pub(super) state: SessionState,
    pub(super) seq: u64,
    pub(super) subscribers: Vec<mpsc::Sender<Published>>,
    pub(super) answerer: Option<ActorRef<AnswererMsg>>,
    pub(super) driver: Option<ActorRef<DriverMsg>>,
    pub(super) generation: u64,
    pub(super) ready_generation: u64,
    pub(super) credits: Arc<Semaphore>,
    pub(super) tracker: RestartTracker,
    pub(super) resume_id: Option<String>,
    pub(super) turn: Option<Turn>,
    pub(super) reply: Option<Reply>,
    pub(super) turns_done: u32,
    pub(super) open: HashMap<String, OpenRequest>,
    /// The next driver exit was caused by us (cancel fallback): respawn, no restart count.
    pub(super) kill_expected: bool,
    pub(super) closing: bool,
    pub(super) usage: UsageTotals,
    pub(super) span: tracing::Span,
    pub(super) turn_span: Option<tracing::Span>,
}

impl Core {
    // ---- publishing -------------------------------------------------------------

    async fn publish(&mut self, body: EventBody) {
        let turn = self.turn.as_ref().map(|t| t.id);
        self.publish_in(turn, body).await;
    }

    /// Publish an event of turn `turn` (`turn_ended` is published once the turn is
    /// already taken off the session, yet belongs to it).
    async fn publish_in(&mut self, turn: Option<u32>, body: EventBody) {
        self.seq += 1;
        let event = Arc::new(SessionEvent {
            seq: self.seq,
            urn: self.urn.clone(),
            turn,
            ts_ms: now_ms(),
            body,
        });
        // Bounded: a slow subscriber slows the session (and so the agent) down.
        let mut gone = Vec::new();
        for (i, sub) in self.subscribers.iter().enumerate() {
            if sub.send(event.clone()).await.is_err() {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            self.subscribers.swap_remove(i);
        }
    }

    async fn set_state(&mut self, to: SessionState) {
        if self.state != to {
            let from = self.state;
            self.state = to;
            tracing::debug!(parent: &self.span, %from, %to, "session state");
            self.publish(EventBody::State { from, to }).await;
        }
    }

    pub(super) fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot {
            urn: self.urn.clone(),
            state: self.state,
            turns: self.turns_done,
            restarts: self.tracker.total_restarts(),
            usage: self.usage,
            resume_id: self.resume_id.clone(),
            open_requests: self.open.len(),
        }
    }

    pub(super) fn stop_reason(&self) -> String {
        format!("session {} {}", self.urn, self.state)
    }

    // ---- the driver -------------------------------------------------------------

    pub(super) async fn start_driver(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.state.is_terminal() || self.closing || self.driver.is_some() {
            return;
        }
        self.generation += 1;
        let generation = self.generation;
        let sink = OutputSink::new(generation, myself.clone(), self.credits.clone());
        let spawned = match self.spec.binding {
            Binding::StreamJson => {
                let args = DriverArgs {
                    launch: self.launch.clone(),
                    sink,
                    resume_id: self.resume_id.clone(),
                };
                ractor::Actor::spawn_linked(None, StreamJsonDriver, args, myself.get_cell()).await
            }
            Binding::AcpStdio => {
                let args = DriverArgs {
                    launch: self.launch.clone(),
                    sink,
                    resume_id: self.resume_id.clone(),
                };
                ractor::Actor::spawn_linked(None, AcpDriver, args, myself.get_cell()).await
            }
            Binding::Pty => {
                let args = DriverArgs {
                    launch: self.launch.clone(),
                    sink,
                    resume_id: None,
                };
                ractor::Actor::spawn_linked(None, PtyDriver, args, myself.get_cell()).await
            }
            other => {
                let reason = format!(
                    "{}: no {other} driver in this build ({})",
                    self.urn,
                    CapCode::BindingUnavailable.symbol()
                );
                self.fail(reason).await;
                return;
            }
        };
        match spawned {
            Ok((driver, _join)) => {
                self.driver = Some(driver);
                let _timer = myself.send_after(self.spec.init_timeout, move || {
                    SessionMsg::InitTimeout { generation }
                });
            }
            // A spawn failure (bad argv, missing binary) counts as a crash.
            Err(e) => {
                Box::pin(self.on_driver_exit(
                    myself,
                    ExitCause::DriverError {
                        message: e.to_string(),
                    },
                ))
                .await
            }
        }
    }

    pub(super) fn kill_driver(&mut self, cause: ExitCause) {
        if let Some(d) = &self.driver {
            let _gone = d.cast(DriverMsg::Kill { cause });
        }
    }

    pub(super) async fn on_driver_exit(&mut self, myself: &ActorRef<SessionMsg>, cause: ExitCause) {
        self.ready_generation = 0;
        if self.closing {
            self.finish_turn_with_error(SessionError::Closed).await;
            self.set_state(SessionState::Closed).await;
            return;
        }
        if std::mem::take(&mut self.kill_expected) {
            // We killed it to end a cancelled turn: that turn is over, a fresh agent follows.
            self.end_turn(TurnOutcome::Cancelled, StopReason::Cancelled)
                .await;
            self.set_state(SessionState::Starting).await;
            let _go = myself.cast(SessionMsg::StartDriver);
            return;
        }
        match self.tracker.on_exit(Instant::now(), &cause) {
            Restart::Restart { attempt, delay } => {
                let span = tracing::info_span!(
                    parent: &self.span, "restart",
                    cap.restart.cause = %cause, cap.restart.attempt = attempt,
                    cap.restart.backoff_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                );
                span.in_scope(|| {
                    tracing::warn!(urn = %self.urn, %cause, attempt, ?delay, "restarting the agent")
                });
                if let Some(t) = self.turn.as_mut() {
                    t.restarts += 1;
                    t.sent = false;
                }
                self.open.clear();
                self.publish(EventBody::Restart {
                    cause,
                    attempt,
                    delay_ms: delay.as_millis().try_into().unwrap_or(u64::MAX),
                })
                .await;
                self.set_state(SessionState::Starting).await;
                if delay.is_zero() {
                    let _go = myself.cast(SessionMsg::StartDriver);
                } else {
                    let _timer = myself.send_after(delay, || SessionMsg::StartDriver);
                }
            }
            Restart::Stop { reason } => {
                if cause.is_abnormal() {
                    self.fail(format!("agent {cause}; {reason}")).await;
                } else {
                    // The agent ended by itself and the policy does not bring it back.
                    self.finish_turn_with_error(SessionError::Closed).await;
                    self.set_state(SessionState::Closed).await;
                }
            }
        }
    }

    async fn fail(&mut self, reason: String) {
        tracing::error!(parent: &self.span, urn = %self.urn, %reason, "session failed");
        self.finish_turn_with_error(SessionError::Failed {
            reason: reason.clone(),
        })
        .await;
        self.publish(EventBody::Failed { reason }).await;
        self.set_state(SessionState::Failed).await;
    }

    // ---- turns --------------------------------------------------------------------

    pub(super) async fn ask(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        prompt: String,
        reply: Reply,
    ) {
        let refuse = match self.state {
            SessionState::Failed => Some(SessionError::Failed {
                reason: self.stop_reason(),
            }),
            SessionState::Closed => Some(SessionError::Closed),
            _ if self.closing => Some(SessionError::Closed),
            _ if self.turn.is_some() => Some(SessionError::Busy),
            _ => match self.spec.max_turns {
                Some(max) if self.turns_done >= max => Some(SessionError::MaxTurns { max }),
                _ => None,
            },
        };
        if let Some(err) = refuse {
            let _caller_gone = reply.send(Err(err));
            return;
        }
        let id = self.turns_done + 1;
        self.turn_span = Some(tracing::info_span!(
            parent: &self.span, "turn",
            cap.turn = id,
            gen_ai.operation.name = "invoke_agent",
            cap.prompt.bytes = prompt.len(),
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            cap.cost_usd = tracing::field::Empty,
        ));
        self.turn = Some(Turn::new(id, prompt));
        self.reply = Some(reply);
        if self.state.is_idle() {
            self.send_prompt(myself, None).await;
        }
        // Starting: the prompt goes out when the driver is ready (wait-for-ready).
    }

    /// Send the current turn's prompt to the driver. After a restart without native
    /// resume the partial output is handed back with it (§10.6).
    async fn send_prompt(&mut self, myself: &ActorRef<SessionMsg>, resumed: Option<bool>) {
        let (Some(driver), Some(turn)) = (self.driver.clone(), self.turn.as_mut()) else {
            return;
        };
        let text = match resumed {
            Some(false) if !turn.partial_text().is_empty() => format!(
                "{}\n\n[capfleet: the agent restarted during this turn. Its partial answer so far \
                 was:]\n{}\n[Continue from there.]",
                turn.prompt,
                turn.partial_text()
            ),
            _ => turn.prompt.clone(),
        };
        turn.attempts += 1;
        turn.sent = true;
        let (id, attempt, bytes) = (turn.id, turn.attempts, text.len());
        let _gone = driver.cast(DriverMsg::Prompt { text });
        let timeout = self.spec.turn_timeout;
        let _timer = myself.send_after(timeout, move || SessionMsg::TurnTimeout {
            turn: id,
            attempt,
        });
        self.publish(EventBody::TurnStarted {
            prompt_bytes: bytes,
            attempt,
        })
        .await;
        self.set_state(SessionState::Working).await;
    }

    async fn end_turn(&mut self, outcome: TurnOutcome, stop_reason: StopReason) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        self.turns_done += 1;
        self.usage.merge(turn.usage());
        let result = turn.finish(outcome, stop_reason);
        if let Some(span) = self.turn_span.take() {
            span.record("gen_ai.response.finish_reasons", stop_reason.as_str());
            span.record("gen_ai.usage.input_tokens", result.usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", result.usage.output_tokens);
            span.record("cap.cost_usd", result.usage.cost_usd);
        }
        self.publish_in(
            Some(result.turn),
            EventBody::TurnEnded {
                stop_reason,
                outcome,
                duration_ms: result.duration.as_millis().try_into().unwrap_or(u64::MAX),
            },
        )
        .await;
        self.open.clear();
        if let Some(reply) = self.reply.take() {
            let _caller_gone = reply.send(Ok(result));
        }
        if !self.state.is_terminal() && self.state != SessionState::Starting {
            self.set_state(SessionState::Done).await;
        }
    }

    /// End the running turn because the session cannot finish it (closed, failed):
    /// subscribers still see `turn_ended` (failed), the caller gets the error.
    async fn finish_turn_with_error(&mut self, err: SessionError) {
        let Some(turn) = self.turn.as_ref() else {
            return;
        };
        let duration_ms = turn
            .started
            .elapsed()
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX);
        self.publish(EventBody::TurnEnded {
            stop_reason: StopReason::Error,
            outcome: TurnOutcome::Failed,
            duration_ms,
        })
        .await;
        self.turn = None;
        self.turn_span = None;
        if let Some(reply) = self.reply.take() {
            let _caller_gone = reply.send(Err(err));
        }
    }

    pub(super) fn fail_pending_reply(&mut self) {
        if let Some(reply) = self.reply.take() {
            let _caller_gone = reply.send(Err(SessionError::Closed));
        }
    }

    pub(super) async fn cancel_turn(&mut self, myself: &ActorRef<SessionMsg>, reason: &str) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        if turn.cancel_requested {
            return;
        }
        turn.cancel_requested = true;
        tracing::info!(urn = %self.urn, turn = turn.id, reason, "cancelling the turn");
        let id = turn.id;
        if let Some(d) = &self.driver {
            let _gone = d.cast(DriverMsg::Interrupt);
        }
        let _timer = myself.send_after(self.spec.cancel_grace, move || {
            SessionMsg::CancelDeadline { turn: id }
        });
        self.publish(EventBody::CancelRequested {
            reason: reason.to_owned(),
        })
        .await;
    }

    pub(super) async fn close(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.closing || self.state.is_terminal() {
            return;
        }
        self.closing = true;
        match &self.driver {
            Some(d) => {
                let _gone = d.cast(DriverMsg::Shutdown);
            }
            None => {
                self.finish_turn_with_error(SessionError::Closed).await;
                self.set_state(SessionState::Closed).await;
                myself.stop(Some(self.stop_reason()));
            }
        }
    }

    // ---- driver outputs -----------------------------------------------------------

    pub(super) async fn on_output(&mut self, myself: &ActorRef<SessionMsg>, out: DriverOutput) {
        match out {
            DriverOutput::Ready { resume_id, resumed } => {
                self.ready_generation = self.generation;
                if resume_id.is_some() {
                    self.resume_id = resume_id;
                }
                self.publish(EventBody::Cap {
                    event: CapEvent::ready(self.resume_id.as_deref()),
                })
                .await;
                let pending = self.turn.as_ref().is_some_and(|t| !t.sent);
                if pending {
                    self.send_prompt(myself, Some(resumed)).await;
                } else if self.turns_done == 0 {
                    self.set_state(SessionState::Ready).await;
                } else {
                    self.set_state(SessionState::Done).await;
                }
            }
            DriverOutput::ResumeId(id) => self.resume_id = Some(id),
            DriverOutput::Event(event) => self.on_event(myself, event).await,
            DriverOutput::TurnEnd(end) => {
                let cancelled = self.turn.as_ref().is_some_and(|t| t.cancel_requested)
                    || end.stop_reason == StopReason::Cancelled;
                let outcome = match (cancelled, end.is_error) {
                    (true, _) => TurnOutcome::Cancelled,
                    (false, true) => TurnOutcome::Failed,
                    (false, false) => TurnOutcome::Completed,
                };
                self.end_turn(outcome, end.stop_reason).await;
            }
            DriverOutput::Withdrawn { req_id } => {
                self.open.remove(&req_id);
                self.after_answer().await;
            }
        }
    }

    async fn on_event(&mut self, myself: &ActorRef<SessionMsg>, mut event: CapEvent) {
        if let (CapEvent::Usage(u), Some(pricing)) = (&mut event, &self.spec.pricing) {
            pricing.estimate(u);
        }
        if let Some(turn) = self.turn.as_mut() {
            turn.record(&event);
        } else if let CapEvent::Usage(u) = &event {
            self.usage.add(u);
        }
        let request = match &event {
            CapEvent::PermissionRequest(p) => Some(OpenRequest::Permission {
                req_id: p.req_id.clone(),
                tool: p.tool.clone(),
                intent: p.intent.get().cloned(),
                scope: p.scope,
                risk: p.risk_level,
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
            self.open.insert(request.id().to_owned(), request.clone());
            self.set_state(SessionState::InputRequired).await;
            match &self.answerer {
                Some(a) => {
                    let _gone = a.cast(AnswererMsg::Decide {
                        urn: self.urn.clone(),
                        session: myself.clone(),
                        request,
                    });
                }
                None => {
                    let _self_gone = myself.cast(crate::answerer::fail_safe(&request));
                }
            }
        }
    }

    // ---- answers ------------------------------------------------------------------

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

    async fn after_answer(&mut self) {
        if self.open.is_empty() && self.state == SessionState::InputRequired {
            self.set_state(SessionState::Working).await;
        }
    }
}
