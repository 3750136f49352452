//! A session's spans, named and attributed per the OpenTelemetry GenAI conventions
//! (`gen_ai.*`, see `observability/README.md` for the version) where they apply and
//! CAP's own (`cap.*`) elsewhere: the session's (named after it) for its life, an
//! `invoke_agent <session>` span per turn, and inside a turn `execute_tool <tool>`,
//! `permission <tool>` and `ask` (the answerer's `decide` goes under them), `restart`
//! (cause, attempt, backoff; from the agent's end until the new agent is ready);
//! audited reverse-RPC actions are events on the turn.
//!
//! Each span ends when its work does ([`trace::end`]), not when a handle happens to be
//! dropped: a turn from its start to its end, permission waits and restarts included;
//! whatever is still open in a turn ends before it; the session's span at its final
//! state. A failed turn or session is ERROR with `error.type` and a message.
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
use crate::protocol::{CapEvent, StopReason};
use capfleet_wire::events::TurnOutcome;
use capfleet_wire::events::trace::{self, int};
use capfleet_wire::rpc::Audited;
use capfleet_wire::supervision::ExitCause;

/// Tool calls and requests tracked with a span at once, at most (an agent that opens
/// calls without closing them does not grow the session).
pub(super) const MAX_OPEN_SPANS: usize = 256;

/// `error.type` of a turn that failed, and of a session that failed.
const TURN_FAILED: &str = "turn_failed";
const SESSION_FAILED: &str = "session_failed";

/// What names the session in its spans, fixed at its start.
struct Who {
    /// The session's name: `gen_ai.agent.name`.
    name: String,
    /// `invoke_agent <name>`, the turns' span name.
    invoke: String,
    /// The session's URN: `gen_ai.agent.id`.
    urn: String,
    /// The agent type (the manifest's name): `cap.agent.type`.
    agent: String,
    /// `gen_ai.provider.name`: the manifest's `x-provider`, else the binding.
    provider: String,
    model: Option<String>,
}

pub(super) struct Spans {
    pub session: Span,
    turn: Option<Span>,
    tools: HashMap<String, Span>,
    requests: HashMap<String, Span>,
    restart: Option<Span>,
    who: Who,
}

fn outcome_str(o: TurnOutcome) -> &'static str {
    match o {
        TurnOutcome::Completed => "completed",
        TurnOutcome::Cancelled => "cancelled",
        TurnOutcome::Failed => "failed",
    }
}

/// The session's sandbox on its span (`cap.sandbox.*`; the paths joined by `:`, what
/// the backend does not enforce by `; `): resolved as each of its spawns resolves it.
fn record_sandbox(session: &Span, spec: &SessionSpec) {
    if session.is_disabled() {
        return;
    }
    let Ok(Some(sb)) = spec.launch.resolved_sandbox() else {
        return;
    };
    let join = |paths: &[std::path::PathBuf]| {
        let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        list.join(":")
    };
    session.record("cap.sandbox.backend", sb.backend.to_string().as_str());
    session.record("cap.sandbox.network", sb.network.as_str());
    session.record("cap.sandbox.writable", join(&sb.writable).as_str());
    session.record("cap.sandbox.readable", join(&sb.readable).as_str());
    session.record("cap.sandbox.unenforced", sb.unenforced.join("; ").as_str());
}

impl Spans {
    pub(super) fn new(spec: &SessionSpec, parent: &Span) -> Self {
        let agent = &spec.launch.manifest.agent;
        let who = Who {
            name: spec.name.clone(),
            invoke: format!("invoke_agent {}", spec.name),
            urn: spec.urn().to_owned(),
            agent: agent.name.clone(),
            provider: agent
                .provider
                .clone()
                .unwrap_or_else(|| spec.binding.as_str().to_owned()),
            model: spec.launch.config.model.get().cloned(),
        };
        let session = tracing::info_span!(
            parent: parent, "session",
            otel.name = %who.name,
            cap.session.urn = %who.urn,
            cap.session.name = %who.name,
            cap.binding = spec.binding.as_str(),
            cap.agent.type = %who.agent,
            gen_ai.agent.name = %who.name,
            gen_ai.agent.id = %who.urn,
            gen_ai.provider.name = %who.provider,
            gen_ai.request.model = who.model.as_deref(),
            gen_ai.conversation.id = %who.urn,
            cap.session.state = Empty,
            cap.sandbox.backend = Empty,
            cap.sandbox.network = Empty,
            cap.sandbox.writable = Empty,
            cap.sandbox.readable = Empty,
            cap.sandbox.unenforced = Empty,
        );
        record_sandbox(&session, spec);
        Spans {
            session,
            turn: None,
            tools: HashMap::new(),
            requests: HashMap::new(),
            restart: None,
            who,
        }
    }

    /// The innermost span work belongs to now: the turn's, else the session's.
    pub(super) fn current(&self) -> &Span {
        self.turn.as_ref().unwrap_or(&self.session)
    }

    /// Open turn `id`, in the conversation `resume_id` names when the agent gave one
    /// (else the session's URN). The span current while the ask is handled is the
    /// sender's (the router's `route`): the turn links to it. Its parent is the
    /// session's span, or the remote span `traceparent` names (`capfleet speak`
    /// asked by a turn of another capfleet).
    pub(super) fn start_turn(
        &mut self,
        id: u32,
        prompt_bytes: usize,
        resume_id: Option<&str>,
        traceparent: Option<&str>,
    ) {
        if self.session.is_disabled() {
            return;
        }
        let who = &self.who;
        let turn = tracing::info_span!(
            parent: &self.session, "turn",
            otel.name = %who.invoke,
            cap.turn = int(id),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %who.name,
            gen_ai.agent.id = %who.urn,
            cap.agent.type = %who.agent,
            gen_ai.provider.name = %who.provider,
            gen_ai.request.model = who.model.as_deref(),
            gen_ai.conversation.id = resume_id.unwrap_or(&who.urn),
            gen_ai.response.model = Empty,
            cap.prompt.bytes = int(prompt_bytes),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            cap.cost_usd = Empty,
            cap.turn.outcome = Empty,
            cap.turn.duration_ms = Empty,
            cap.turn.restarts = Empty,
        );
        if let Some(tp) = traceparent {
            trace::adopt_parent(&turn, tp);
        }
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
                    otel.name = %format_args!("execute_tool {}", t.name),
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %t.name,
                    gen_ai.tool.call.id = %t.call_id,
                    gen_ai.tool.type = "extension",
                    cap.tool.is_error = Empty,
                );
                if let Some(input) = t.input.get() {
                    trace::content(&span, "gen_ai.tool.call.arguments", input);
                }
                self.tools.insert(t.call_id.clone(), span);
            }
            CapEvent::ToolCallEnd(t) => {
                if let Some(span) = self.tools.remove(&t.call_id) {
                    let failed = t.is_error.get().copied().unwrap_or(false);
                    span.record("cap.tool.is_error", failed);
                    if let Some(output) = t.output.get() {
                        trace::content(&span, "gen_ai.tool.call.result", output);
                    }
                    if failed {
                        trace::fail(&span, "tool_error", "the tool call failed");
                    }
                    trace::end(&span);
                }
            }
            CapEvent::PermissionRequest(p) if self.requests.len() < MAX_OPEN_SPANS => {
                let span = tracing::info_span!(
                    parent: turn, "permission",
                    otel.name = %format_args!("permission {}", p.tool),
                    cap.permission.req_id = %p.req_id,
                    cap.permission.tool = %p.tool,
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

    /// A chaos fault injected now: a span of its own under the turn's (else the
    /// session's), ended at once, beside the restart it causes.
    pub(super) fn chaos(
        &self,
        fault: capfleet_wire::chaos::FaultKind,
        seed_pos: u64,
        detail: &str,
    ) {
        let span = tracing::info_span!(
            parent: self.current(), "chaos",
            otel.name = %format_args!("chaos {fault}"),
            cap.chaos.fault = fault.as_str(),
            cap.chaos.target = %self.who.name,
            cap.chaos.seed_pos = int(seed_pos),
            cap.chaos.detail = detail,
        );
        trace::end(&span);
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
            trace::end(&span);
        }
    }

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

    /// An ask was answered (or declined); its span ends.
    pub(super) fn ask_answered(&mut self, ask_id: &str, answered: bool, rule: &str) {
        if let Some(span) = self.requests.remove(ask_id) {
            span.record("cap.ask.answered", answered);
            span.record("cap.ask.rule", rule);
            trace::end(&span);
        }
    }

    /// End what is still open inside the turn (tool calls, requests, a restart), now.
    fn end_open(&mut self) {
        for (_, span) in self.tools.drain().chain(self.requests.drain()) {
            trace::end(&span);
        }
        self.ready();
    }

    /// The turn ended with `result`; everything still open in it ends, then its span.
    pub(super) fn end_turn(&mut self, result: &TurnResult) {
        self.end_open();
        let Some(span) = self.turn.take() else {
            return;
        };
        trace::strings(
            &span,
            "gen_ai.response.finish_reasons",
            &[result.stop_reason.as_str()],
        );
        let u = &result.usage;
        // The conventions count cached prompt tokens in the input tokens.
        let input = u.input_tokens + u.cache_read_tokens + u.cache_creation_tokens;
        span.record("gen_ai.usage.input_tokens", int(input));
        span.record("gen_ai.usage.output_tokens", int(u.output_tokens));
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            int(u.cache_read_tokens),
        );
        span.record(
            "gen_ai.usage.cache_creation.input_tokens",
            int(u.cache_creation_tokens),
        );
        span.record("cap.cost_usd", u.cost_usd);
        span.record("cap.turn.restarts", int(result.restarts));
        span.record("cap.turn.duration_ms", int(result.duration.as_millis()));
        let message = format!("the turn ended with {}", result.stop_reason.as_str());
        close_turn(&span, result.outcome, &message);
    }

    /// The turn could not finish (the session closed or failed, as `why` says).
    pub(super) fn abandon_turn(&mut self, outcome: TurnOutcome, why: &str) {
        self.end_open();
        if let Some(span) = self.turn.take() {
            trace::strings(
                &span,
                "gen_ai.response.finish_reasons",
                &[StopReason::Error.as_str()],
            );
            close_turn(&span, outcome, why);
        }
    }

    /// The agent ended and is restarted: the `restart` span stays open until the new
    /// agent is ready.
    pub(super) fn restart(&mut self, cause: &ExitCause, attempt: u32, backoff_ms: u64) {
        self.end_open();
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
        if let Some(span) = self.restart.take() {
            trace::end(&span);
        }
    }

    /// The session failed for `reason`: its span is ERROR (it ends at its final state).
    pub(super) fn failed(&self, reason: &str) {
        trace::fail(&self.session, SESSION_FAILED, reason);
    }

    /// The session reached a final state: its span ends.
    pub(super) fn finished(&mut self, state: &str) {
        self.end_open();
        self.session.record("cap.session.state", state);
        trace::end(&self.session);
    }

    /// The span an agent started now belongs to: the restart's, else the session's.
    pub(super) fn for_agent(&self) -> &Span {
        self.restart.as_ref().unwrap_or(&self.session)
    }
}

/// Record how the turn ended and end its span; a failed turn is ERROR with `message`.
fn close_turn(span: &Span, outcome: TurnOutcome, message: &str) {
    span.record("cap.turn.outcome", outcome_str(outcome));
    if outcome == TurnOutcome::Failed {
        trace::fail(span, TURN_FAILED, message);
    }
    trace::end(span);
}
