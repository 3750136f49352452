//! The `result` frame: `cap.usage` (+ `cap.error`) + [`Output::TurnEnd`].
//!
//! Cost and tokens: Claude Code 2.1.337+ states the turn's own in
//! `model_usage_since_last_result` (summed over its models: `costUSD`, tokens; an
//! interrupted request is billed there while its `usage` is all zero), and that is
//! what the turn's `cap.usage` carries. Its `total_cost_usd` is no measure of a
//! turn: a resumed process's first total also holds the conversation's earlier cost,
//! which a difference would charge twice.
//! Older versions have only `total_cost_usd` (older: `total_cost`, `cost_usd`),
//! cumulative per process from zero, so the turn's `cost_usd_estimate` is the increase
//! over the highest total seen in this process (never negative: an aborted request
//! reports 0 and is not added later), and tokens come from `result.usage`, per turn.
//! An interrupted or failed turn that reports tokens but no increase has an unknown
//! cost, not a zero one: it is left unset, so the session's pricing table can estimate it.
//!
//! | `subtype` / condition | `stop_reason` | `cap.error` code (retryable) |
//! |---|---|---|
//! | `terminal_reason` `aborted_*`, or an `error_during_execution` after Claude's `[Request interrupted by user…]` | `cancelled` | none |
//! | `success`, `is_error` false | from `stop_reason`: `end_turn`/null/other → `end_turn`, `max_tokens`, `tool_use`, `stop_sequence`, `refusal` → `error` | none |
//! | `success`, `is_error` true (API failure), by `api_error_status` | `error` | 429 and 529 (`overloaded_error`: wait, as for a 429) `rate_limit` (yes), 401/403 `auth_error`, 413 or "prompt is too long" `context_overflow`, 500/502/503/504 `model_unavailable` (yes), else by its text* or `api_error` |
//! | `error_max_turns` | `error` | `max_turns` |
//! | `error_max_budget_usd` | `error` | `budget_exceeded` |
//! | `error_during_execution` (not interrupted) | `error` | by its text*, else `execution_error` |
//! | `error_max_structured_output_retries` | `error` | `structured_output_failed` |
//! | any other `error*` subtype | `error` | by its text*, else `agent_error` |
//!
//! \* The `errors` and `result` text read by [`error_text::classify`]: a rate limit
//! written only as text (`rate_limit_error: …`, `API Error: 429 {…}`, "You've hit
//! your session limit") is a `rate_limit`, so the session pauses instead of failing.
//!
//! `model_id` is the turn's last `assistant` `message.model`, else the `init` model.

use serde_json::{Number, Value, json};

use super::frames::{ModelUsage, ResultFrame, ResultUsage, opt};
use super::mapper::StreamJsonMapper;
use super::output::{Output, TurnEnd};
use crate::bindings::error_text;
use crate::protocol::{CapEvent, ErrorKind, Nullable, StopReason, Usage};

/// Cost deltas are rounded to this many decimal places (float noise).
const COST_DECIMALS: i32 = 10;

impl StreamJsonMapper {
    pub(super) fn on_result(&mut self, mut r: ResultFrame<'_>, out: &mut Vec<Output>) {
        let subtype = opt(&r.subtype).unwrap_or("");
        let is_error = r.is_error.unwrap_or(false);
        let (stop_reason, error) = classify(&r, subtype, is_error, self.turn_interrupted);

        let unfinished = is_error || stop_reason == StopReason::Cancelled;
        let own = r.model_usage_since_last_result.take();
        let turn = self.turn_usage(own, r.usage.take(), r.cumulative_cost(), unfinished);
        let model = self.turn_model.as_deref().or(self.session.model.as_deref());
        let usage = Usage {
            model_id: model.map(str::to_owned).into(),
            input_tokens: turn.input_tokens.into(),
            output_tokens: turn.output_tokens.into(),
            cache_read_tokens: turn.cache_read_input_tokens.into(),
            cache_creation_tokens: turn.cache_creation_input_tokens.into(),
            thinking_tokens: turn.thinking_tokens.into(),
            cost_usd_estimate: turn
                .cost_usd
                .map(round_cost)
                .and_then(Number::from_f64)
                .into(),
            duration_ms: r.duration_ms.into(),
            stop_reason: Some(stop_reason),
            ..Default::default()
        };
        self.emit(out, CapEvent::Usage(usage));

        if let Some((code, retryable)) = error {
            let mut event = CapEvent::error(code, error_message(&r, subtype), retryable);
            if let CapEvent::Error(e) = &mut event {
                e.details = Nullable::Value(json!({
                    "subtype": subtype,
                    "terminal_reason": opt(&r.terminal_reason),
                    "api_error_status": r.api_error_status,
                    "num_turns": r.num_turns,
                }));
            }
            self.emit(out, event);
        }
        self.withdraw_all(out);
        self.end_turn_state();
        out.push(Output::TurnEnd(TurnEnd {
            stop_reason,
            is_error,
            result_text: opt(&r.result).map(str::to_owned),
            subtype: subtype.to_owned(),
        }));
    }
}

impl StreamJsonMapper {
    /// The turn's own tokens and cost (see the module docs); follows the process's
    /// cumulative total either way.
    fn turn_usage(
        &mut self,
        own: Option<ModelUsage>,
        usage: Option<ResultUsage>,
        total: Option<f64>,
        unfinished: bool,
    ) -> ModelUsage {
        let delta = total.map(|total| {
            let delta = (total - self.cost_seen).max(0.0);
            self.cost_seen = self.cost_seen.max(total);
            delta
        });
        if let Some(own) = own {
            return own;
        }
        let u = usage.unwrap_or_default();
        let tokens = [u.input_tokens, u.output_tokens]
            .into_iter()
            .flatten()
            .sum::<u64>();
        ModelUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            thinking_tokens: u.thinking(),
            cost_usd: delta.filter(|c| round_cost(*c) > 0.0 || tokens == 0 || !unfinished),
        }
    }
}

/// Rounded to [`COST_DECIMALS`] (float noise of sums and differences).
fn round_cost(c: f64) -> f64 {
    let scale = 10f64.powi(COST_DECIMALS);
    (c * scale).round() / scale
}

fn classify(
    r: &ResultFrame<'_>,
    subtype: &str,
    is_error: bool,
    interrupted: bool,
) -> (StopReason, Option<(ErrorKind, bool)>) {
    let aborted = opt(&r.terminal_reason).is_some_and(|t| t.starts_with("aborted"));
    if aborted || (interrupted && subtype == "error_during_execution") {
        return (StopReason::Cancelled, None);
    }
    let other = |code: &str| Some((ErrorKind::Other(code.to_owned()), false));
    match subtype {
        "success" if is_error => (StopReason::Error, Some(api_error(r))),
        "error_max_turns" => (StopReason::Error, other("max_turns")),
        "error_max_budget_usd" => (StopReason::Error, other("budget_exceeded")),
        "error_during_execution" => (StopReason::Error, Some(by_text(r, "execution_error"))),
        "error_max_structured_output_retries" => {
            (StopReason::Error, other("structured_output_failed"))
        }
        s if s.starts_with("error") || is_error => {
            (StopReason::Error, Some(by_text(r, "agent_error")))
        }
        _ => (stop_reason(opt(&r.stop_reason)), None),
    }
}

/// Claude's (Anthropic's) `stop_reason` in CAP's vocabulary.
pub(crate) fn stop_reason(s: Option<&str>) -> StopReason {
    match s {
        Some("max_tokens") => StopReason::MaxTokens,
        Some("tool_use") => StopReason::ToolUse,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Error,
        _ => StopReason::EndTurn,
    }
}

fn api_error(r: &ResultFrame<'_>) -> (ErrorKind, bool) {
    let status = match &r.api_error_status {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let text = opt(&r.result).unwrap_or("");
    match status {
        Some(429 | 529) => (ErrorKind::RateLimit, true),
        Some(401 | 403) => (ErrorKind::AuthError, false),
        Some(413) => (ErrorKind::ContextOverflow, false),
        Some(500 | 502 | 503 | 504) => (ErrorKind::ModelUnavailable, true),
        _ if text.contains("prompt is too long") => (ErrorKind::ContextOverflow, false),
        _ => by_text(r, "api_error"),
    }
}

/// The code the result's error text names (`errors`, then `result`), else `fallback`.
fn by_text(r: &ResultFrame<'_>, fallback: &str) -> (ErrorKind, bool) {
    let mut text = error_strings(r).join("\n");
    if let Some(result) = opt(&r.result) {
        text.push('\n');
        text.push_str(result);
    }
    match error_text::classify(&text) {
        (ErrorKind::Other(_), _) => (ErrorKind::Other(fallback.to_owned()), false),
        known => known,
    }
}

fn error_strings<'r>(r: &'r ResultFrame<'_>) -> Vec<&'r str> {
    match &r.errors {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(s)) => vec![s.as_str()],
        _ => Vec::new(),
    }
}

fn error_message(r: &ResultFrame<'_>, subtype: &str) -> String {
    let errors = error_strings(r);
    if !errors.is_empty() {
        format!("{subtype}: {}", errors.join("; "))
    } else if let Some(t) = opt(&r.result).filter(|t| !t.is_empty()) {
        format!("{subtype}: {t}")
    } else {
        subtype.to_owned()
    }
}
