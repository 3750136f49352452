//! The turn book: the current turn and the caller waiting for its result, the open
//! permission requests and asks, the usage of the turns done (and of what was reported
//! between turns), how many turns are done — and what the session does to ask, end
//! and cancel a turn.

use std::collections::HashMap;

use ractor::{ActorRef, RpcReplyPort};

use super::chaos::Moment;
use super::machine::Core;
use super::tools_run::ToolsRun;
use super::turn::{Turn, TurnResult};
use super::{Own, SessionError, SessionMsg};
use crate::protocol::{CapEvent, StopReason};
use capfleet_wire::driver::DriverMsg;
use capfleet_wire::events::OpenRequest;
use capfleet_wire::events::{EventBody, Prompt, SessionState, TurnOutcome, UsageTotals};
use capfleet_wire::supervision::ExitCause;
use capfleet_wire::supervision::{AttemptFailure, Verdict, poison_event};

type Reply = RpcReplyPort<Result<TurnResult, SessionError>>;

/// The session's turns.
#[derive(Default)]
pub(super) struct TurnBook {
    turn: Option<Turn>,
    reply: Option<Reply>,
    open: HashMap<String, OpenRequest>,
    usage: UsageTotals,
    done: u32,
    /// The last turn's number (the next is numbered after it).
    numbered: u32,
    /// A resumed run's interrupted turn: its partial text and the tool calls it had
    /// started, handed to the next turn.
    carried: Option<(String, ToolsRun)>,
}

impl TurnBook {
    /// A resumed session's book: turns numbered up to `numbered` before, `done` of
    /// them ended (a cut one is no turn done: `max_turns` does not count it), maybe
    /// one cut with `carried` text and `tools` started.
    pub(super) fn resumed(
        numbered: u32,
        done: u32,
        carried: Option<String>,
        tools: ToolsRun,
    ) -> TurnBook {
        TurnBook {
            done,
            numbered,
            carried: carried
                .map(|t| (t, tools))
                .filter(|(t, tools)| !t.is_empty() || !tools.is_empty()),
            ..TurnBook::default()
        }
    }

    pub(super) fn current(&self) -> Option<&Turn> {
        self.turn.as_ref()
    }

    /// The running turn's id.
    pub(super) fn turn_id(&self) -> Option<u32> {
        self.turn.as_ref().map(|t| t.id)
    }

    /// Turns ended (completed, cancelled or failed by the agent).
    pub(super) fn done(&self) -> u32 {
        self.done
    }

    /// The running turn's prompt and its output so far, at most `max` bytes (the
    /// tails of both): what a researcher is told.
    pub(super) fn context(&self, max: usize) -> String {
        let Some(t) = &self.turn else {
            return String::new();
        };
        let prompt = tail(&t.prompt, max / 4);
        let rest = max.saturating_sub(prompt.len());
        let text = tail(t.partial_text(), rest);
        format!("[prompt]\n{prompt}\n[output so far]\n{text}")
    }

    /// Usage of the turns done and of what was reported between turns.
    pub(super) fn usage(&self) -> UsageTotals {
        self.usage
    }

    /// A turn waits for its prompt to go to a driver.
    pub(super) fn prompt_pending(&self) -> bool {
        self.turn.as_ref().is_some_and(|t| !t.sent)
    }

    /// The running turn was asked to stop.
    pub(super) fn cancel_requested(&self) -> bool {
        self.turn.as_ref().is_some_and(|t| t.cancel_requested)
    }

    /// Record an agent event in the running turn (usage between turns counts for the
    /// session).
    pub(super) fn record(&mut self, event: &CapEvent) {
        if let Some(turn) = self.turn.as_mut() {
            turn.record(event);
        } else if let CapEvent::Usage(u) = event {
            self.usage.add(u);
        }
    }

    /// The running attempt sent a `cap.error` with `code`.
    pub(super) fn note_error(&mut self, code: &str) {
        if let Some(t) = self.turn.as_mut().filter(|t| t.sent) {
            t.attempt_error = Some(code.to_owned());
        }
    }

    /// The running attempt was cut by the orchestrator (a chaos fault).
    pub(super) fn attempt_cut(&mut self) {
        if let Some(t) = self.turn.as_mut() {
            t.attempt_cut = true;
        }
    }

    /// The running attempt's agent ended with `cause`: whether the turn is a poison
    /// turn now ([`capfleet_wire::supervision::poison`]), with the report to give.
    pub(super) fn attempt_failed(&mut self, cause: &ExitCause) -> Option<CapEvent> {
        let t = self.turn.as_mut().filter(|t| t.sent)?;
        if std::mem::take(&mut t.attempt_cut) {
            t.failures.not_its_own();
            return None;
        }
        let failure = AttemptFailure {
            code: t.attempt_error.take(),
            cause: cause.clone(),
        };
        match t.failures.failed(failure.clone()) {
            Verdict::Retry => None,
            Verdict::Poison { times } => Some(poison_event(t.id, times, &failure)),
        }
    }

    /// The agent restarts during the running turn: its prompt goes out again, and
    /// nothing the old agent asked stays open.
    pub(super) fn restarting(&mut self) {
        if let Some(t) = self.turn.as_mut() {
            t.restarts += 1;
            t.sent = false;
        }
        self.open.clear();
    }

    /// A rate limit paused the running turn: its prompt goes out again at the resume
    /// (no restart), and nothing the agent asked stays open.
    pub(super) fn pausing(&mut self) {
        if let Some(t) = self.turn.as_mut() {
            t.sent = false;
        }
        self.open.clear();
    }

    /// `request` waits for an answer.
    pub(super) fn open(&mut self, request: OpenRequest) {
        self.open.insert(request.id().to_owned(), request);
    }

    /// Close `req_id` if it is an open permission request.
    pub(super) fn answer_permission(&mut self, req_id: &str) -> bool {
        self.close_if(req_id, |r| matches!(r, OpenRequest::Permission { .. }))
    }

    /// Close `ask_id` if it is an open ask.
    pub(super) fn answer_ask(&mut self, ask_id: &str) -> bool {
        self.close_if(ask_id, |r| matches!(r, OpenRequest::Ask { .. }))
    }

    fn close_if(&mut self, id: &str, is: impl Fn(&OpenRequest) -> bool) -> bool {
        let open = self.open.get(id).is_some_and(is);
        if open {
            self.open.remove(id);
        }
        open
    }

    /// The agent withdrew request `id`.
    pub(super) fn withdraw(&mut self, id: &str) {
        self.open.remove(id);
    }

    /// Requests waiting for an answer.
    pub(super) fn open_requests(&self) -> usize {
        self.open.len()
    }

    /// Answer the caller waiting for the turn, if any.
    pub(super) fn reply(&mut self, result: Result<TurnResult, SessionError>) {
        if let Some(reply) = self.reply.take() {
            let _caller_gone = reply.send(result);
        }
    }
}

impl Core {
    pub(super) async fn ask(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        prompt: String,
        traceparent: Option<String>,
        reply: Reply,
    ) {
        let refuse = match self.state {
            SessionState::Failed => Some(SessionError::Failed {
                reason: self.stop_reason(),
            }),
            SessionState::Closed => Some(SessionError::Closed),
            _ if self.closing => Some(SessionError::Closed),
            _ if self.book.turn.is_some() => Some(SessionError::Busy),
            _ => match self.spec.max_turns {
                Some(max) if self.book.done >= max => Some(SessionError::MaxTurns { max }),
                _ => None,
            },
        };
        if let Some(err) = refuse {
            let _caller_gone = reply.send(Err(err));
            return;
        }
        self.book.numbered += 1;
        let id = self.book.numbered;
        self.spans.start_turn(
            id,
            prompt.len(),
            self.slot.resume_id.as_deref(),
            traceparent.as_deref(),
        );
        let mut turn = Turn::new(id, prompt);
        // The turn a resumed run re-issues: its partial text goes with it (§10.6)
        // unless the agent resumed its session natively.
        let carried = self
            .book
            .carried
            .take()
            .map(|(text, tools)| {
                turn.carry_tools(tools);
                turn.carry(&text);
            })
            .is_some();
        self.book.turn = Some(turn);
        self.book.reply = Some(reply);
        if self.state.is_idle() {
            let resumed = carried.then_some(self.slot.resumed_natively);
            self.send_prompt(myself, resumed).await;
        }
        // Starting: the prompt goes out when the driver is ready (wait-for-ready).
    }

    /// Send the current turn's prompt to the driver. After a restart without native
    /// resume, or a rate-limit pause, the partial output is handed back with it (§10.6),
    /// with the tool calls the cut attempts started ([`ToolsRun`]: their edits may be
    /// in the worktree already), and the result's text goes on from it; otherwise a
    /// re-sent turn's text starts again from the agent's new answer
    /// ([`capfleet_wire::events::TextFrom`], journaled).
    pub(super) async fn send_prompt(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        resumed: Option<bool>,
    ) {
        let (Some(driver), Some(turn)) = (self.slot.driver.clone(), self.book.turn.as_mut()) else {
            return;
        };
        let in_prompt =
            resumed == Some(false) && !(turn.partial_text().is_empty() && turn.tools().is_empty());
        let text_from = turn.text_from(in_prompt);
        let text = if in_prompt {
            let tools = if turn.tools().is_empty() {
                String::new()
            } else {
                format!(
                    " Tools it had already started (their changes may be in the workspace \
                     already): {}.",
                    turn.tools().describe()
                )
            };
            format!(
                "{}\n\n[capfleet: this turn was interrupted (the agent restarted or hit a rate \
                 limit).{tools} Its partial answer so far was:]\n{}\n[Continue from there.]",
                turn.prompt,
                turn.partial_text()
            )
        } else {
            turn.prompt.clone()
        };
        turn.attempts += 1;
        turn.sent = true;
        turn.attempt_error = None;
        turn.attempt_cut = false;
        let (id, attempt, bytes) = (turn.id, turn.attempts, text.len());
        self.chaos_on_attempt(id, attempt, Moment::BeforePrompt)
            .await;
        let prompt = Prompt::Text(text.as_str().into());
        // Sent inside the turn's span: the driver handles the prompt in it.
        let _gone = self
            .spans
            .current()
            .in_scope(|| driver.cast(DriverMsg::Prompt { text }));
        let timeout = self.spec.turn_timeout;
        let _timer = myself.send_after(timeout, move || {
            Own::TurnTimeout { turn: id, attempt }.into()
        });
        self.publish(EventBody::TurnStarted {
            prompt_bytes: bytes,
            attempt,
            prompt,
            text_from,
        })
        .await;
        self.set_state(SessionState::Working).await;
        self.chaos_on_attempt(id, attempt, Moment::TurnInFlight)
            .await;
    }

    pub(super) async fn end_turn(&mut self, outcome: TurnOutcome, stop_reason: StopReason) {
        let Some(turn) = self.book.turn.take() else {
            return;
        };
        self.disarm_dropped();
        self.book.done += 1;
        self.book.usage.merge(turn.usage());
        self.pauses.turn_ended(outcome);
        let result = turn.finish(outcome, stop_reason);
        self.spans.end_turn(&result);
        // Published once the turn is taken off the session, yet it belongs to it.
        let turn = Some(result.turn);
        self.bus
            .publish(
                turn,
                EventBody::TurnEnded {
                    stop_reason,
                    outcome,
                    duration_ms: result.duration.as_millis().try_into().unwrap_or(u64::MAX),
                },
            )
            .await;
        self.book.open.clear();
        self.book.reply(Ok(result));
        if !self.state.is_terminal() && self.state != SessionState::Starting {
            self.set_state(SessionState::Done).await;
        }
    }

    /// The running turn is a poison turn (`event` reports it): it ends failed instead
    /// of being re-issued; what the run does next is the fleet's `on_error`.
    pub(super) async fn poison_turn(&mut self, event: CapEvent) {
        tracing::warn!(urn = %self.bus.urn(), turn = ?self.book.turn_id(), "poison turn: not tried again");
        self.spans.on_event(&event);
        self.book.record(&event);
        self.publish(EventBody::Cap { event }).await;
        self.end_turn(TurnOutcome::Failed, StopReason::Error).await;
    }

    /// End the running turn because the session cannot finish it (closed, failed):
    /// subscribers still see `turn_ended` (failed), the caller gets the error.
    pub(super) async fn finish_turn_with_error(&mut self, err: SessionError) {
        let Some(turn) = self.book.turn.as_ref() else {
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
        self.book.turn = None;
        self.disarm_dropped();
        self.spans
            .abandon_turn(TurnOutcome::Failed, &err.to_string());
        self.book.reply(Err(err));
    }

    pub(super) async fn cancel_turn(&mut self, myself: &ActorRef<SessionMsg>, reason: &str) {
        let Some(turn) = self.book.turn.as_mut() else {
            return;
        };
        if turn.cancel_requested {
            return;
        }
        if self.state == SessionState::Paused {
            self.cancel_paused(myself).await;
            return;
        }
        turn.cancel_requested = true;
        let id = turn.id;
        tracing::info!(urn = %self.bus.urn(), turn = id, reason, "cancelling the turn");
        self.slot.send(DriverMsg::Interrupt);
        let _timer = myself.send_after(self.spec.cancel_grace, move || {
            Own::CancelDeadline { turn: id }.into()
        });
        self.publish(EventBody::CancelRequested {
            reason: reason.to_owned(),
        })
        .await;
    }
}

/// The last `max` bytes of `text` (on a character boundary).
pub(crate) fn tail(text: &str, max: usize) -> &str {
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    &text[cut..]
}
