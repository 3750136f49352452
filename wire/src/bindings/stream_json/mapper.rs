//! [`StreamJsonMapper`]: the per-session state machine from stream-json lines to CAP
//! events (spec Appendix C.1, as Claude Code 2.1 actually speaks it).
//!
//! | frame | output |
//! |---|---|
//! | `system`/`init` | `cap.session.ready` (first per process; later ones update [`SessionInfo`]) |
//! | `stream_event` `content_block_delta` `text_delta` / `thinking_delta` | `cap.text_chunk` (assistant) / `cap.thought` |
//! | `assistant` `text` / `thinking` block | the part not already streamed, as above |
//! | `assistant` `tool_use` block | `cap.tool_call.start` (once per id); a `TodoWrite` call also a `cap.plan` |
//! | `user` `tool_result` block | `cap.tool_call.end` |
//! | `result` | `cap.usage` [+ `cap.error`] + [`Output::TurnEnd`] (see `result.rs`) |
//! | `control_request` `can_use_tool` | `cap.permission.request`, or `cap.ask_user` for `AskUserQuestion` |
//! | `control_request` other | [`Output::UnsupportedControlRequest`] |
//! | `control_cancel_request` | [`Output::PermissionWithdrawn`] |
//! | `control_response` | [`Output::ControlAck`] |
//! | `artifact` (the fields of a `cap.artifact`) | `cap.artifact`; invalid ones are malformed |
//! | `rate_limit_event` | `cap.error` `rate_limit` or `rate_limit_warning` (see `rate_limit.rs`) |
//! | anything else well-formed | nothing; counted in `ignored_frames` |
//! | not a JSON object / too long | `cap.error` `parse_failed`; counted in `malformed_frames` |
//! | a turn's frame (`assistant`, `user`, `stream_event`, `artifact`, `result`) before `init` or before any prompt, a `result` outside any turn (a mapper [`StreamJsonMapper::with_turns`]) | `cap.error` `stray_frame`, never part of a turn (its text, its end, its cost); counted in `stray_frames` |
//!
//! Assistant snapshots' `usage` is never read (it is the `message_start` value).
//!
//! `_meta` (vendor namespace `claude.`): `claude.parent_tool_use_id` on events from
//! a frame that has one (sub-agent output); `claude.tool_use_id` and
//! `claude.description` on permission requests and asks. Frame `uuid`s are not
//! copied: that would cost an allocation per event on the hot path, and the journal
//! numbers events itself.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use super::control::PendingRequest;
use super::frames::{
    Block, Content, ControlResponseFrame, Frame, MessageFrame, StreamEventFrame, SystemFrame, opt,
};
use super::output::{ControlAck, MapperStats, Output};
use super::streaming::{BlockKind, StreamTracker, block_event};
use super::todos;
use crate::bindings::STRAY_FRAME;
use crate::protocol::{CapEvent, ErrorKind, HasMeta, Nullable};

/// Default limit of one line; longer lines are counted malformed.
pub(crate) const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// At most this many bytes of a bad line are quoted in its `cap.error`.
pub(crate) const EXCERPT_BYTES: usize = 200;

/// What the latest `system/init` said about the session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionInfo {
    /// Claude's session id: what `--resume` takes.
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub tools: Vec<String>,
    pub cwd: Option<String>,
    pub permission_mode: Option<String>,
}

/// The stream-json → CAP state machine of one session (across process restarts).
#[derive(Debug)]
pub struct StreamJsonMapper {
    pub(super) session: SessionInfo,
    ready_sent: bool,
    pub(super) stats: MapperStats,
    max_line_bytes: usize,
    stream: StreamTracker,
    /// Tool calls started and not ended, with their start time.
    pub(super) tools: HashMap<String, Instant>,
    pub(super) pending: HashMap<String, PendingRequest>,
    /// `message.model` of the turn's latest assistant message.
    pub(super) turn_model: Option<String>,
    /// The turn saw Claude's `[Request interrupted by user…]` marker.
    pub(super) turn_interrupted: bool,
    /// Cumulative `total_cost_usd` of this process so far.
    pub(super) cost_seen: f64,
    /// Told of every turn ([`Self::with_turns`]): a `result` outside one is stray.
    track_turns: bool,
    /// A prompt was sent and its `result` has not come yet.
    in_turn: bool,
    /// A prompt was sent to this process.
    prompted: bool,
}

impl Default for StreamJsonMapper {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamJsonMapper {
    pub fn new() -> Self {
        StreamJsonMapper {
            session: SessionInfo::default(),
            ready_sent: false,
            stats: MapperStats::default(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            stream: StreamTracker::default(),
            tools: HashMap::new(),
            pending: HashMap::new(),
            turn_model: None,
            turn_interrupted: false,
            cost_seen: 0.0,
            track_turns: false,
            in_turn: false,
            prompted: false,
        }
    }

    /// The caller tells each turn's start ([`Self::begin_turn`]), as a driver does: a
    /// turn's frame before the process's `init` or before its first prompt, and a
    /// `result` while no turn is open, are stray (reported, counted, never a turn's
    /// text, end or cost). Without it (a replay of recorded lines) every frame counts.
    pub fn with_turns(mut self) -> Self {
        self.track_turns = true;
        self
    }

    /// A prompt was sent: its turn is open until its `result`.
    pub fn begin_turn(&mut self) {
        self.in_turn = true;
        self.prompted = true;
    }

    /// Lines longer than `max` bytes are rejected as malformed without parsing.
    pub fn with_max_line_bytes(mut self, max: usize) -> Self {
        self.max_line_bytes = max;
        self
    }

    pub fn session(&self) -> &SessionInfo {
        &self.session
    }

    pub fn stats(&self) -> MapperStats {
        self.stats
    }

    /// A new agent process starts (e.g. `--resume`): its `init` yields a new
    /// `cap.session.ready`, its cumulative cost starts from zero, and whatever was
    /// pending or streaming in the old process is forgotten (look at
    /// [`Self::pending_ids`] first to fail those requests).
    pub fn process_restarted(&mut self) {
        self.ready_sent = false;
        self.prompted = false;
        self.cost_seen = 0.0;
        self.pending.clear();
        self.end_turn_state();
    }

    pub(super) fn end_turn_state(&mut self) {
        self.stream.clear();
        self.tools.clear();
        self.turn_model = None;
        self.turn_interrupted = false;
    }

    pub(super) fn emit(&mut self, out: &mut Vec<Output>, event: CapEvent) {
        self.stats.events += 1;
        out.push(Output::Event(event));
    }

    /// Maps one line of the agent's stdout (with or without its newline).
    pub fn on_line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        self.stats.frames += 1;
        if line.len() > self.max_line_bytes {
            let msg = format!(
                "stream-json line of {} bytes exceeds the {}-byte limit",
                line.len(),
                self.max_line_bytes
            );
            return self.malformed(line, msg, out);
        }
        let frame = match Frame::parse(line) {
            Ok(f) => f,
            Err(e) => return self.malformed(line, format!("invalid stream-json frame: {e}"), out),
        };
        if let Some((kind, reason)) = self.stray_frame(&frame) {
            return self.stray(line, kind, reason, out);
        }
        let handled = match frame {
            Frame::System(f) => self.on_system(f, out),
            Frame::Assistant(f) => self.on_assistant(f, out),
            Frame::User(f) => self.on_user(f, out),
            Frame::StreamEvent(f) => self.on_stream_event(f, out),
            Frame::Result(f) => {
                self.in_turn = false;
                self.on_result(*f, out);
                true
            }
            Frame::ControlRequest(f) => self.on_control_request(f, out),
            Frame::ControlCancelRequest(f) => self.on_control_cancel(f, out),
            Frame::ControlResponse(f) => on_control_response(f, out),
            Frame::Artifact(fields) => {
                match artifact(fields) {
                    Ok(event) => self.emit(out, event),
                    Err(msg) => self.malformed(line, msg, out),
                }
                true
            }
            Frame::RateLimitEvent(f) => self.on_rate_limit_event(f, out),
            Frame::Unknown(ty) => {
                tracing::trace!(
                    frame_type = ty.as_str(),
                    "stream-json frame of a type not mapped"
                );
                false
            }
            Frame::Untyped => false,
        };
        if !handled {
            self.stats.ignored_frames += 1;
        }
    }

    fn malformed(&mut self, line: &[u8], message: String, out: &mut Vec<Output>) {
        self.stats.malformed_frames += 1;
        let details = json!({"excerpt": excerpt(line), "line_bytes": line.len()});
        self.emit(out, bad_line(ErrorKind::ParseFailed, message, details));
    }

    /// Why `frame` now would be stray (its type and why), if it would: a turn's frame
    /// before the process's `init` or before its first prompt (text an agent writes
    /// then answers nothing), a `result` outside any turn. System and control frames
    /// never are.
    fn stray_frame(&self, frame: &Frame<'_>) -> Option<(&'static str, &'static str)> {
        let (kind, ends_turn) = match frame {
            Frame::Result(_) => ("result", true),
            Frame::Assistant(_) => ("assistant", false),
            Frame::User(_) => ("user", false),
            Frame::StreamEvent(_) => ("stream_event", false),
            Frame::Artifact(_) => ("artifact", false),
            Frame::System(_)
            | Frame::RateLimitEvent(_)
            | Frame::ControlRequest(_)
            | Frame::ControlCancelRequest(_)
            | Frame::ControlResponse(_)
            | Frame::Unknown(_)
            | Frame::Untyped => return None,
        };
        let reason = if !self.track_turns {
            return None;
        } else if !self.ready_sent {
            "before the agent's init"
        } else if ends_turn && !self.in_turn {
            "outside any turn"
        } else if !self.prompted {
            "before any prompt"
        } else {
            return None;
        };
        Some((kind, reason))
    }

    fn stray(&mut self, line: &[u8], frame: &str, reason: &str, out: &mut Vec<Output>) {
        self.stats.stray_frames += 1;
        let message =
            format!("stray `{frame}` frame {reason}: ignored (not part of a turn, no cost)");
        let details = json!({"frame": frame, "reason": reason, "excerpt": excerpt(line)});
        self.emit(
            out,
            bad_line(ErrorKind::Other(STRAY_FRAME.into()), message, details),
        );
    }

    fn on_system(&mut self, f: SystemFrame<'_>, out: &mut Vec<Output>) -> bool {
        if opt(&f.subtype) != Some("init") {
            return false;
        }
        let s = &mut self.session;
        set(&mut s.session_id, opt(&f.session_id));
        set(&mut s.model, opt(&f.model));
        set(&mut s.cwd, opt(&f.cwd));
        set(&mut s.permission_mode, opt(&f.permission_mode));
        if let Some(tools) = f.tools {
            s.tools = tools.into_iter().map(|t| t.0.into_owned()).collect();
        }
        if !self.ready_sent {
            self.ready_sent = true;
            let event = CapEvent::ready(self.session.session_id.as_deref());
            self.emit(out, event);
        }
        true
    }

    fn on_assistant(&mut self, f: MessageFrame<'_>, out: &mut Vec<Output>) -> bool {
        let parent = opt(&f.parent_tool_use_id);
        let Some(msg) = f.message else { return false };
        if let Some(model) = opt(&msg.model) {
            set(&mut self.turn_model, Some(model));
        }
        let Some(Content::Blocks(blocks)) = msg.content else {
            return false;
        };
        let mid = opt(&msg.id);
        let before = out.len();
        for b in &blocks {
            match opt(&b.kind) {
                Some("text") => self.snapshot(mid, BlockKind::Text, opt(&b.text), parent, out),
                Some("thinking") => {
                    let text = opt(&b.thinking).or(opt(&b.text));
                    self.snapshot(mid, BlockKind::Thinking, text, parent, out)
                }
                Some("tool_use") => self.tool_use(b, parent, out),
                _ => {}
            }
        }
        out.len() > before || !blocks.is_empty()
    }

    /// Emits the part of a snapshot block that was not streamed already.
    fn snapshot(
        &mut self,
        mid: Option<&str>,
        kind: BlockKind,
        text: Option<&str>,
        parent: Option<&str>,
        out: &mut Vec<Output>,
    ) {
        let Some(text) = text else { return };
        let missing = self.stream.snapshot(mid, kind, text);
        if !missing.is_empty() {
            let event = block_event(kind, mid, missing, parent);
            self.emit(out, event);
        }
    }

    fn tool_use(&mut self, b: &Block<'_>, parent: Option<&str>, out: &mut Vec<Output>) {
        let Some(id) = opt(&b.id) else { return };
        if self.tools.contains_key(id) {
            return;
        }
        self.tools.insert(id.to_owned(), Instant::now());
        let input = b.input.clone().unwrap_or_else(|| json!({}));
        let name = opt(&b.name).unwrap_or("");
        let plan = (name == todos::TODO_TOOL)
            .then(|| todos::plan_of(&input))
            .flatten();
        let event = with_parent(CapEvent::tool_start(id, name, input), parent);
        self.emit(out, event);
        if let Some(plan) = plan {
            self.emit(out, with_parent(plan, parent));
        }
    }

    fn on_user(&mut self, f: MessageFrame<'_>, out: &mut Vec<Output>) -> bool {
        let parent = opt(&f.parent_tool_use_id);
        let Some(Content::Blocks(blocks)) = f.message.and_then(|m| m.content) else {
            return false;
        };
        let mut handled = false;
        for b in blocks {
            match opt(&b.kind) {
                Some("tool_result") => {
                    let Some(id) = opt(&b.tool_use_id) else {
                        continue;
                    };
                    // The tool ran or was refused: its permission request is settled.
                    self.pending
                        .retain(|_, p| p.tool_use_id.as_deref() != Some(id));
                    let duration = self
                        .tools
                        .remove(id)
                        .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX));
                    let end =
                        CapEvent::tool_end(id, b.content, b.is_error.unwrap_or(false), duration);
                    self.emit(out, with_parent(end, parent));
                    handled = true;
                }
                Some("text")
                    if opt(&b.text)
                        .is_some_and(|t| t.starts_with("[Request interrupted by user")) =>
                {
                    self.turn_interrupted = true;
                    handled = true;
                }
                _ => {}
            }
        }
        handled
    }

    fn on_stream_event(&mut self, f: StreamEventFrame<'_>, out: &mut Vec<Output>) -> bool {
        let Some(ev) = f.event else { return false };
        match opt(&ev.kind) {
            Some("message_start") => {
                let id = ev.message.as_ref().and_then(|m| opt(&m.id));
                self.stream.message_start(id);
                true
            }
            Some("content_block_delta") => {
                let Some(d) = ev.delta else { return false };
                let (kind, text) = match opt(&d.kind) {
                    Some("text_delta") => (BlockKind::Text, opt(&d.text)),
                    Some("thinking_delta") => {
                        (BlockKind::Thinking, opt(&d.thinking).or(opt(&d.text)))
                    }
                    _ => return false,
                };
                let Some(text) = text.filter(|t| !t.is_empty()) else {
                    return false;
                };
                let Some(mid) = self.stream.delta(ev.index, kind, text) else {
                    return false;
                };
                let event = block_event(kind, mid, text, opt(&f.parent_tool_use_id));
                self.emit(out, event);
                true
            }
            _ => false,
        }
    }
}

/// The first [`EXCERPT_BYTES`] of a line, cut at a character boundary.
fn excerpt(line: &[u8]) -> String {
    let mut end = line.len().min(EXCERPT_BYTES);
    while end > 0 && end < line.len() && (line[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    String::from_utf8_lossy(&line[..end]).into_owned()
}

/// A non-retryable `cap.error` about one line of output, with its details.
fn bad_line(code: ErrorKind, message: String, details: Value) -> CapEvent {
    let mut event = CapEvent::error(code, message, false);
    if let CapEvent::Error(e) = &mut event {
        e.details = Nullable::Value(details);
    }
    event
}

/// An `artifact` frame as the `cap.artifact` it carries, validated like any event.
fn artifact(mut fields: serde_json::Map<String, Value>) -> Result<CapEvent, String> {
    fields.remove("type");
    fields.insert("kind".into(), Value::String("cap.artifact".into()));
    crate::protocol::decode_value(Value::Object(fields))
        .map_err(|e| format!("invalid artifact frame: {e}"))
}

fn on_control_response(f: ControlResponseFrame<'_>, out: &mut Vec<Output>) -> bool {
    let Some(r) = f.response else { return false };
    let Some(request_id) = opt(&r.request_id) else {
        return false;
    };
    let result = match opt(&r.subtype) {
        Some("success") => Ok(r.response),
        _ => Err(opt(&r.error).unwrap_or("control request failed").to_owned()),
    };
    out.push(Output::ControlAck(ControlAck {
        request_id: request_id.to_owned(),
        result,
    }));
    true
}

/// Replaces `slot` when `value` is given and differs (no allocation when equal).
fn set(slot: &mut Option<String>, value: Option<&str>) {
    if let Some(v) = value
        && slot.as_deref() != Some(v)
    {
        *slot = Some(v.to_owned());
    }
}

/// `_meta` key holding the frame's `parent_tool_use_id` (sub-agent output).
pub(crate) const META_PARENT_TOOL_USE_ID: &str = "claude.parent_tool_use_id";

pub(super) fn with_parent(mut event: CapEvent, parent: Option<&str>) -> CapEvent {
    if let Some(p) = parent {
        event.set_meta(META_PARENT_TOOL_USE_ID, Value::from(p));
    }
    event
}
