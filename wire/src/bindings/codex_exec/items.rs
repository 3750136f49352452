//! One `item.*` event of `codex exec --json` as CAP events. Codex sends an item's
//! whole state each time (`item.started`, `item.updated`, `item.completed`): text and
//! command output are reported as what was added since the last state, so nothing
//! is said twice.
//!
//! | item `type` | CAP |
//! |---|---|
//! | `agent_message` | `cap.text_chunk` (deltas) |
//! | `reasoning` | `cap.thought` (deltas) |
//! | `command_execution` | `cap.tool_call.start` / `.delta` (output) / `.end` (exit code) |
//! | `file_change` | a `file_change` tool call, and `cap.fs.change` per path when done |
//! | `mcp_tool_call` | a tool call `mcp__<server>__<tool>` |
//! | `web_search` | a `web_search` tool call |
//! | `todo_list` | `cap.plan` |
//! | `error` | `cap.error` `agent_warning` (Codex's non-fatal notices) |

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::mapper::Output;
use crate::protocol::{CapEvent, ErrorKind, FsEvent, PlanEntry, PlanStatus};

/// The `subscription_id` of the `cap.fs.change` events Codex's file changes give.
pub(super) const FS_SUBSCRIPTION: &str = "codex_exec";

/// What was said of the items seen so far.
#[derive(Debug, Default)]
pub(super) struct Items {
    /// Put before Codex's item ids (`item_1`, counted afresh by every process), so
    /// the message and call ids of different turns never meet.
    prefix: String,
    /// Bytes of an item's text (or command output) already reported.
    said: HashMap<String, usize>,
    /// Tool items whose `cap.tool_call.start` was sent.
    started: HashSet<String>,
    /// The last agent message of the turn.
    last_message: Option<String>,
}

fn str_of<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

impl Items {
    pub(super) fn new(prefix: String) -> Self {
        Items {
            prefix,
            ..Items::default()
        }
    }

    pub(super) fn take_last_message(&mut self) -> Option<String> {
        self.last_message.take()
    }

    /// Map one item in its current state (`done`: `item.completed`); `Err` gives back
    /// an item of a type this binding does not know.
    pub(super) fn on_item(
        &mut self,
        item: Value,
        done: bool,
        out: &mut Vec<Output>,
    ) -> Result<(), Value> {
        let id = format!("{}{}", self.prefix, str_of(&item, "id"));
        match str_of(&item, "type") {
            "agent_message" => {
                let text = str_of(&item, "text");
                if let Some(delta) = self.delta(&id, text) {
                    out.push(Output::Event(CapEvent::text(&id, delta)));
                }
                if done {
                    self.last_message = Some(text.to_owned());
                }
            }
            "reasoning" => {
                if let Some(delta) = self.delta(&id, str_of(&item, "text")) {
                    out.push(Output::Event(CapEvent::thought(&id, delta)));
                }
            }
            "command_execution" => {
                let input = json!({ "command": str_of(&item, "command") });
                self.start(&id, "command_execution", input, out);
                let output = str_of(&item, "aggregated_output");
                if let Some(delta) = self.delta(&id, output) {
                    out.push(Output::Event(CapEvent::tool_delta(&id, delta)));
                }
                if done {
                    let exit = item.get("exit_code").cloned().unwrap_or(Value::Null);
                    let failed = exit.as_i64().is_some_and(|c| c != 0) || failed(&item);
                    let result = json!({ "exit_code": exit, "output": output });
                    self.end(&id, Some(result), failed, out);
                }
            }
            "file_change" => {
                let changes = item.get("changes").cloned().unwrap_or(Value::Null);
                self.start(&id, "file_change", json!({ "changes": changes }), out);
                if done {
                    for change in changes.as_array().into_iter().flatten() {
                        let event = match str_of(change, "kind") {
                            "add" => FsEvent::Created,
                            "delete" => FsEvent::Deleted,
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
                    self.end(&id, None, failed(&item), out);
                }
            }
            "mcp_tool_call" => {
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
            "web_search" => {
                let input = json!({ "query": str_of(&item, "query") });
                self.start(&id, "web_search", input, out);
                if done {
                    self.end(&id, None, failed(&item), out);
                }
            }
            "todo_list" => {
                let entries = item
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, todo)| {
                        let status = if todo.get("completed").and_then(Value::as_bool) == Some(true)
                        {
                            PlanStatus::Completed
                        } else {
                            PlanStatus::Pending
                        };
                        PlanEntry::new(format!("{id}-{i}"), str_of(todo, "text"), status)
                    })
                    .collect();
                out.push(Output::Event(CapEvent::plan(entries)));
            }
            "error" => {
                let kind = ErrorKind::Other("agent_warning".into());
                let message = str_of(&item, "message");
                out.push(Output::Event(CapEvent::error(kind, message, false)));
            }
            _ => return Err(item),
        }
        if done {
            self.said.remove(&id);
        }
        Ok(())
    }

    /// What `now` adds to what was said of item `id` (all of it when Codex rewrote
    /// the start), `None` when nothing.
    fn delta<'a>(&mut self, id: &str, now: &'a str) -> Option<&'a str> {
        let said = self.said.entry(id.to_owned()).or_default();
        let from = if now.len() >= *said && now.is_char_boundary(*said) {
            *said
        } else {
            0
        };
        *said = now.len();
        let delta = &now[from..];
        (!delta.is_empty()).then_some(delta)
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

/// The item's `status` says it failed.
fn failed(item: &Value) -> bool {
    matches!(str_of(item, "status"), "failed" | "declined")
}
