//! What agents write on their pipes, read as the pump reads it: the bounded line
//! reader first, then the binding's mapper.

use capfleet_engine::protocol::Decision;
use capfleet_wire::bindings::acp::AcpMapper;
use capfleet_wire::bindings::codex_exec::{CodexExecMapper, Totals};
use capfleet_wire::bindings::stream_json::{PendingKind, StreamJsonMapper};
use capfleet_wire::process::{LineConfig, LineItem, LineReader};
use serde_json::{Value, json};

use super::{Framing, Memory, Target};

/// The line cap of these targets: small, so that oversize lines are common.
const MAX_LINE: usize = 4096;

/// `input` through the bounded line reader, in reads of 1 to 64 bytes (the first
/// byte picks), as a pipe delivers it: each item in order.
fn read_lines(input: &[u8], mut each: impl FnMut(LineItem)) -> u64 {
    let read_buf = 1 + input.first().map_or(0, |b| usize::from(*b) % 64);
    let mut reader = LineReader::with_config(
        input,
        LineConfig {
            max_line: MAX_LINE,
            read_buf,
        },
    );
    futures::executor::block_on(async {
        while let Some(item) = reader.next().await.expect("a slice reads without error") {
            each(item);
        }
    });
    reader.stats().bytes
}

/// The lines of `input` that reach a mapper (oversize ones are dropped and reported).
fn each_line(input: &[u8], mut each: impl FnMut(&[u8])) {
    read_lines(input, |item| match item {
        LineItem::Line(l) | LineItem::Unterminated(l) => each(&l),
        LineItem::Oversize { .. } => {}
    });
}

pub(super) const LINES: Target = Target {
    name: "lines",
    reads: "any agent's pipe: the bounded line reader every line-oriented binding reads through",
    framing: Framing::JsonLines,
    seeds: &["tests/fixtures/claude", "fuzz/seeds/codex_exec"],
    dict: &["\r", "\n", "\r\n", ""],
    run: lines,
    memory: Memory {
        fixed: 4 * MAX_LINE + (64 << 10),
        per_byte: 0,
    },
};

/// Every byte is accounted for, and the items are exactly the input's lines: those
/// over the cap dropped with their length, a `\r` before a `\n` taken off, the tail
/// without its `\n` last. Compared one by one as they come, so the heap measured is the
/// reader's.
fn lines(input: &[u8]) {
    let last = input.split(|&b| b == b'\n').count() - 1;
    let mut expected = input
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|&(i, s)| i < last || !s.is_empty())
        .map(|(i, s)| {
            let terminated = i < last;
            match s.len() > MAX_LINE {
                true => LineItem::Oversize {
                    len: s.len() as u64,
                    terminated,
                },
                false if terminated => LineItem::Line(s.strip_suffix(b"\r").unwrap_or(s).to_vec()),
                false => LineItem::Unterminated(s.to_vec()),
            }
        });
    let bytes = read_lines(input, |item| assert_eq!(Some(item), expected.next()));
    assert_eq!(expected.next(), None, "a line was not read");
    assert_eq!(bytes, input.len() as u64, "every byte is consumed once");
}

pub(super) const STREAM_JSON: Target = Target {
    name: "stream_json",
    reads: "Claude Code's stream-json: system, assistant, user, stream_event and result frames, and the control protocol (can_use_tool, control_cancel_request, control_response)",
    framing: Framing::JsonLines,
    seeds: &["tests/fixtures/claude"],
    dict: &[
        "type",
        "subtype",
        "system",
        "init",
        "assistant",
        "user",
        "result",
        "stream_event",
        "control_request",
        "control_response",
        "control_cancel_request",
        "request_id",
        "request",
        "can_use_tool",
        "tool_name",
        "input",
        "tool_use_id",
        "message",
        "content",
        "text",
        "thinking",
        "tool_use",
        "tool_result",
        "id",
        "name",
        "session_id",
        "usage",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "total_cost_usd",
        "is_error",
        "success",
        "error",
        "error_max_turns",
        "error_during_execution",
        "event",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "delta",
        "text_delta",
        "thinking_delta",
        "input_json_delta",
        "partial_json",
        "index",
        "model",
        "stop_reason",
        "end_turn",
        "permission_suggestions",
        "AskUserQuestion",
        "questions",
        "question",
        "options",
        "label",
        "multiSelect",
        "TodoWrite",
        "todos",
        "status",
        "activeForm",
        "Bash",
        "command",
        "Edit",
        "file_path",
        "interrupt",
        "response",
        "duration_ms",
        "num_turns",
        "api_error_status",
    ],
    run: stream_json,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 24,
    },
};

/// The mapper over the lines, then an answer to each request left pending, as the
/// session gives them: each answer is a `control_response` line naming its request.
fn stream_json(input: &[u8]) {
    let mut m = StreamJsonMapper::new()
        .with_turns()
        .with_max_line_bytes(MAX_LINE);
    m.begin_turn();
    let mut out = Vec::new();
    each_line(input, |line| {
        m.on_line(line, &mut out);
        out.clear();
    });
    let ids: Vec<String> = m.pending_ids().map(str::to_owned).collect();
    for (i, id) in ids.iter().enumerate() {
        let answer = match m.pending(id).map(|p| p.kind) {
            Some(PendingKind::Ask) => m.respond_ask(id, &json!({ "q": "a" })),
            _ if i % 2 == 0 => m.respond_permission(id, Decision::AllowOnce, None),
            _ => m.decline(id, "denied by the fuzz test"),
        };
        if let Ok(line) = answer {
            let v: Value = serde_json::from_str(&line).expect("an answer is one JSON line");
            assert_eq!(v["type"], "control_response");
            assert_eq!(v["response"]["request_id"].as_str(), Some(id.as_str()));
        }
    }
}

pub(super) const CODEX_EXEC: Target = Target {
    name: "codex_exec",
    reads: "`codex exec --json` JSONL: thread, turn and item events",
    framing: Framing::JsonLines,
    seeds: &["fuzz/seeds/codex_exec"],
    dict: &[
        "type",
        "thread.started",
        "thread_id",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
        "message",
        "item",
        "id",
        "agent_message",
        "reasoning",
        "command_execution",
        "command",
        "aggregated_output",
        "exit_code",
        "status",
        "in_progress",
        "completed",
        "failed",
        "file_change",
        "changes",
        "path",
        "kind",
        "add",
        "delete",
        "update",
        "mcp_tool_call",
        "server",
        "tool",
        "arguments",
        "result",
        "web_search",
        "query",
        "todo_list",
        "items",
        "text",
        "usage",
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
    ],
    run: codex_exec,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 24,
    },
};

fn codex_exec(input: &[u8]) {
    let mut m = CodexExecMapper::new(1, Some("gpt-5".to_owned()), Totals::default());
    let mut out = Vec::new();
    each_line(input, |line| {
        m.on_line(line, &mut out);
        out.clear();
    });
}

pub(super) const ACP_UPDATE: Target = Target {
    name: "acp_update",
    reads: "ACP `session/update` notifications' params: message and thought chunks, tool calls and their updates (diffs, terminals), plans, usage",
    framing: Framing::JsonLines,
    seeds: &["fuzz/seeds/acp_update"],
    dict: &[
        "sessionId",
        "update",
        "sessionUpdate",
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "entries",
        "priority",
        "status",
        "pending",
        "in_progress",
        "completed",
        "failed",
        "toolCallId",
        "title",
        "kind",
        "read",
        "edit",
        "execute",
        "content",
        "type",
        "text",
        "diff",
        "path",
        "oldText",
        "newText",
        "terminal",
        "terminalId",
        "locations",
        "line",
        "rawInput",
        "rawOutput",
        "usage_update",
        "used",
        "size",
        "cost",
        "amount",
        "currency",
        "resource_link",
        "uri",
        "available_commands_update",
        "current_mode_update",
        "_meta",
    ],
    run: acp_update,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 32,
    },
};

/// Each line as the connection hands the mapper a notification's params.
fn acp_update(input: &[u8]) {
    let mut m = AcpMapper::new();
    each_line(input, |line| {
        let params: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
        drop(m.on_update(&params));
    });
    m.next_turn();
}
