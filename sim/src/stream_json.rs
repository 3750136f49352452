//! `--mode stream-json`: Claude Code compatible NDJSON over stdio.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::Client;
use super::emitted::Emitted;
use super::frames::{Session, TurnAcc, init_frame, result_frame, usage_json};
use super::inbound::spawn_reader;
use super::script::Script;
use super::script::state::{StateDir, TurnPicker};
use super::script::steps::{
    Ask, FloodGen, Flow, Frontend, PlanEntry, Stop, ToolStep, Usage, chunks, run_turn,
};

/// Options of the stream-json mode.
#[derive(Debug, Clone)]
pub(super) struct Options {
    pub session: Session,
    pub partial: bool,
    /// Exit after the first turn.
    pub one_turn: bool,
    /// Where each turn result (its usage) is recorded around its write (`--emitted`).
    pub emitted: Option<PathBuf>,
}

/// Runs the mode until stdin ends (or, with `one_turn`, its first turn ended).
pub(super) fn run(script: &Script, state: &StateDir, options: Options) -> io::Result<()> {
    let rx = spawn_reader();
    std::thread::sleep(Duration::from_millis(script.header.boot_delay_ms));
    let one_turn = options.one_turn;
    let mut fe = StreamJson::new(Client::new(rx, script.header.exit_at_eof), options);
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let uuid = fe.client.out.uuid();
    fe.client.out.raw_lines(&script.header.before_init)?;
    fe.client.out.emit(&init_frame(&fe.session, &cwd, uuid))?;
    fe.client.out.raw_lines(&script.header.after_init)?;
    fe.client.out.flush()?;
    let mut picker = TurnPicker::new(&script.turns).repeating(script.header.repeat);
    while let Some(prompt) = fe.client.next_prompt()? {
        let turn = picker.pick(&script.turns, &prompt);
        run_turn(&mut fe, &script.header, turn, &prompt, state)?;
        if one_turn {
            break;
        }
    }
    fe.client.out.flush()
}

struct StreamJson {
    client: Client,
    session: Session,
    partial: bool,
    bypass: bool,
    emitted: Option<Emitted>,
    /// The open assistant message: its id and how many blocks it has.
    message: Option<(String, usize)>,
    turn: TurnAcc,
}

impl StreamJson {
    fn new(client: Client, options: Options) -> StreamJson {
        StreamJson {
            client,
            bypass: options.session.permission_mode == "bypassPermissions",
            session: options.session,
            partial: options.partial,
            emitted: options.emitted.map(Emitted::new),
            message: None,
            turn: TurnAcc::new(),
        }
    }

    /// The open message's id and the index of its next block.
    fn open_message(&mut self) -> io::Result<(String, usize)> {
        let (id, blocks) = match self.message.take() {
            Some(open) => open,
            None => {
                let id = format!("msg_sim_{:06}", self.client.out.next_seq());
                self.turn.messages += 1;
                if self.partial {
                    let start = json!({"type": "message_start", "message": {
                        "id": id, "type": "message", "role": "assistant", "model": self.session.model,
                        "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": usage_json(&self.turn.usage),
                    }});
                    self.client.out.stream_event(&self.session, start)?;
                }
                (id, 0)
            }
        };
        self.message = Some((id.clone(), blocks + 1));
        Ok((id, blocks))
    }

    fn close_message(&mut self, stop_reason: &str) -> io::Result<()> {
        if self.message.take().is_some() && self.partial {
            let delta = json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": usage_json(&self.turn.usage)});
            self.client.out.stream_event(&self.session, delta)?;
            self.client
                .out
                .stream_event(&self.session, json!({"type": "message_stop"}))?;
        }
        Ok(())
    }

    /// One complete content block: streamed as start/delta/stop events in
    /// partial mode, then the `assistant` snapshot.
    fn block(&mut self, start: Value, delta: Option<Value>, full: Value) -> io::Result<()> {
        let (id, index) = self.open_message()?;
        if self.partial {
            self.client.out.stream_event(
                &self.session,
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            )?;
            if let Some(delta) = delta {
                self.client.out.stream_event(
                    &self.session,
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                )?;
            }
            self.client.out.stream_event(
                &self.session,
                json!({"type": "content_block_stop", "index": index}),
            )?;
        }
        self.client
            .out
            .assistant(&self.session, &id, full, &self.turn.usage)
    }

    /// Paces chunks: waits `delay`, or without delay only polls for
    /// interrupts now and then (no flush per chunk).
    fn between_chunks(&mut self, index: usize, delay: Duration) -> io::Result<Flow> {
        if !delay.is_zero() {
            self.client.wait(delay)
        } else if index.is_multiple_of(64) {
            self.client.poll()
        } else {
            Ok(Flow::Next)
        }
    }

    /// Emits a `tool_use` block and closes the message; returns its id.
    fn tool_use(&mut self, name: &str, input: &Value) -> io::Result<String> {
        let tool_use_id = format!("toolu_sim_{:06}", self.client.out.next_seq());
        let start = json!({"type": "tool_use", "id": tool_use_id, "name": name, "input": {}});
        let delta = json!({"type": "input_json_delta", "partial_json": input.to_string()});
        let full = json!({"type": "tool_use", "id": tool_use_id, "name": name, "input": input});
        self.block(start, Some(delta), full)?;
        self.close_message("tool_use")?;
        Ok(tool_use_id)
    }
}

impl Frontend for StreamJson {
    fn begin_turn(&mut self, _prompt: &str) -> io::Result<()> {
        self.turn = TurnAcc::new();
        self.message = None;
        Ok(())
    }

    fn say(&mut self, text: &str, chunk: usize, delay: Duration) -> io::Result<Flow> {
        let pieces = chunks(text, chunk);
        if self.partial {
            let (id, index) = self.open_message()?;
            let start = json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}});
            self.client.out.stream_event(&self.session, start)?;
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0
                    && let Flow::Stop(stop) = self.between_chunks(i, delay)?
                {
                    return Ok(Flow::Stop(stop));
                }
                let delta = json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}});
                self.client.out.stream_event(&self.session, delta)?;
            }
            self.client.out.stream_event(
                &self.session,
                json!({"type": "content_block_stop", "index": index}),
            )?;
            self.client.out.assistant(
                &self.session,
                &id,
                json!({"type": "text", "text": text}),
                &self.turn.usage,
            )?;
        } else {
            let (id, _) = self.open_message()?;
            let template = self
                .client
                .out
                .text_template(&self.session, &id, &self.turn.usage);
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0
                    && let Flow::Stop(stop) = self.between_chunks(i, delay)?
                {
                    return Ok(Flow::Stop(stop));
                }
                self.client.out.emit_text(&template, piece)?;
            }
        }
        self.turn.text.push(text.to_string());
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn think(&mut self, text: &str) -> io::Result<Flow> {
        let start = json!({"type": "thinking", "thinking": "", "signature": ""});
        let delta = json!({"type": "thinking_delta", "thinking": text});
        let full = json!({"type": "thinking", "thinking": text, "text": text, "signature": ""});
        self.block(start, Some(delta), full)?;
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn tool(&mut self, tool: &ToolStep) -> io::Result<Flow> {
        let tool_use_id = self.tool_use(&tool.name, &tool.input)?;
        if let Some(risk) = tool.risk.as_deref().filter(|_| !self.bypass) {
            let response =
                match self
                    .client
                    .request_permission(&tool.name, &tool.input, &tool_use_id, risk)?
                {
                    Ok(response) => response,
                    Err(stop) => return Ok(Flow::Stop(stop)),
                };
            if response.get("behavior").and_then(Value::as_str) != Some("allow") {
                let message = response
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let message = message
                    .unwrap_or_else(|| format!("Permission to use {} has been denied.", tool.name));
                self.turn.denials.push(json!({"tool_name": tool.name, "tool_use_id": tool_use_id, "tool_input": tool.input}));
                self.client
                    .out
                    .tool_result(&self.session, &tool_use_id, &message, true)?;
                self.client.out.flush()?;
                return Ok(Flow::Next);
            }
        }
        let slice = Duration::from_millis(tool.duration_ms) / (tool.deltas.len() as u32 + 1);
        let started = Instant::now();
        for delta in &tool.deltas {
            if let Flow::Stop(stop) = self.client.wait(slice)? {
                return Ok(Flow::Stop(stop));
            }
            let uuid = self.client.out.uuid();
            self.client.out.emit(&json!({
                "type": "tool_progress",
                "tool_use_id": tool_use_id,
                "tool_name": tool.name,
                "output_chunk": delta,
                "elapsed_time_seconds": started.elapsed().as_secs_f64(),
                "parent_tool_use_id": null,
                "session_id": self.session.session_id,
                "uuid": uuid,
            }))?;
        }
        if let Flow::Stop(stop) = self.client.wait(slice)? {
            return Ok(Flow::Stop(stop));
        }
        self.client.out.tool_result(
            &self.session,
            &tool_use_id,
            &tool.final_output(),
            tool.is_error,
        )?;
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn artifact(&mut self, name: &str, mime: &str, content: &Value) -> io::Result<Flow> {
        let id = format!("sim-art-{}", self.client.out.next_seq());
        self.client.out.emit(&json!({
            "type": "artifact",
            "artifact_id": id,
            "mime_type": mime,
            "name": name,
            "content": content,
            "session_id": self.session.session_id,
        }))?;
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn plan(&mut self, entries: &[PlanEntry]) -> io::Result<Flow> {
        let todos: Vec<Value> = entries
            .iter()
            .map(|e| {
                let mut todo = json!({"id": e.id, "content": e.content, "status": e.status, "activeForm": e.content});
                if let Some(priority) = &e.priority {
                    todo["priority"] = json!(priority);
                }
                if let Some(meta) = &e.meta {
                    todo["_meta"] = meta.clone();
                }
                todo
            })
            .collect();
        let tool_use_id = self.tool_use("TodoWrite", &json!({ "todos": todos }))?;
        let done = "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.";
        self.client
            .out
            .tool_result(&self.session, &tool_use_id, done, false)?;
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn ask(&mut self, ask: &Ask) -> io::Result<Flow> {
        let options: Vec<Value> = ask
            .labels()
            .iter()
            .map(|l| json!({"label": l, "description": ""}))
            .collect();
        let input = json!({"questions": [{
            "question": ask.question, "header": "Question", "options": options, "multiSelect": false,
        }]});
        let tool_use_id = self.tool_use("AskUserQuestion", &input)?;
        let response =
            match self
                .client
                .request_permission("AskUserQuestion", &input, &tool_use_id, "low")?
            {
                Ok(response) => response,
                Err(stop) => return Ok(Flow::Stop(stop)),
            };
        let answers = response.get("updatedInput").and_then(|u| u.get("answers"));
        let answer = answers
            .and_then(|a| a.get(&ask.question).or(Some(a)))
            .and_then(Value::as_str);
        match (response.get("behavior").and_then(Value::as_str), answer) {
            (Some("allow"), Some(answer)) => {
                let content = format!("answer: {answer}");
                self.client
                    .out
                    .tool_result(&self.session, &tool_use_id, &content, false)?;
            }
            _ => self.client.out.tool_result(
                &self.session,
                &tool_use_id,
                "User declined to answer questions",
                true,
            )?,
        }
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn usage(&mut self, usage: &Usage) -> io::Result<Flow> {
        self.turn.usage.add(usage);
        Ok(Flow::Next)
    }

    fn pause(&mut self, duration: Duration) -> io::Result<Flow> {
        self.client.wait(duration)
    }

    fn flood(&mut self, bytes: u64, chunk: usize) -> io::Result<Flow> {
        let mut generator = FloodGen::new(bytes);
        let mut buf = String::with_capacity(chunk);
        let mut frames = 0u64;
        let (id, _) = self.open_message()?;
        let template = self
            .client
            .out
            .text_template(&self.session, &id, &self.turn.usage);
        while generator.next_into(&mut buf, chunk) {
            // Flood text is ASCII letters, digits, `_` and newlines: only
            // the newlines need escaping.
            let escaped = format!("\"{}\"", buf.replace('\n', "\\n"));
            self.client
                .out
                .emit_escaped_text(&template, escaped.as_bytes())?;
            frames += 1;
            if frames.is_multiple_of(64)
                && let Flow::Stop(stop) = self.client.poll()?
            {
                return Ok(Flow::Stop(stop));
            }
        }
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn raw(&mut self, line: &str) -> io::Result<Flow> {
        self.client.out.write_raw(line.as_bytes())?;
        self.client.out.write_raw(b"\n")?;
        self.client.out.flush()?;
        Ok(Flow::Next)
    }

    fn oversize(&mut self, bytes: u64, newline: bool) -> io::Result<Flow> {
        let id = format!("msg_sim_{:06}", self.client.out.next_seq());
        self.client
            .out
            .oversize(&self.session, &id, bytes, newline)?;
        Ok(Flow::Next)
    }

    fn oversize_result(&mut self, bytes: u64) -> io::Result<Flow> {
        self.turn.result_bytes = Some(bytes);
        Ok(Flow::Next)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.client.out.flush()
    }

    fn end_turn(&mut self, stop: Option<Stop>) -> io::Result<()> {
        self.close_message(if stop.is_some() { "error" } else { "end_turn" })?;
        // Like Claude, what completed before an interrupt is billed (its tokens are
        // in the result's usage, its cost in the cumulative total).
        self.session.total_cost_usd += self.turn.usage.cost_usd;
        let mut frame = result_frame(&self.session, &self.turn, stop);
        frame["uuid"] = json!(self.client.out.uuid());
        // Recorded before it is written, marked written after: a process killed
        // between the two had this result in flight (see `emitted`).
        let recorded = match &mut self.emitted {
            Some(e) => Some(e.recording(&self.turn.usage)?),
            None => None,
        };
        match self.turn.result_bytes {
            Some(bytes) => {
                frame["result"] = json!(super::frames::PAD_MARK);
                self.client.out.oversize_frame(&frame, bytes)?;
            }
            None => self.client.out.emit(&frame)?,
        }
        self.client.out.flush()?;
        match (&mut self.emitted, recorded) {
            (Some(e), Some(n)) => e.written(n),
            _ => Ok(()),
        }
    }
}
