//! One `codex app-server` connection's lines as [`Output`]s (verified against Codex
//! CLI 0.171.0): responses to our requests go back to their callers; the server's
//! approval requests go to the answerer ([`super::approvals`]); notifications become
//! CAP events — items and their deltas ([`super::items`]), plans, per-turn usage,
//! errors, rate limits — and `turn/completed` ends the turn.
//!
//! | notification | output |
//! |---|---|
//! | `turn/started` | the next turn (item ids `t<turn>.<id>`) |
//! | `item/started`, `item/completed`, `item/*/delta`, `item/*/outputDelta` | [`super::items`] |
//! | `turn/plan/updated` | `cap.plan` |
//! | `thread/tokenUsage/updated` | counted: its `last` (one model call) adds to the turn's usage |
//! | `turn/completed` | `cap.usage` (the turn's calls), a `cap.error` if it failed, the turn's end (`interrupted`: cancelled) |
//! | `error` | `cap.error` coded by its message (`willRetry`: retryable), said once per message |
//! | `warning` | `cap.error` `agent_warning` |
//! | `account/rateLimits/updated` | a limit reached: `cap.error` `rate_limit` with its reset (the session pauses); 90% used: `rate_limit_warning`; said on a change |
//! | `serverRequest/resolved` | the request is no longer open (withdrawn if still asked) |
//! | anything else | counted (`ignored`) |
//!
//! A line that is not a JSON-RPC message is a `parse_failed` error, counted.

use serde::Deserialize;
use serde_json::{Value, json};

use super::approvals::{Approval, Refusal, approval};
use super::frames::*;
use super::items::{Delta, Items};
use crate::bindings::codex_exec::Totals;
use crate::bindings::{TurnEnd, error_text};
use crate::protocol::{CapEvent, ErrorKind, Nullable, PlanEntry, PlanStatus, StopReason};
use crate::supervision::rate_limit::{
    DETAIL_LIMIT_TYPE, DETAIL_SOURCE, PauseSource, RATE_LIMIT_WARNING,
};

/// One result of mapping a line, in stream order.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // `Event` is nearly every output
pub enum Output {
    Event(CapEvent),
    /// The turn ended (`turn/completed`), after its usage and error.
    TurnEnd(TurnEnd),
    /// The answer to our request `id`.
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    /// A server request for the answerer.
    Approval(Approval),
    /// A server request refused at once.
    Refused {
        id: RequestId,
        refusal: Refusal,
    },
    /// A server request is no longer open.
    Resolved(RequestId),
}

/// Counters of what the mapper saw, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapperStats {
    pub lines: u64,
    /// Lines that were not a JSON-RPC message, or a known one with bad params.
    pub malformed: u64,
    /// Items of a type this binding does not know.
    pub unknown: u64,
    /// Notifications this binding has no use for.
    pub ignored: u64,
}

/// The percentage of a rate-limit window that is a warning.
const WARN_PERCENT: f64 = 90.0;

/// The state of one app-server connection's output.
#[derive(Debug)]
pub struct AppMapper {
    turn: u64,
    /// What item ids are prefixed with in this turn (`t<turn>.`).
    prefix: String,
    model: Option<String>,
    items: Items,
    /// The turn's model calls so far.
    usage: Totals,
    last_error: Option<String>,
    /// The last rate-limit state said (`reached`, `near`, `ok`).
    rate_state: &'static str,
    stats: MapperStats,
}

impl AppMapper {
    /// A mapper whose turns are counted from `turn` + 1 (a restarted connection goes
    /// on from the last), for `model` (for pricing).
    pub fn new(turn: u64, model: Option<String>) -> Self {
        AppMapper {
            turn,
            prefix: prefix_of(turn),
            model,
            items: Items::default(),
            usage: Totals::default(),
            last_error: None,
            rate_state: "ok",
            stats: MapperStats::default(),
        }
    }

    pub fn turn(&self) -> u64 {
        self.turn
    }

    pub fn stats(&self) -> MapperStats {
        self.stats
    }

    /// Map one line.
    pub fn on_line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        self.stats.lines += 1;
        match Frame::parse(line) {
            Ok(Frame::Response { id, result }) => out.push(Output::Response { id, result }),
            Ok(Frame::Request { id, method, params }) => {
                match approval(id.clone(), &method, params, &self.prefix) {
                    Ok(a) => out.push(Output::Approval(a)),
                    Err(refusal) => {
                        if matches!(refusal, Refusal::Invalid { .. }) {
                            self.malformed(&refusal.to_string(), out);
                        }
                        out.push(Output::Refused { id, refusal });
                    }
                }
            }
            Ok(Frame::Notification { method, params }) => {
                self.on_notification(&method, params, out)
            }
            Err(e) => self.malformed(&format!("codex app-server line: {e}"), out),
        }
    }

    fn malformed(&mut self, message: &str, out: &mut Vec<Output>) {
        self.stats.malformed += 1;
        out.push(Output::Event(CapEvent::error(
            ErrorKind::ParseFailed,
            message,
            false,
        )));
    }

    /// `params` as `T`, or a counted `parse_failed`.
    fn typed<'a, T: Deserialize<'a>>(
        &mut self,
        method: &str,
        params: Params<'a>,
        out: &mut Vec<Output>,
    ) -> Option<T> {
        match params.parse() {
            Ok(t) => Some(t),
            Err(e) => {
                self.malformed(&format!("codex app-server {method}: {e}"), out);
                None
            }
        }
    }

    fn on_notification(&mut self, method: &str, params: Params<'_>, out: &mut Vec<Output>) {
        match method {
            "turn/started" => {
                self.turn += 1;
                self.prefix = prefix_of(self.turn);
                self.usage = Totals::default();
                self.last_error = None;
            }
            "item/started" | "item/completed" => {
                let Some(n) = self.typed::<ItemNotification>(method, params, out) else {
                    return;
                };
                let Some(head) = self.typed::<ItemHead>(method, Params::of(n.item), out) else {
                    return;
                };
                let id = format!("{}{}", self.prefix, head.id);
                if let Err(unknown) =
                    self.items
                        .on_item(id, &head, n.item, method == "item/completed", out)
                {
                    self.stats.unknown += 1;
                    tracing::debug!(item = %unknown, "codex app-server: unknown item type");
                }
            }
            "item/agentMessage/delta"
            | "item/reasoning/textDelta"
            | "item/reasoning/summaryTextDelta"
            | "item/commandExecution/outputDelta" => {
                let Some(n) = self.typed::<DeltaNotification>(method, params, out) else {
                    return;
                };
                let kind = match method {
                    "item/agentMessage/delta" => Delta::Text,
                    "item/commandExecution/outputDelta" => Delta::Output,
                    _ => Delta::Thought,
                };
                self.items
                    .delta(format!("{}{}", self.prefix, n.item_id), n.delta, kind, out);
            }
            "turn/plan/updated" => {
                let Some(n) = self.typed::<PlanNotification>(method, params, out) else {
                    return;
                };
                let entries = n
                    .plan
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let status = match s.status.as_str() {
                            "completed" => PlanStatus::Completed,
                            "inProgress" => PlanStatus::InProgress,
                            _ => PlanStatus::Pending,
                        };
                        PlanEntry::new(format!("{}plan-{i}", self.prefix), s.step, status)
                    })
                    .collect();
                out.push(Output::Event(CapEvent::plan(entries)));
            }
            "thread/tokenUsage/updated" => {
                let Some(n) = self.typed::<TokenUsageNotification>(method, params, out) else {
                    return;
                };
                let _ = (&n.turn_id, n.token_usage.model_context_window);
                self.usage = self.usage.plus(n.token_usage.last.into());
            }
            "turn/completed" => {
                let Some(n) = self.typed::<TurnNotification>(method, params, out) else {
                    return;
                };
                self.turn_completed(n.turn, out);
            }
            "error" => {
                let Some(n) = self.typed::<ErrorNotification>(method, params, out) else {
                    return;
                };
                let message = n.error.message;
                if self.last_error.as_deref() != Some(message.as_str()) {
                    out.push(Output::Event(error_event(&message, n.will_retry)));
                    self.last_error = Some(message);
                }
            }
            "warning" => {
                let params: Value = params.parse().unwrap_or_default();
                let message = params.get("message").and_then(Value::as_str).unwrap_or("");
                let kind = ErrorKind::Other("agent_warning".into());
                out.push(Output::Event(CapEvent::error(kind, message, false)));
            }
            "account/rateLimits/updated" => {
                let Some(n) = self.typed::<RateLimitsNotification>(method, params, out) else {
                    return;
                };
                self.rate_limits(n.rate_limits, out);
            }
            "serverRequest/resolved" => {
                let Some(n) = self.typed::<ResolvedNotification>(method, params, out) else {
                    return;
                };
                out.push(Output::Resolved(n.request_id));
            }
            _ => {
                self.stats.ignored += 1;
                tracing::trace!(%method, "codex app-server notification ignored");
            }
        }
    }

    fn turn_completed(&mut self, turn: Turn, out: &mut Vec<Output>) {
        let usage = std::mem::take(&mut self.usage).usage(self.model.as_deref());
        out.push(Output::Event(CapEvent::Usage(usage)));
        let result_text = self.items.last_message.take();
        let end = match turn.status {
            TurnStatus::Completed | TurnStatus::InProgress => TurnEnd {
                stop_reason: StopReason::EndTurn,
                is_error: false,
                result_text,
            },
            TurnStatus::Interrupted => TurnEnd::cancelled(),
            TurnStatus::Failed => {
                let message = turn
                    .error
                    .map(|e| e.message)
                    .unwrap_or_else(|| "the turn failed".to_owned());
                if self.last_error.as_deref() != Some(message.as_str()) {
                    out.push(Output::Event(error_event(&message, false)));
                }
                TurnEnd {
                    stop_reason: StopReason::Error,
                    is_error: true,
                    result_text,
                }
            }
        };
        out.push(Output::TurnEnd(end));
    }

    /// A rolling rate-limit update, said when its state changes.
    fn rate_limits(&mut self, snap: RateLimitSnapshot, out: &mut Vec<Output>) {
        let windows = [snap.primary, snap.secondary];
        let most = windows
            .iter()
            .flatten()
            .max_by(|a, b| a.used_percent.total_cmp(&b.used_percent))
            .copied();
        let reached = snap
            .rate_limit_reached_type
            .as_ref()
            .filter(|v| !v.is_null());
        let state = match (reached, most) {
            (Some(_), _) => "reached",
            (None, Some(w)) if w.used_percent >= 100.0 => "reached",
            (None, Some(w)) if w.used_percent >= WARN_PERCENT => "near",
            _ => "ok",
        };
        if state == self.rate_state {
            return;
        }
        self.rate_state = state;
        let (code, retryable) = match state {
            "reached" => (ErrorKind::RateLimit, true),
            "near" => (ErrorKind::Other(RATE_LIMIT_WARNING.into()), false),
            _ => return,
        };
        let limit_type = reached
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| snap.limit_id.clone());
        let resets_at = most.and_then(|w| w.resets_at);
        let mut message = format!(
            "{} limit {state}",
            limit_type.as_deref().unwrap_or("account")
        );
        if let Some(w) = most {
            message.push_str(&format!(" ({:.0}% used)", w.used_percent));
        }
        if let Some(at) = resets_at.and_then(|s| jiff::Timestamp::from_second(s).ok()) {
            message.push_str(&format!("; resets at {at}"));
        }
        let mut event = CapEvent::error(code, message, retryable);
        if let CapEvent::Error(e) = &mut event {
            e.details = Nullable::Value(json!({
                DETAIL_SOURCE: PauseSource::RateLimitEvent.as_str(),
                DETAIL_LIMIT_TYPE: limit_type,
                "resets_at": resets_at,
            }));
        }
        out.push(Output::Event(event));
    }
}

impl From<TokenUsageBreakdown> for Totals {
    fn from(b: TokenUsageBreakdown) -> Self {
        Totals {
            input_tokens: b.input_tokens,
            cached_input_tokens: b.cached_input_tokens,
            cache_write_input_tokens: b.cache_write_input_tokens,
            output_tokens: b.output_tokens,
            reasoning_output_tokens: b.reasoning_output_tokens,
        }
    }
}

/// The item id prefix of turn `turn`.
fn prefix_of(turn: u64) -> String {
    format!("t{turn}.")
}

/// `cap.error` for an error message of Codex's, coded by what it says.
fn error_event(message: &str, will_retry: bool) -> CapEvent {
    let (kind, retryable) = error_text::classify(message);
    CapEvent::error(kind, message, retryable || will_retry)
}

#[cfg(test)]
#[path = "mapper_tests.rs"]
mod tests;
