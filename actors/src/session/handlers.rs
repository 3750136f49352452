//! The session's state and what each message does to it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ractor::{ActorRef, RpcReplyPort};
use tokio::sync::{Semaphore, mpsc};

use super::events::{EventBody, SessionEvent, TurnOutcome, now_ms};
use super::spans::Spans;
use super::turn::{Turn, TurnResult, UsageTotals};
use super::{Published, SessionError, SessionMsg, SessionSnapshot, SessionSpec, SessionState};
use crate::answerer::{AnswererMsg, OpenRequest};
use crate::driver::{DriverArgs, DriverMsg, DriverOutput, ExitCause, LaunchSpec, OutputSink};
use crate::protocol::{CapEvent, StopReason};
use crate::supervision::{Decision as Restart, RestartTracker};
use crate::telemetry::context::{TRACEPARENT, traceparent};

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
    pub(super) spans: Spans,
}

impl Core {
    // ---- publishing -------------------------------------------------------------

    pub(super) async fn publish(&mut self, body: EventBody) {
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

    pub(super) async fn set_state(&mut self, to: SessionState) {
        if self.state != to {
            let from = self.state;
            self.state = to;
            tracing::debug!(parent: &self.spans.session, %from, %to, "session state");
            if to.is_terminal() {
                self.spans.finished(to.as_str());
            }
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
        // The agent's own spans (if it makes any) join the session's trace.
        if let Some(tp) = traceparent(self.spans.for_agent()) {
            let env = &mut Arc::make_mut(&mut self.launch).env;
            env.retain(|(k, _)| k != TRACEPARENT);
            env.push((TRACEPARENT.to_owned(), tp));
        }
        let sink = OutputSink::new(generation, myself.clone(), self.credits.clone());
        let args = DriverArgs {
            launch: self.launch.clone(),
            sink,
            resume_id: self.resume_id.clone(),
        };
        match crate::driver::spawn(self.spec.binding, args, myself.get_cell()).await {
            Ok(driver) => {
                self.driver = Some(driver);
                let _timer = myself.send_after(self.spec.init_timeout, move || {
                    SessionMsg::InitTimeout { generation }
                });
            }
            // No driver for this binding (or shape) in this build: nothing to restart.
            Err(e) if e.code().is_some() => self.fail(e.to_string()).await,
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
                let backoff_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                self.spans.restart(&cause, attempt, backoff_ms);
                self.spans.for_agent().in_scope(|| {
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
        tracing::error!(parent: &self.spans.session, urn = %self.urn, %reason, "session failed");
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
        self.spans.start_turn(id, prompt.len());
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
        // Sent inside the turn's span: the driver handles the prompt in it.
        let _gone = self
            .spans
            .current()
            .in_scope(|| driver.cast(DriverMsg::Prompt { text }));
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
        self.spans.end_turn(&result);
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
        self.spans.abandon_turn(TurnOutcome::Failed);
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
                self.spans.ready();
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
                self.spans
                    .permission_answered(&req_id, "withdrawn", "agent");
                self.after_answer().await;
            }
        }
    }

    async fn on_event(&mut self, myself: &ActorRef<SessionMsg>, mut event: CapEvent) {
        match (&mut event, &self.spec.pricing, &self.spec.artifacts) {
            (CapEvent::Usage(u), Some(pricing), _) => {
                pricing.estimate(u);
            }
            (CapEvent::Artifact(a), _, Some(store)) => {
                if let Err(e) = store.keep(&self.spec.name, a) {
                    tracing::error!(urn = %self.urn, "cannot store the agent's artifact: {e}");
                }
            }
            _ => {}
        }
        self.spans.on_event(&event);
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
                        span: self.spans.request(request.id()),
                        request,
                    });
                }
                None => {
                    let _self_gone = myself.cast(crate::answerer::fail_safe(&request));
                }
            }
        }
    }
}
