//! The inner session's events as Claude frames. Text and thinking chunks are
//! gathered into one block, written as one `assistant` frame when something else
//! happens (a tool call, the other channel, the turn's end) — as Claude writes a
//! block once it is complete; with partial messages each chunk is also a
//! `content_block_delta`. Tool calls are `tool_use` / `tool_result` pairs, so a driver
//! sees them; usage and the last error are kept for the turn's `result`.

use capfleet_engine::protocol::{CapEvent, Channel};
use capfleet_wire::events::{EventBody, SessionEvent, UsageTotals};
use serde_json::{Value, json};

use super::frames::Speaker;

/// Text bytes of one `assistant` block at most: a flood is written as many frames,
/// each line far below a reader's 1 MiB line limit even fully escaped.
const BLOCK_MAX: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
}

impl BlockKind {
    fn name(self) -> &'static str {
        match self {
            BlockKind::Text => "text",
            BlockKind::Thinking => "thinking",
        }
    }
}

/// An `artifact` frame (the fields of its `cap.artifact`), its id prefixed with the
/// fleet run it came from, if any (ids stay unique over the runs of a conversation).
fn artifact(a: &capfleet_engine::protocol::Artifact, run: Option<&str>) -> Value {
    let mut frame = serde_json::to_value(a).unwrap_or_else(|_| json!({}));
    if let Some(run) = run {
        frame["artifact_id"] = json!(format!("{run}/{}", a.artifact_id));
    }
    frame["type"] = json!("artifact");
    frame
}

/// A text or thinking block being gathered.
#[derive(Debug)]
struct Open {
    kind: BlockKind,
    message_id: String,
    text: String,
}

/// One turn's translation state.
#[derive(Debug, Default)]
pub(super) struct Transcript {
    partial: bool,
    /// The fleet run this turn is (its artifacts' ids are prefixed with it).
    run: Option<String>,
    open: Option<Open>,
    /// The turn's usage reports.
    pub usage: UsageTotals,
    /// The last `cap.error` of the turn.
    pub last_error: Option<String>,
    /// The turn's assistant text.
    pub text: String,
}

impl Transcript {
    pub(super) fn new(partial: bool, run: Option<String>) -> Self {
        Transcript {
            partial,
            run,
            ..Transcript::default()
        }
    }

    /// The frames `event` makes, appended to `out`.
    pub(super) fn on_event(
        &mut self,
        sp: &mut Speaker,
        event: &SessionEvent,
        out: &mut Vec<Value>,
    ) {
        match &event.body {
            EventBody::Cap { event } => self.on_cap(sp, event, out),
            EventBody::TurnEnded { .. } => self.close(sp, out),
            EventBody::Restart { cause, attempt, .. } => {
                // Upstream sees one agent: a restart inside is a note on stderr.
                tracing::warn!(%cause, attempt, "the inner agent restarted; its turn goes on");
            }
            _ => {}
        }
    }

    fn on_cap(&mut self, sp: &mut Speaker, event: &CapEvent, out: &mut Vec<Value>) {
        match event {
            CapEvent::TextChunk(t) => match t.channel {
                None | Some(Channel::Assistant) => {
                    self.text.push_str(&t.text);
                    self.chunk(sp, BlockKind::Text, &t.text, out);
                }
                Some(Channel::Thought) => self.chunk(sp, BlockKind::Thinking, &t.text, out),
                Some(_) => {}
            },
            CapEvent::Thought(t) => self.chunk(sp, BlockKind::Thinking, &t.text, out),
            CapEvent::ToolCallStart(t) => {
                self.close(sp, out);
                let id = sp.message_id();
                let input = t.input.get().cloned().unwrap_or_else(|| json!({}));
                out.push(sp.assistant(
                    &id,
                    json!({"type": "tool_use", "id": t.call_id, "name": t.name, "input": input}),
                ));
            }
            CapEvent::ToolCallEnd(t) => {
                self.close(sp, out);
                let content = match t.output.get() {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(other) => Value::String(other.to_string()),
                    None => Value::String(String::new()),
                };
                let is_error = t.is_error.get().copied().unwrap_or(false);
                out.push(sp.tool_result(&t.call_id, content, is_error));
            }
            CapEvent::Usage(u) => self.usage.add(u),
            CapEvent::Artifact(a) => {
                self.close(sp, out);
                out.push(artifact(a, self.run.as_deref()));
            }
            CapEvent::Error(e) => self.last_error = Some(e.message.clone()),
            _ => {}
        }
    }

    /// One chunk of `kind`: a new block if the open one is of the other kind.
    fn chunk(&mut self, sp: &mut Speaker, kind: BlockKind, text: &str, out: &mut Vec<Value>) {
        if self.open.as_ref().is_some_and(|o| o.kind != kind) {
            self.close(sp, out);
        }
        let partial = self.partial;
        let open = self.open.get_or_insert_with(|| {
            let message_id = sp.message_id();
            if partial {
                out.push(sp.stream_event(json!({
                    "type": "message_start",
                    "message": {"id": message_id, "type": "message", "role": "assistant",
                                "model": sp.model, "content": []},
                })));
                out.push(sp.stream_event(json!({
                    "type": "content_block_start", "index": 0,
                    "content_block": {"type": kind.name(), kind.name(): ""},
                })));
            }
            Open {
                kind,
                message_id,
                text: String::new(),
            }
        });
        open.text.push_str(text);
        let full = open.text.len() >= BLOCK_MAX;
        if partial {
            let delta = match kind {
                BlockKind::Text => json!({"type": "text_delta", "text": text}),
                BlockKind::Thinking => json!({"type": "thinking_delta", "thinking": text}),
            };
            out.push(
                sp.stream_event(json!({"type": "content_block_delta", "index": 0, "delta": delta})),
            );
        }
        if full {
            self.close(sp, out);
        }
    }

    /// Write the open block (its snapshot, then the end of its stream).
    pub(super) fn close(&mut self, sp: &mut Speaker, out: &mut Vec<Value>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let block = match open.kind {
            BlockKind::Text => json!({"type": "text", "text": open.text}),
            BlockKind::Thinking => {
                json!({"type": "thinking", "thinking": open.text, "signature": ""})
            }
        };
        out.push(sp.assistant(&open.message_id, block));
        if self.partial {
            out.push(sp.stream_event(json!({"type": "content_block_stop", "index": 0})));
            out.push(sp.stream_event(json!({"type": "message_stop"})));
        }
    }
}
