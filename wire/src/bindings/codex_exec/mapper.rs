//! One `codex exec --json` process's events as CAP (verified against Codex CLI
//! 0.171.0): `thread.started` gives the id the next turn resumes; `item.*` events
//! become text, thoughts, tool calls, file changes and plans (`items`);
//! `turn.completed` gives usage — Codex counts it over the whole thread, so the
//! mapper reports what this turn added to the [`Totals`] it started from;
//! `turn.failed` and `error` become `cap.error` with the code their message says.
//! A line that is not JSON is a `parse_failed` error, counted; an event or item type
//! this mapper does not know is counted and kept verbatim (the first
//! [`KEPT_UNKNOWN`]) in the turn's `cap.usage` `_meta`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::items::Items;
use crate::bindings::{TurnEnd, error_text};
use crate::protocol::{CapEvent, ErrorKind, HasMeta, StopReason, Usage};

/// Unknown events kept verbatim per turn; the rest are only counted.
pub(crate) const KEPT_UNKNOWN: usize = 16;
/// `_meta` key of the unknown events kept on a turn's `cap.usage`.
pub(crate) const META_UNKNOWN: &str = "capfleet.codex_exec.unknown";

/// One result of mapping a line, in stream order.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // `Event` is nearly every output
pub enum Output {
    Event(CapEvent),
    /// The thread this process runs (`thread.started`): what the next turn resumes.
    ThreadId(String),
    /// The turn ended (`turn.completed` / `turn.failed`), after its usage and error.
    TurnEnd(TurnEnd),
}

/// Codex's token counts over a thread (`turn.completed.usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

impl Totals {
    /// What `self` (later) adds to `base` (earlier); a count that went down (a
    /// thread Codex started afresh) is taken whole.
    fn since(self, base: Totals) -> Totals {
        if self.input_tokens < base.input_tokens || self.output_tokens < base.output_tokens {
            return self;
        }
        Totals {
            input_tokens: self.input_tokens - base.input_tokens,
            cached_input_tokens: self
                .cached_input_tokens
                .saturating_sub(base.cached_input_tokens),
            cache_write_input_tokens: self
                .cache_write_input_tokens
                .saturating_sub(base.cache_write_input_tokens),
            output_tokens: self.output_tokens - base.output_tokens,
            reasoning_output_tokens: self
                .reasoning_output_tokens
                .saturating_sub(base.reasoning_output_tokens),
        }
    }

    /// The sum of two counts (calls of one turn).
    pub(crate) fn plus(self, o: Totals) -> Totals {
        Totals {
            input_tokens: self.input_tokens + o.input_tokens,
            cached_input_tokens: self.cached_input_tokens + o.cached_input_tokens,
            cache_write_input_tokens: self.cache_write_input_tokens + o.cache_write_input_tokens,
            output_tokens: self.output_tokens + o.output_tokens,
            reasoning_output_tokens: self.reasoning_output_tokens + o.reasoning_output_tokens,
        }
    }

    /// As `cap.usage` (CAP's `input_tokens` exclude cache reads).
    pub(crate) fn usage(self, model: Option<&str>) -> Usage {
        Usage {
            model_id: model.map(str::to_owned).into(),
            input_tokens: self
                .input_tokens
                .saturating_sub(self.cached_input_tokens)
                .into(),
            output_tokens: self.output_tokens.into(),
            cache_read_tokens: self.cached_input_tokens.into(),
            cache_creation_tokens: self.cache_write_input_tokens.into(),
            thinking_tokens: self.reasoning_output_tokens.into(),
            ..Default::default()
        }
    }
}

/// Counters of what the mapper saw, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapperStats {
    /// Non-blank lines read.
    pub lines: u64,
    /// Lines that were not a JSON event.
    pub malformed: u64,
    /// Events and items of a type this mapper does not know.
    pub unknown: u64,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    usage: Option<Totals>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

/// The state of one Codex process's output.
#[derive(Debug)]
pub struct CodexExecMapper {
    turn: u64,
    model: Option<String>,
    /// The thread's counts before this turn.
    base: Totals,
    /// The thread's counts after the last `turn.completed` seen.
    totals: Totals,
    items: Items,
    /// The last `error` event's message (a `turn.failed` repeating it is not
    /// reported twice).
    last_error: Option<String>,
    unknown: Vec<Value>,
    stats: MapperStats,
}

impl CodexExecMapper {
    /// A mapper for turn number `turn` (from 1; its item ids become `t<turn>.<id>`)
    /// of `model` (for pricing) on a thread whose counts were `base` before it.
    pub fn new(turn: u64, model: Option<String>, base: Totals) -> Self {
        CodexExecMapper {
            turn,
            model,
            base,
            totals: base,
            items: Items::new(format!("t{turn}.")),
            last_error: None,
            unknown: Vec::new(),
            stats: MapperStats::default(),
        }
    }

    /// Which turn of the conversation this process runs.
    pub fn turn(&self) -> u64 {
        self.turn
    }

    /// The thread's counts so far: the next turn's `base`.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    pub fn stats(&self) -> MapperStats {
        self.stats
    }

    /// Map one output line.
    pub fn on_line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        self.stats.lines += 1;
        let event: Event<'_> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(e) => {
                self.stats.malformed += 1;
                let message = format!("codex exec line is not a JSON event: {e}");
                out.push(Output::Event(CapEvent::error(
                    ErrorKind::ParseFailed,
                    message,
                    false,
                )));
                return;
            }
        };
        match event.kind {
            "thread.started" => {
                if let Some(id) = event.thread_id {
                    out.push(Output::ThreadId(id));
                }
            }
            "turn.started" => {}
            "item.started" | "item.updated" | "item.completed" => {
                let done = event.kind == "item.completed";
                match event.item {
                    Some(item) => {
                        if let Err(unknown) = self.items.on_item(item, done, out) {
                            self.keep_unknown(unknown);
                        }
                    }
                    None => self.keep_unknown(json!({ "type": event.kind })),
                }
            }
            "turn.completed" => {
                let now = event.usage.unwrap_or(self.base);
                let mut usage = now.since(self.base).usage(self.model.as_deref());
                self.totals = now;
                self.base = now;
                if !self.unknown.is_empty() {
                    usage.set_meta(
                        META_UNKNOWN,
                        Value::Array(std::mem::take(&mut self.unknown)),
                    );
                }
                out.push(Output::Event(CapEvent::Usage(usage)));
                out.push(Output::TurnEnd(TurnEnd {
                    stop_reason: StopReason::EndTurn,
                    is_error: false,
                    result_text: self.items.take_last_message(),
                }));
            }
            "turn.failed" => {
                let message = event
                    .error
                    .as_ref()
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed")
                    .to_owned();
                if self.last_error.as_deref() != Some(message.as_str()) {
                    out.push(Output::Event(error_event(&message)));
                }
                out.push(Output::TurnEnd(TurnEnd {
                    stop_reason: StopReason::Error,
                    is_error: true,
                    result_text: self.items.take_last_message(),
                }));
            }
            "error" => {
                let message = event.message.unwrap_or_default();
                // Codex repeats `Reconnecting…` while it retries: said once.
                if self.last_error.as_deref() != Some(message.as_str()) {
                    out.push(Output::Event(error_event(&message)));
                    self.last_error = Some(message);
                }
            }
            _ => {
                let verbatim = serde_json::from_slice(line).unwrap_or(Value::Null);
                self.keep_unknown(verbatim);
            }
        }
    }

    fn keep_unknown(&mut self, verbatim: Value) {
        self.stats.unknown += 1;
        tracing::debug!(event = %verbatim, "codex exec: unknown event or item kept verbatim");
        if self.unknown.len() < KEPT_UNKNOWN {
            self.unknown.push(verbatim);
        }
    }
}

/// `cap.error` for an error message of Codex's, coded by what it says; Codex's own
/// retries (`Reconnecting…`) are retryable whatever the cause.
fn error_event(message: &str) -> CapEvent {
    let (kind, retryable) = error_text::classify(message);
    let retryable = retryable || message.starts_with("Reconnecting");
    CapEvent::error(kind, message, retryable)
}

#[cfg(test)]
#[path = "mapper_tests.rs"]
mod tests;
