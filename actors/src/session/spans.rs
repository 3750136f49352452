//! A session's spans: `session` for its life, `turn` per turn (GenAI `invoke_agent`),
//! and inside a turn `tool_call` (`execute_tool`), `permission` and `ask` (the
//! answerer's `decide` goes under them), `restart` (cause, attempt, backoff; open until
//! the new agent is ready); audited reverse-RPC actions are events on the turn. Attributes follow the OpenTelemetry GenAI conventions
//! (`gen_ai.*`) where they apply and CAP's own (`cap.*`) elsewhere.
//!
//! Every span has an explicit parent, so what the session does in a turn stays in the
//! turn's tree whichever actor's message brought it here. A turn started by the router
//! also links to the `route` span that delivered its prompt (ractor carries the
//! sender's span with the message). With no span subscriber these are disabled spans:
//! creating them costs a callsite check.

use std::collections::HashMap;

use tracing::Span;
use tracing::field::Empty;

use super::SessionSpec;
use super::turn::TurnResult;
use crate::events::TurnOutcome;
use crate::events::trace::int;
use crate::protocol::{CapEvent, StopReason};
use crate::rpc::Audited;
use crate::supervision::ExitCause;

/// Tool calls and requests tracked with a span at once, at most (an agent that opens
/// calls without closing them does not grow the session).
pub(super) const MAX_OPEN_SPANS: usize = 256;

pub(super) struct Spans {
    pub session: Span,
    turn: Option<Span>,
    tools: HashMap<String, Span>,
    requests: HashMap<String, Span>,
    restart: Option<Span>,
    agent: String,
}

fn outcome_str(o: TurnOutcome) -> &'static str {
    match o {
        TurnOutcome::Completed => "completed",
        TurnOutcome::Cancelled => "cancelled",
        TurnOutcome::Failed => "failed",
    }
}

impl Spans {
    pub(super) fn new(spec: &SessionSpec, parent: &Span) -> Self {
        let agent = spec.launch.manifest.agent.name.clone();
        let model = spec.launch.config.model.get().map(String::as_str);
        let session = tracing::info_span!(
            parent: parent, "session",
            cap.session.urn = spec.urn(),
            cap.session.name = %spec.name,
            cap.binding = spec.binding.as_str(),
            gen_ai.agent.name = %agent,
            gen_ai.request.model = model,
            cap.session.state = Empty,
        );
        Spans {
            session,
            turn: None,
            tools: HashMap::new(),
            requests: HashMap::new(),
            restart: None,
            agent,
        }
    }

    /// The innermost span work belongs to now: the turn's, else the session's.
    pub(super) fn current(&self) -> &Span {
        self.turn.as_ref().unwrap_or(&self.session)
    }

    /// Open turn `id`. The span current while the ask is handled is the sender's
    /// (the router's `route`): the turn links to it.
    pub(super) fn start_turn(&mut self, id: u32, prompt_bytes: usize) {
        if self.session.is_disabled() {
            return;
        }
        let turn = tracing::info_span!(
            parent: &self.session, "turn",
            cap.turn = int(id),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %self.agent,
            gen_ai.response.model = Empty,
            cap.prompt.bytes = int(prompt_bytes),
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            cap.cost_usd = Empty,
            cap.turn.outcome = Empty,
            cap.turn.duration_ms = Empty,
            cap.turn.restarts = Empty,
            otel.status_code = Empty,
        );
        let cause = Span::current();
        if !cause.is_disabled() {
            turn.follows_from(&cause);
        }
        self.turn = Some(turn);
    }

    /// Spans for what the agent starts (tool calls, requests) and ends.
    pub(super) fn on_event(&mut self, event: &CapEvent) {
        let Some(turn) = &self.turn else {
            return;
        };
        match event {
            CapEvent::ToolCallStart(t) if self.tools.len() < MAX_OPEN_SPANS => {
                let span = tracing::info_span!(
                    parent: turn, "tool_call",
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %t.name,
                    gen_ai.tool.call.id = %t.call_id,
                    cap.tool.is_error = Empty,
                    otel.status_code = Empty,
                );
                self.tools.insert(t.call_id.clone(), span);
            }
            CapEvent::ToolCallEnd(t) => {
                if let Some(span) = self.tools.remove(&t.call_id) {
                    let failed = t.is_error.get().copied().unwrap_or(false);
                    span.record("cap.tool.is_error", failed);
                    if failed {
                        span.record("otel.status_code", "error");
                    }
                }
            }
            CapEvent::PermissionRequest(p) if self.requests.len() < MAX_OPEN_SPANS => {
                let span = tracing::info_span!(
                    parent: turn, "permission",
                    cap.permission.req_id = %p.req_id,
                    gen_ai.tool.name = %p.tool,
                    cap.permission.risk = p.risk_level.as_str(),
                    cap.permission.decision = Empty,
                    cap.permission.rule = Empty,
                );
                self.requests.insert(p.req_id.clone(), span);
            }
            CapEvent::AskUser(a) if self.requests.len() < MAX_OPEN_SPANS => {
                let span = tracing::info_span!(
                    parent: turn, "ask",
                    cap.ask.id = %a.ask_id,
                    cap.ask.answered = Empty,
                    cap.ask.rule = Empty,
                );
                self.requests.insert(a.ask_id.clone(), span);
            }
            CapEvent::Usage(u) => {
                if let Some(model) = u.model_id.get() {
                    turn.record("gen_ai.response.model", model.as_str());
                }
            }
            _ => {}
        }
    }

    /// The span of open request `id` (the answerer decides under it).
    pub(super) fn request(&self, id: &str) -> Span {
        self.requests.get(id).cloned().unwrap_or_else(Span::none)
    }

    /// A permission request was answered (`rule` decided); its span ends.
    pub(super) fn permission_answered(&mut self, req_id: &str, decision: &str, rule: &str) {
        if let Some(span) = self.requests.remove(req_id) {
            span.record("cap.permission.decision", decision);
            span.record("cap.permission.rule", rule);
        }
    }

    /// An ask was answered (or declined); its span ends.
    /// An audited reverse-RPC action: an event on the turn (or session) span.
    pub(super) fn audit(&self, record: &Audited) {
        tracing::info!(
            parent: self.current(),
            cap.audit.action = ?record.action,
            cap.audit.outcome = ?record.outcome,
            cap.audit.rule = %record.rule,
            "audit"
        );
    }

    pub(super) fn ask_answered(&mut self, ask_id: &str, answered: bool, rule: &str) {
        if let Some(span) = self.requests.remove(ask_id) {
            span.record("cap.ask.answered", answered);
            span.record("cap.ask.rule", rule);
        }
    }

    /// The turn ended with `result`; its span and everything still open in it end.
    pub(super) fn end_turn(&mut self, result: &TurnResult) {
        self.tools.clear();
        self.requests.clear();
        let Some(span) = self.turn.take() else {
            return;
        };
        span.record(
            "gen_ai.response.finish_reasons",
            result.stop_reason.as_str(),
        );
        span.record("gen_ai.usage.input_tokens", int(result.usage.input_tokens));
        span.record(
            "gen_ai.usage.output_tokens",
            int(result.usage.output_tokens),
        );
        span.record("cap.cost_usd", result.usage.cost_usd);
        span.record("cap.turn.restarts", int(result.restarts));
        span.record("cap.turn.duration_ms", int(result.duration.as_millis()));
        self.close_turn(span, result.outcome);
    }

    /// The turn could not finish (the session closed or failed).
    pub(super) fn abandon_turn(&mut self, outcome: TurnOutcome) {
        self.tools.clear();
        self.requests.clear();
        if let Some(span) = self.turn.take() {
            span.record("gen_ai.response.finish_reasons", StopReason::Error.as_str());
            self.close_turn(span, outcome);
        }
    }

    fn close_turn(&self, span: Span, outcome: TurnOutcome) {
        span.record("cap.turn.outcome", outcome_str(outcome));
        if outcome == TurnOutcome::Failed {
            span.record("otel.status_code", "error");
        }
    }

    /// The agent ended and is restarted: the `restart` span stays open until the new
    /// agent is ready.
    pub(super) fn restart(&mut self, cause: &ExitCause, attempt: u32, backoff_ms: u64) {
        self.tools.clear();
        self.requests.clear();
        let span = tracing::info_span!(
            parent: self.current(), "restart",
            cap.restart.cause = cause.kind(),
            cap.restart.reason = %cause,
            cap.restart.attempt = int(attempt),
            cap.restart.backoff_ms = int(backoff_ms),
        );
        self.restart = Some(span);
    }

    /// The (re)started agent is ready: a restart is over.
    pub(super) fn ready(&mut self) {
        self.restart = None;
    }

    /// The session reached a final state.
    pub(super) fn finished(&mut self, state: &str) {
        self.restart = None;
        self.session.record("cap.session.state", state);
    }

    /// The span an agent started now belongs to: the restart's, else the session's.
    pub(super) fn for_agent(&self) -> &Span {
        self.restart.as_ref().unwrap_or(&self.session)
    }
}
