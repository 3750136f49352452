//! stream-json output: a buffered NDJSON writer and the Claude-shaped frames.

use std::io::{self, BufWriter, StdoutLock, Write};
use std::time::Instant;

use serde_json::{Value, json};

use super::script::steps::{Stop, Usage};

/// Session-wide facts every frame repeats.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub session_id: String,
    pub model: String,
    pub tools: Vec<String>,
    pub permission_mode: String,
    /// Cost of every turn this process ran, as Claude's `total_cost_usd` reports it.
    pub total_cost_usd: f64,
}

/// An `assistant` text frame split around its text and uuid.
pub(super) struct TextTemplate {
    head: String,
    middle: String,
    tail: String,
}

/// Writes one JSON frame per line to stdout through a large buffer; the
/// caller flushes per frame or per batch.
pub(super) struct Out {
    writer: BufWriter<StdoutLock<'static>>,
    seq: u64,
}

impl Out {
    pub(super) fn new() -> Out {
        Out {
            writer: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
            seq: 0,
        }
    }

    /// A fresh sequence number (ids, uuids).
    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A uuid-shaped id, unique within the process.
    pub(super) fn uuid(&mut self) -> String {
        let n = self.next_seq();
        format!("00000000-0000-4000-8000-{:012x}", n & 0xffff_ffff_ffff)
    }

    pub(super) fn emit(&mut self, frame: &Value) -> io::Result<()> {
        serde_json::to_writer(&mut self.writer, frame)?;
        self.writer.write_all(b"\n")
    }

    pub(super) fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Lines written verbatim, each with its newline.
    pub(super) fn raw_lines(&mut self, lines: &[String]) -> io::Result<()> {
        for line in lines {
            self.write_raw(line.as_bytes())?;
            self.write_raw(b"\n")?;
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// A `stream_event` frame wrapping a raw API stream event.
    pub(super) fn stream_event(&mut self, session: &Session, event: Value) -> io::Result<()> {
        let uuid = self.uuid();
        self.emit(&json!({
            "type": "stream_event",
            "event": event,
            "session_id": session.session_id,
            "parent_tool_use_id": null,
            "uuid": uuid,
        }))
    }

    /// An `assistant` frame with one content block.
    pub(super) fn assistant(
        &mut self,
        session: &Session,
        message_id: &str,
        block: Value,
        usage: &Usage,
    ) -> io::Result<()> {
        let uuid = self.uuid();
        self.emit(&assistant_frame(session, message_id, block, usage, &uuid))
    }

    /// Pre-renders `assistant` text frames of one message, so floods only
    /// escape their text (a million frames stay fast).
    pub(super) fn text_template(
        &self,
        session: &Session,
        message_id: &str,
        usage: &Usage,
    ) -> TextTemplate {
        let block = json!({"type": "text", "text": "\u{1}"});
        let frame = assistant_frame(session, message_id, block, usage, "\u{2}").to_string();
        let (head, rest) = frame.split_once("\"\\u0001\"").unwrap_or((&frame, ""));
        let (middle, tail) = rest.split_once("\\u0002").unwrap_or((rest, ""));
        TextTemplate {
            head: head.to_string(),
            middle: middle.to_string(),
            tail: tail.to_string(),
        }
    }

    /// One `assistant` text frame from a template.
    pub(super) fn emit_text(&mut self, template: &TextTemplate, text: &str) -> io::Result<()> {
        let mut escaped = Vec::with_capacity(text.len() + 2);
        serde_json::to_writer(&mut escaped, text)?;
        self.emit_escaped_text(template, &escaped)
    }

    /// One `assistant` text frame from a template and an already
    /// JSON-escaped, quoted text.
    pub(super) fn emit_escaped_text(
        &mut self,
        template: &TextTemplate,
        escaped: &[u8],
    ) -> io::Result<()> {
        let n = self.next_seq();
        self.writer.write_all(template.head.as_bytes())?;
        self.writer.write_all(escaped)?;
        self.writer.write_all(template.middle.as_bytes())?;
        write!(
            self.writer,
            "00000000-0000-4000-8000-{:012x}",
            n & 0xffff_ffff_ffff
        )?;
        self.writer.write_all(template.tail.as_bytes())?;
        self.writer.write_all(b"\n")
    }

    /// A `user` frame carrying one `tool_result` block.
    pub(super) fn tool_result(
        &mut self,
        session: &Session,
        tool_use_id: &str,
        content: &str,
        is_error: bool,
    ) -> io::Result<()> {
        let uuid = self.uuid();
        self.emit(&json!({
            "type": "user",
            "message": {
                "role": "user",
                "content": [{
                    "tool_use_id": tool_use_id,
                    "type": "tool_result",
                    "content": content,
                    "is_error": is_error,
                }],
            },
            "parent_tool_use_id": null,
            "session_id": session.session_id,
            "uuid": uuid,
        }))
    }

    /// A valid `assistant` text frame line of about `bytes` bytes (at least
    /// its envelope), its padding streamed in pieces; its newline if `newline`.
    pub(super) fn oversize(
        &mut self,
        session: &Session,
        message_id: &str,
        bytes: u64,
        newline: bool,
    ) -> io::Result<()> {
        let frame = oversize_frame(session, message_id);
        write_oversize(&mut self.writer, &frame, bytes, newline)?;
        self.flush()
    }

    /// `frame` (whose padding is a [`PAD_MARK`] string) as one line of about
    /// `bytes` bytes, with its newline.
    pub(super) fn oversize_frame(&mut self, frame: &Value, bytes: u64) -> io::Result<()> {
        write_oversize(&mut self.writer, frame, bytes, true)
    }

    /// A successful `control_response` to a client request.
    pub(super) fn ack(&mut self, request_id: &str) -> io::Result<()> {
        self.emit(&json!({
            "type": "control_response",
            "response": { "subtype": "success", "request_id": request_id, "response": {} },
        }))?;
        self.flush()
    }
}

/// What a turn did so far: the `result` frame reports it.
pub(super) struct TurnAcc {
    pub started: Instant,
    pub text: Vec<String>,
    pub usage: Usage,
    pub messages: u64,
    pub denials: Vec<Value>,
    /// An `oversize` step with `result = true`: the turn's `result` frame is written
    /// as one line of about this many bytes (its `result` text padded).
    pub result_bytes: Option<u64>,
}

impl TurnAcc {
    pub(super) fn new() -> TurnAcc {
        TurnAcc {
            started: Instant::now(),
            text: Vec::new(),
            result_bytes: None,
            usage: Usage::default(),
            messages: 0,
            denials: Vec::new(),
        }
    }
}

fn assistant_frame(
    session: &Session,
    message_id: &str,
    block: Value,
    usage: &Usage,
    uuid: &str,
) -> Value {
    json!({
        "type": "assistant",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": session.model,
            "content": [block],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage_json(usage),
        },
        "parent_tool_use_id": null,
        "session_id": session.session_id,
        "uuid": uuid,
    })
}

/// The `system`/`init` frame.
pub(super) fn init_frame(session: &Session, cwd: &str, uuid: String) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": cwd,
        "session_id": session.session_id,
        "tools": session.tools,
        "mcp_servers": [],
        "model": session.model,
        "permissionMode": session.permission_mode,
        "slash_commands": [],
        "apiKeySource": "none",
        "claude_code_version": concat!("capfleet-sim/", env!("CARGO_PKG_VERSION")),
        "output_style": "default",
        "uuid": uuid,
    })
}

/// Usage in the Anthropic API's field names.
pub(super) fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_creation_tokens,
    })
}

/// The `result` frame closing a turn (without its `uuid`).
pub(super) fn result_frame(session: &Session, turn: &TurnAcc, stop: Option<Stop>) -> Value {
    let elapsed = turn.started.elapsed().as_millis() as u64;
    let mut frame = json!({
        "type": "result",
        "subtype": "success",
        "is_error": false,
        "duration_ms": elapsed,
        "duration_api_ms": elapsed,
        "num_turns": turn.messages.max(1),
        "session_id": session.session_id,
        "total_cost_usd": session.total_cost_usd,
        "usage": usage_json(&turn.usage),
        "permission_denials": turn.denials,
    });
    match stop {
        None => frame["result"] = json!(turn.text.join("\n")),
        // An API error, as Claude Code ends a turn whose request failed: `success`,
        // `is_error`, the HTTP status, the message as the result.
        Some(Stop::Error {
            message,
            status: Some(status),
            ..
        }) => {
            frame["is_error"] = json!(true);
            frame["api_error_status"] = json!(status);
            frame["result"] = json!(format!("API Error: {message}"));
        }
        Some(stop) => {
            let (subtype, message, interrupted) = match stop {
                Stop::Interrupted => (
                    "error_during_execution".to_string(),
                    "interrupted by user".to_string(),
                    true,
                ),
                Stop::Error {
                    message, subtype, ..
                } => (subtype, message, false),
            };
            frame["subtype"] = json!(subtype);
            frame["is_error"] = json!(true);
            frame["interrupted"] = json!(interrupted);
            if interrupted {
                // As Claude Code ends an interrupted request: a cancelled turn, no error.
                frame["terminal_reason"] = json!("aborted_streaming");
            }
            frame["error"] = json!(message);
            frame["errors"] = json!([message]);
        }
    }
    frame
}

/// An `assistant` text frame whose text is [`PAD_MARK`] (oversize lines).
fn oversize_frame(session: &Session, message_id: &str) -> Value {
    json!({
        "type": "assistant",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": session.model,
            "content": [{ "type": "text", "text": PAD_MARK }],
        },
        "session_id": session.session_id,
    })
}

/// The string an oversize frame's padding replaces.
pub(super) const PAD_MARK: &str = "\u{1}";

/// Writes `frame` as one line of about `bytes` bytes (at least its envelope): its
/// [`PAD_MARK`] string is replaced by `x` padding streamed in pieces, never built
/// whole; the newline only if `newline` (else the line stays open).
pub(super) fn write_oversize(
    w: &mut impl Write,
    frame: &Value,
    bytes: u64,
    newline: bool,
) -> io::Result<()> {
    let text = frame.to_string();
    let (prefix, suffix) = text.split_once("\\u0001").unwrap_or((&text, ""));
    w.write_all(prefix.as_bytes())?;
    write_padding(
        w,
        bytes.saturating_sub((prefix.len() + suffix.len()) as u64),
    )?;
    w.write_all(suffix.as_bytes())?;
    if newline {
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// `n` bytes of `x`, 8 KiB at a time.
pub(super) fn write_padding(w: &mut impl Write, mut n: u64) -> io::Result<()> {
    let block = [b'x'; 8192];
    while n > 0 {
        let k = n.min(block.len() as u64) as usize;
        w.write_all(&block[..k])?;
        n -= k as u64;
    }
    Ok(())
}
