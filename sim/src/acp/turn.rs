//! One ACP prompt turn of the sim: script steps as `session/update`s, gated tools
//! as `session/request_permission`, `rpc` / `run` steps as calls to the client's
//! `fs/*`, `terminal/*` and `_cap/*`, and the `session/prompt` response at the end.
//!
//! `ask` steps end the turn with an error: ACP v1 has no elicitation.

use std::io;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp::{Incoming, Wire};
use crate::frames::PAD_MARK;
use crate::script::edit::{Change, FileEdit};
use crate::script::steps::{
    Ask, FloodGen, Flow, Frontend, PlanEntry, Stop, ToolStep, Usage, chunks,
};

/// JSON-RPC "internal error": how a scripted `error` step fails the prompt.
const INTERNAL_ERROR: i64 = -32603;

pub(crate) struct AcpTurn<'w> {
    wire: &'w mut Wire,
    prompt_id: Value,
    tools: u64,
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// The ACP tool kind a gated step's risk stands for (read < edit < execute).
fn kind_of(risk: Option<&str>) -> &'static str {
    match risk {
        Some("low") => "read",
        Some("high") => "execute",
        Some(_) => "edit",
        None => "other",
    }
}

/// ACP plan statuses are pending / in_progress / completed.
fn plan_status(status: &str) -> &'static str {
    match status {
        "in_progress" => "in_progress",
        "completed" | "cancelled" => "completed",
        _ => "pending",
    }
}

/// The message of a JSON-RPC error object.
fn message_of(e: &Value) -> String {
    e["message"].as_str().unwrap_or("error").to_owned()
}

impl<'w> AcpTurn<'w> {
    pub(crate) fn new(wire: &'w mut Wire, prompt_id: Value) -> Self {
        AcpTurn {
            wire,
            prompt_id,
            tools: 0,
        }
    }

    fn message(&mut self, text: &str) -> io::Result<()> {
        self.wire.keep("agent", text)?;
        let u = json!({ "sessionUpdate": "agent_message_chunk", "content": text_block(text) });
        self.wire.update(u)
    }

    /// Sleep `d`, watching for a cancel.
    fn wait(&mut self, d: Duration) -> io::Result<Flow> {
        let deadline = Instant::now() + d;
        loop {
            if self.wire.cancelled {
                return Ok(Flow::Stop(Stop::Interrupted));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Flow::Next);
            }
            if let Some(Incoming::Eof) = self.wire.recv(Some(left))? {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "client gone"));
            }
        }
    }

    fn tool_update(&mut self, id: &str, fields: Value) -> io::Result<()> {
        let mut u = json!({ "sessionUpdate": "tool_call_update", "toolCallId": id });
        if let (Some(u), Some(f)) = (u.as_object_mut(), fields.as_object()) {
            u.extend(f.clone());
        }
        self.wire.update(u)
    }

    /// Ask the client; true when an allow option was selected.
    fn permit(&mut self, id: &str, tool: &ToolStep, kind: &str) -> io::Result<Option<bool>> {
        let options = json!([
            { "optionId": "allow", "name": "Allow", "kind": "allow_once" },
            { "optionId": "always", "name": "Always allow", "kind": "allow_always" },
            { "optionId": "reject", "name": "Reject", "kind": "reject_once" },
        ]);
        let call = json!({ "toolCallId": id, "title": tool.name, "kind": kind,
                           "rawInput": tool.input });
        let params = json!({ "toolCall": call, "options": options });
        let answer = self.wire.call("session/request_permission", params)?;
        let outcome = answer.unwrap_or_default();
        let outcome = &outcome["outcome"];
        if outcome["outcome"] == "cancelled" || self.wire.cancelled {
            return Ok(None);
        }
        Ok(Some(matches!(
            outcome["optionId"].as_str(),
            Some("allow" | "always")
        )))
    }
}

impl Frontend for AcpTurn<'_> {
    fn begin_turn(&mut self, _prompt: &str) -> io::Result<()> {
        Ok(())
    }

    fn say(&mut self, text: &str, chunk: usize, delay: Duration) -> io::Result<Flow> {
        for (i, piece) in chunks(text, chunk).into_iter().enumerate() {
            if i > 0
                && let Flow::Stop(s) = self.wait(delay)?
            {
                return Ok(Flow::Stop(s));
            }
            self.message(piece)?;
        }
        self.wait(Duration::ZERO)
    }

    fn think(&mut self, text: &str) -> io::Result<Flow> {
        let u = json!({ "sessionUpdate": "agent_thought_chunk", "content": text_block(text) });
        self.wire.update(u)?;
        Ok(Flow::Next)
    }

    fn tool(&mut self, tool: &ToolStep) -> io::Result<Flow> {
        self.tools += 1;
        let id = format!("sim-tool-{}", self.tools);
        let kind = kind_of(tool.risk.as_deref());
        let start = json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": tool.name,
                            "kind": kind, "status": "pending", "rawInput": tool.input });
        self.wire.update(start)?;
        if tool.risk.is_some() {
            match self.permit(&id, tool, kind)? {
                None => {
                    self.tool_update(&id, json!({ "status": "failed" }))?;
                    return Ok(Flow::Stop(Stop::Interrupted));
                }
                Some(false) => {
                    let denied = json!({ "status": "failed", "rawOutput": "denied" });
                    self.tool_update(&id, denied)?;
                    return Ok(Flow::Next);
                }
                Some(true) => {}
            }
        }
        self.tool_update(&id, json!({ "status": "in_progress" }))?;
        for d in &tool.deltas {
            let content = json!([{ "type": "content", "content": text_block(d) }]);
            self.tool_update(&id, json!({ "content": content }))?;
        }
        if let Flow::Stop(s) = self.wait(Duration::from_millis(tool.duration_ms))? {
            return Ok(Flow::Stop(s));
        }
        let status = if tool.is_error { "failed" } else { "completed" };
        let end = json!({ "status": status, "rawOutput": tool.final_output() });
        self.tool_update(&id, end)?;
        Ok(Flow::Next)
    }

    /// A file step as an ACP edit: a text write carries `diff` content.
    fn edit(&mut self, edit: &FileEdit) -> io::Result<Flow> {
        let applied = edit.apply();
        let tool = edit.as_tool(&applied);
        self.tools += 1;
        let id = format!("sim-tool-{}", self.tools);
        let content = match &applied {
            Ok(a) if a.new.is_some() => json!([{ "type": "diff", "path": a.path,
                                                 "oldText": a.old, "newText": a.new }]),
            _ => json!([]),
        };
        let kind = if edit.change == Change::Delete {
            "delete"
        } else {
            "edit"
        };
        let start = json!({ "sessionUpdate": "tool_call", "toolCallId": id, "title": tool.name,
                            "kind": kind, "status": "in_progress", "rawInput": tool.input,
                            "content": content });
        self.wire.update(start)?;
        let status = if tool.is_error { "failed" } else { "completed" };
        self.tool_update(
            &id,
            json!({ "status": status, "rawOutput": tool.final_output() }),
        )?;
        Ok(Flow::Next)
    }

    fn plan(&mut self, entries: &[PlanEntry]) -> io::Result<Flow> {
        let entries: Vec<Value> = entries
            .iter()
            .map(|e| {
                json!({ "content": e.content, "status": plan_status(&e.status),
                        "priority": e.priority.as_deref().unwrap_or("medium") })
            })
            .collect();
        self.wire
            .update(json!({ "sessionUpdate": "plan", "entries": entries }))?;
        Ok(Flow::Next)
    }

    fn ask(&mut self, ask: &Ask) -> io::Result<Flow> {
        Ok(Flow::Stop(Stop::Error {
            message: format!("ask {:?}: ACP v1 has no elicitation", ask.question),
            subtype: "error_during_execution".into(),
            status: None,
        }))
    }

    fn usage(&mut self, usage: &Usage) -> io::Result<Flow> {
        let used = usage.input_tokens + usage.output_tokens;
        let u = json!({ "sessionUpdate": "usage_update", "used": used, "size": 200_000 });
        self.wire.update(u)?;
        Ok(Flow::Next)
    }

    fn pause(&mut self, duration: Duration) -> io::Result<Flow> {
        self.wait(duration)
    }

    fn flood(&mut self, bytes: u64, chunk: usize) -> io::Result<Flow> {
        let mut generator = FloodGen::new(bytes);
        let mut buf = String::new();
        while generator.next_into(&mut buf, chunk) {
            self.message(&buf)?;
        }
        Ok(Flow::Next)
    }

    fn raw(&mut self, line: &str) -> io::Result<Flow> {
        self.wire.raw(line)?;
        Ok(Flow::Next)
    }

    fn oversize(&mut self, bytes: u64, newline: bool) -> io::Result<Flow> {
        let u = json!({ "sessionUpdate": "agent_message_chunk", "content": text_block(PAD_MARK) });
        self.wire.oversize(u, bytes, newline)?;
        Ok(Flow::Next)
    }

    fn rpc(&mut self, method: &str, params: &Value) -> io::Result<Flow> {
        let mut params = params.clone();
        // `path = "./x"`: x in the session's cwd, made absolute as ACP wants (a script
        // does not know the worktree its session runs in).
        if let Some(rel) = params["path"].as_str().and_then(|p| p.strip_prefix("./")) {
            let abs = std::env::current_dir()?.join(rel);
            params["path"] = Value::from(abs.display().to_string());
        }
        let said = match self.wire.call(method, params)? {
            Ok(v) => format!("{method} -> {v}"),
            Err(e) => format!("{method} error: {}", message_of(&e)),
        };
        self.message(&said)?;
        self.wait(Duration::ZERO)
    }

    fn run(&mut self, command: &str, args: &[String]) -> io::Result<Flow> {
        let created = self.wire.call(
            "terminal/create",
            json!({ "command": command, "args": args }),
        )?;
        let tid = match created {
            Ok(v) => v["terminalId"].clone(),
            Err(e) => {
                self.message(&format!("run {command} error: {}", message_of(&e)))?;
                return self.wait(Duration::ZERO);
            }
        };
        let exit = self
            .wire
            .call("terminal/wait_for_exit", json!({ "terminalId": tid }))?
            .unwrap_or_default();
        let out = self
            .wire
            .call("terminal/output", json!({ "terminalId": tid }))?
            .unwrap_or_default();
        // Release is best-effort: the output is already in hand.
        let _released = self
            .wire
            .call("terminal/release", json!({ "terminalId": tid }))?;
        let text = out["output"].as_str().unwrap_or_default();
        self.message(&format!("exit={} output={text}", exit["exitCode"]))?;
        self.wait(Duration::ZERO)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn end_turn(&mut self, stop: Option<Stop>) -> io::Result<()> {
        let id = self.prompt_id.take();
        let reason = match stop {
            Some(Stop::Error { message, .. }) => {
                return self.wire.respond_error(id, INTERNAL_ERROR, &message);
            }
            Some(Stop::Interrupted) => "cancelled",
            None if self.wire.cancelled => "cancelled",
            None => "end_turn",
        };
        self.wire.respond(id, json!({ "stopReason": reason }))
    }
}
