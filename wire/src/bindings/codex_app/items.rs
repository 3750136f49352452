//! One app-server `ThreadItem` (`item/started`, `item/completed`) and its deltas as CAP
//! events. Text, reasoning and command output stream as deltas
//! (`item/agentMessage/delta`, `item/reasoning/textDelta`,
//! `item/commandExecution/outputDelta`); an item whose completion brings text no
//! delta said (a reply Codex did not stream) has it said then, once.
//!
//! | item `type` | CAP |
//! |---|---|
//! | `agentMessage` | `cap.text_chunk` |
//! | `reasoning` | `cap.thought` |
//! | `commandExecution` | `cap.tool_call.start` / `.delta` (output) / `.end` (exit code; `declined`: an error) |
//! | `fileChange` | a `file_change` tool call, and `cap.fs.change` per path when done |
//! | `mcpToolCall` | a tool call `mcp__<server>__<tool>` |
//! | `webSearch` | a `web_search` tool call |
//! | `userMessage`, `hookPrompt`, `plan`, `contextCompaction`, … | nothing (the prompt is the session's; plans come as `turn/plan/updated`) |

use std::collections::HashSet;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::frames::ItemHead;
use super::mapper::Output;
use crate::protocol::{CapEvent, FsEvent};

/// The `subscription_id` of the `cap.fs.change` events of Codex's file changes (the
/// same as `codex exec`'s: one agent, one source).
pub(super) const FS_SUBSCRIPTION: &str = "codex_exec";

/// Item types that give no CAP event.
const SILENT: &[&str] = &[
    "userMessage",
    "hookPrompt",
    "plan",
    "contextCompaction",
    "imageView",
    "enteredReviewMode",
    "exitedReviewMode",
    "sleep",
];

fn str_of<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

/// What was said of the turn's items.
#[derive(Debug, Default)]
pub(super) struct Items {
    /// Items some delta was said of.
    streamed: HashSet<String>,
    /// Tool items whose start was said.
    started: HashSet<String>,
    pub(super) last_message: Option<String>,
}

impl Items {
    /// A delta of item `id` (already prefixed).
    pub(super) fn delta(&mut self, id: String, delta: String, kind: Delta, out: &mut Vec<Output>) {
        if delta.is_empty() {
            return;
        }
        let event = match kind {
            Delta::Text => CapEvent::text(&id, delta),
            Delta::Thought => CapEvent::thought(&id, delta),
            Delta::Output => CapEvent::tool_delta(&id, delta),
        };
        self.streamed.insert(id);
        out.push(Output::Event(event));
    }

    /// An item in its current state (`done`: completed), read by its `head`; the
    /// whole item (`raw`) is parsed only for the types that need more than the head
    /// (not an agent message: the hot path of a long answer). `Err` gives back the
    /// type of an item this binding does not know.
    pub(super) fn on_item(
        &mut self,
        id: String,
        head: &ItemHead<'_>,
        raw: &RawValue,
        done: bool,
        out: &mut Vec<Output>,
    ) -> Result<(), String> {
        // Valid JSON already (the line parsed): only a nesting past serde_json's
        // limit fails, and leaves the item's fields empty.
        let item = || serde_json::from_str::<Value>(raw.get()).unwrap_or_default();
        match head.kind.as_ref() {
            "agentMessage" => {
                if done {
                    let text = head.text.as_deref().unwrap_or("");
                    self.unsaid(&id, text, Delta::Text, out);
                    self.last_message = Some(text.to_owned());
                }
            }
            "reasoning" => {
                if done {
                    let item = item();
                    let text = ["content", "summary"]
                        .iter()
                        .filter_map(|k| item.get(*k).and_then(Value::as_array))
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n");
                    self.unsaid(&id, &text, Delta::Thought, out);
                }
            }
            "commandExecution" => {
                let item = item();
                let input =
                    json!({ "command": str_of(&item, "command"), "cwd": str_of(&item, "cwd") });
                self.start(&id, "command_execution", input, out);
                if done {
                    let output = str_of(&item, "aggregatedOutput");
                    self.unsaid(&id, output, Delta::Output, out);
                    let exit = item.get("exitCode").cloned().unwrap_or(Value::Null);
                    let failed = exit.as_i64().is_some_and(|c| c != 0) || failed(&item);
                    let result = json!({ "exit_code": exit, "output": output, "status": str_of(&item, "status") });
                    self.end(&id, Some(result), failed, out);
                }
            }
            "fileChange" => {
                let item = item();
                let changes = item.get("changes").cloned().unwrap_or(Value::Null);
                self.start(&id, "file_change", json!({ "changes": changes }), out);
                if done {
                    if str_of(&item, "status") == "completed" {
                        for change in changes.as_array().into_iter().flatten() {
                            let event = match change.pointer("/kind/type").and_then(Value::as_str) {
                                Some("add") => FsEvent::Created,
                                Some("delete") => FsEvent::Deleted,
                                _ => FsEvent::Modified,
                            };
                            let path = str_of(change, "path");
                            out.push(Output::Event(CapEvent::fs_change(
                                FS_SUBSCRIPTION,
                                path,
                                event,
                                None,
                            )));
                        }
                    }
                    let result = json!({ "status": str_of(&item, "status") });
                    self.end(&id, Some(result), failed(&item), out);
                }
            }
            "mcpToolCall" => {
                let item = item();
                let name = format!(
                    "mcp__{}__{}",
                    str_of(&item, "server"),
                    str_of(&item, "tool")
                );
                let input = item.get("arguments").cloned().unwrap_or(Value::Null);
                self.start(&id, &name, input, out);
                if done {
                    let error = item.get("error").filter(|e| !e.is_null()).cloned();
                    let is_error = error.is_some() || failed(&item);
                    let result = error.or_else(|| item.get("result").cloned());
                    self.end(&id, result, is_error, out);
                }
            }
            "webSearch" => {
                let item = item();
                let input = json!({ "query": str_of(&item, "query") });
                self.start(&id, "web_search", input, out);
                if done {
                    self.end(&id, None, failed(&item), out);
                }
            }
            kind if SILENT.contains(&kind) => {}
            other => return Err(other.to_owned()),
        }
        if done {
            self.streamed.remove(&id);
        }
        Ok(())
    }

    /// Say `text` of item `id` unless a delta already said some of it.
    fn unsaid(&mut self, id: &str, text: &str, kind: Delta, out: &mut Vec<Output>) {
        if !self.streamed.contains(id) {
            self.delta(id.to_owned(), text.to_owned(), kind, out);
        }
    }

    fn start(&mut self, id: &str, name: &str, input: Value, out: &mut Vec<Output>) {
        if self.started.insert(id.to_owned()) {
            out.push(Output::Event(CapEvent::tool_start(id, name, input)));
        }
    }

    fn end(&mut self, id: &str, result: Option<Value>, is_error: bool, out: &mut Vec<Output>) {
        self.started.remove(id);
        out.push(Output::Event(CapEvent::tool_end(
            id, result, is_error, None,
        )));
    }
}

/// What a delta notification streams.
#[derive(Debug, Clone, Copy)]
pub(super) enum Delta {
    Text,
    Thought,
    Output,
}

/// The item's `status` says it failed (or was declined).
fn failed(item: &Value) -> bool {
    matches!(str_of(item, "status"), "failed" | "declined")
}
