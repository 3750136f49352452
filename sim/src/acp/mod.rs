//! `capfleet sim --mode acp`: the sim as an ACP agent (protocol version 1) on stdio.
//!
//! JSON-RPC 2.0, one message per line. It answers `initialize` (advertising
//! `loadSession`), `session/new`, `session/load` and `session/prompt`. With a state
//! directory it keeps each session's conversation there (`acp-<id>.jsonl`, a line per
//! prompt and per text said), so a later sim process loads it: `session/load` replays
//! it as `user_message_chunk` / `agent_message_chunk` updates before its answer, as
//! agents do, and refuses a session it has no record of (-32002). Each prompt
//! plays one script turn through [`crate::acp::turn`] and is answered with its
//! `stopReason` (`cancelled` after a `session/cancel`). Agent -> client calls
//! (permissions, `fs/*`, `terminal/*`, `_cap/*`) wait for their response while
//! still noticing a cancel.

mod turn;

use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp::turn::AcpTurn;
use crate::inbound::for_each_line;
use crate::script::Script;
use crate::script::state::{StateDir, TurnPicker};
use crate::script::steps::run_turn;

/// Client messages read ahead of the sim.
const INBOX: usize = 256;

/// One message from the client.
#[derive(Debug)]
pub(super) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
    },
    Response {
        id: Value,
        result: Result<Value, Value>,
    },
    Eof,
}

/// The sim's end of the connection.
pub(super) struct Wire {
    inbox: Receiver<Incoming>,
    out: io::Stdout,
    next_id: u64,
    /// A `session/cancel` arrived during the current turn.
    pub cancelled: bool,
    pub session_id: String,
    /// Where the session's conversation is kept, with a state directory.
    kept: Option<std::path::PathBuf>,
}

impl Wire {
    fn write(&mut self, msg: &Value) -> io::Result<()> {
        let mut out = self.out.lock();
        serde_json::to_writer(&mut out, msg)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    /// One line, verbatim (the `raw` step).
    pub(super) fn raw(&mut self, line: &str) -> io::Result<()> {
        let mut out = self.out.lock();
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        out.flush()
    }

    pub(super) fn respond(&mut self, id: Value, result: Value) -> io::Result<()> {
        self.write(&json!({ "jsonrpc": "2.0", "id": id, "result": result }))
    }

    pub(super) fn respond_error(&mut self, id: Value, code: i64, message: &str) -> io::Result<()> {
        let error = json!({ "code": code, "message": message });
        self.write(&json!({ "jsonrpc": "2.0", "id": id, "error": error }))
    }

    /// A `session/update` of this session as one line of about `bytes` bytes, its
    /// [`crate::frames::PAD_MARK`] text streamed as padding; its newline if `newline`.
    pub(super) fn oversize(&mut self, update: Value, bytes: u64, newline: bool) -> io::Result<()> {
        let params = json!({ "sessionId": self.session_id, "update": update });
        let msg = json!({ "jsonrpc": "2.0", "method": "session/update", "params": params });
        let mut out = self.out.lock();
        crate::frames::write_oversize(&mut out, &msg, bytes, newline)?;
        out.flush()
    }

    /// Keep a line of the conversation (`user` or `agent`) for a later `session/load`.
    pub(super) fn keep(&self, role: &str, text: &str) -> io::Result<()> {
        let Some(path) = &self.kept else {
            return Ok(());
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        writeln!(f, "{}", json!({ "role": role, "text": text }))
    }

    /// `session/load` of `sid`: its conversation replayed; false if none is kept.
    fn load(&mut self, sid: &str, state: &StateDir) -> io::Result<bool> {
        let Some(path) = state.file(&format!("acp-{sid}.jsonl"))? else {
            self.session_id = sid.to_owned();
            return Ok(true);
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        self.session_id = sid.to_owned();
        self.kept = Some(path);
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let kind = if v["role"] == "user" {
                "user_message_chunk"
            } else {
                "agent_message_chunk"
            };
            let content = json!({ "type": "text", "text": v["text"] });
            self.update(json!({ "sessionUpdate": kind, "content": content }))?;
        }
        Ok(true)
    }

    /// A `session/update` of this session.
    pub(super) fn update(&mut self, update: Value) -> io::Result<()> {
        let params = json!({ "sessionId": self.session_id, "update": update });
        self.write(&json!({ "jsonrpc": "2.0", "method": "session/update", "params": params }))
    }

    /// Call the client and wait for its answer: `Err(error object)` on a JSON-RPC
    /// error. A cancel arriving meanwhile is noted; requests are refused (busy).
    pub(super) fn call(
        &mut self,
        method: &str,
        mut params: Value,
    ) -> io::Result<Result<Value, Value>> {
        self.next_id += 1;
        let id = self.next_id;
        if let Some(p) = params.as_object_mut() {
            p.insert("sessionId".into(), json!(self.session_id));
        }
        let req = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.write(&req)?;
        loop {
            match self.recv(None)? {
                Some(Incoming::Response { id: got, result }) if got == json!(id) => {
                    return Ok(result);
                }
                Some(Incoming::Eof) => {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, "client gone"));
                }
                _ => {}
            }
        }
    }

    /// Wait up to `timeout` (`None`: forever) for a message the turn must see;
    /// cancels are noted, stray requests refused. `Ok(None)`: timed out.
    pub(super) fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Incoming>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let msg = match deadline {
                None => self.inbox.recv().unwrap_or(Incoming::Eof),
                Some(d) => match self
                    .inbox
                    .recv_timeout(d.saturating_duration_since(Instant::now()))
                {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => return Ok(None),
                    Err(RecvTimeoutError::Disconnected) => Incoming::Eof,
                },
            };
            match msg {
                Incoming::Notification { method, .. } if method == "session/cancel" => {
                    self.cancelled = true;
                    return Ok(Some(Incoming::Notification { method }));
                }
                Incoming::Request { id, method, .. } => {
                    self.respond_error(id, -32600, &format!("{method}: a prompt is running"))?;
                }
                Incoming::Notification { .. } => {}
                other => return Ok(Some(other)),
            }
        }
    }
}

/// Serve the client until stdin ends.
pub(super) fn run(script: &Script, state: &StateDir, session_id: String) -> io::Result<()> {
    let (tx, inbox) = sync_channel(INBOX);
    std::thread::spawn(move || read_loop(io::stdin().lock(), &tx));
    let mut wire = Wire {
        inbox,
        out: io::stdout(),
        next_id: 0,
        cancelled: false,
        kept: state.file(&format!("acp-{session_id}.jsonl"))?,
        session_id,
    };
    let mut picker = TurnPicker::new(&script.turns).repeating(script.header.repeat);
    loop {
        let msg = wire.inbox.recv().unwrap_or(Incoming::Eof);
        let (id, method, params) = match msg {
            Incoming::Eof => return Ok(()),
            Incoming::Request { id, method, params } => (id, method, params),
            Incoming::Notification { .. } | Incoming::Response { .. } => continue,
        };
        match method.as_str() {
            "initialize" => {
                let version = params.get("protocolVersion").cloned().unwrap_or(json!(1));
                let caps = json!({ "loadSession": true });
                let info = json!({ "name": "capfleet-sim", "version": env!("CARGO_PKG_VERSION") });
                let result = json!({ "protocolVersion": version, "agentCapabilities": caps,
                                     "agentInfo": info, "authMethods": [] });
                wire.respond(id, result)?;
            }
            "session/new" => {
                let sid = wire.session_id.clone();
                wire.respond(id, json!({ "sessionId": sid }))?;
            }
            "session/load" => {
                let sid = params.get("sessionId").and_then(Value::as_str);
                match sid {
                    Some(sid) if wire.load(sid, state)? => wire.respond(id, json!({}))?,
                    _ => wire.respond_error(id, -32002, "Resource not found: no such session")?,
                }
            }
            "session/prompt" => {
                let prompt = prompt_text(&params);
                wire.keep("user", &prompt)?;
                let turn = picker.pick(&script.turns, &prompt);
                wire.cancelled = false;
                let mut fe = AcpTurn::new(&mut wire, id);
                run_turn(&mut fe, &script.header, turn, &prompt, state)?;
            }
            other => wire.respond_error(id, -32601, &format!("method not found: {other}"))?,
        }
    }
}

fn prompt_text(params: &Value) -> String {
    params["prompt"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default()
}

fn read_loop(input: impl Read, tx: &SyncSender<Incoming>) {
    for_each_line(input, |line| {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            if !line.iter().all(u8::is_ascii_whitespace) {
                eprintln!("capfleet sim: unreadable ACP line skipped");
            }
            return true;
        };
        tx.send(classify(v)).is_ok()
    });
    let _gone = tx.send(Incoming::Eof);
}

fn classify(mut v: Value) -> Incoming {
    let id = v.get_mut("id").map(Value::take);
    let params = v.get_mut("params").map(Value::take).unwrap_or(Value::Null);
    match (v.get("method").and_then(Value::as_str), id) {
        (Some(m), Some(id)) => Incoming::Request {
            id,
            method: m.to_owned(),
            params,
        },
        (Some(m), None) => Incoming::Notification {
            method: m.to_owned(),
        },
        (None, Some(id)) => {
            let result = match v.get_mut("error") {
                Some(e) => Err(e.take()),
                None => Ok(v.get_mut("result").map(Value::take).unwrap_or(Value::Null)),
            };
            Incoming::Response { id, result }
        }
        (None, None) => Incoming::Notification {
            method: String::new(),
        },
    }
}
