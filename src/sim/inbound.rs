//! stream-json input: a thread reads stdin lines and turns them into
//! [`Inbound`] messages, so turns can watch for interrupts while running.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{Receiver, Sender, channel};

use capfleet_actors::bindings::stream_json::outbound::user_text;
use serde_json::Value;

/// Longest accepted input line; longer lines are skipped.
const LINE_MAX: u64 = 16 * 1024 * 1024;

/// One message from the client.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Inbound {
    /// A `user` frame: the prompt text.
    Prompt(String),
    /// A `control_request` with subtype `interrupt`.
    Interrupt { request_id: String },
    /// Any other `control_request` (acknowledged with success).
    Control { request_id: String },
    /// A `control_response` to one of our requests.
    Response { request_id: String, response: Value },
    /// stdin ended.
    Eof,
}

/// Starts the stdin reader thread.
pub(super) fn spawn_reader() -> Receiver<Inbound> {
    let (tx, rx) = channel();
    std::thread::spawn(move || read_loop(std::io::stdin().lock(), &tx));
    rx
}

fn read_loop(input: impl Read, tx: &Sender<Inbound>) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(LINE_MAX).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') && line.len() as u64 == LINE_MAX {
            eprintln!("capfleet sim: input line over {LINE_MAX} bytes skipped");
            if skip_line(&mut reader).is_err() {
                break;
            }
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match parse_inbound(text) {
            Some(message) => {
                if tx.send(message).is_err() {
                    return;
                }
            }
            None => eprintln!("capfleet sim: ignored input line: {}", truncate(text, 200)),
        }
    }
    let _ = tx.send(Inbound::Eof);
}

fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            reader.consume(pos + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Parses one input frame; `None` for frames the sim does not understand.
pub(super) fn parse_inbound(line: &str) -> Option<Inbound> {
    let frame: Value = serde_json::from_str(line).ok()?;
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    match frame.get("type")?.as_str()? {
        "user" => Some(Inbound::Prompt(user_text(
            frame.get("message")?.get("content")?,
        )?)),
        "control_request" => {
            let request_id = str_of(&frame, "request_id").unwrap_or_default();
            match frame.get("request")?.get("subtype")?.as_str()? {
                "interrupt" => Some(Inbound::Interrupt { request_id }),
                _ => Some(Inbound::Control { request_id }),
            }
        }
        "control_response" => {
            let body = frame.get("response")?;
            Some(Inbound::Response {
                request_id: str_of(body, "request_id")?,
                response: body.get("response").cloned().unwrap_or(Value::Null),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prompts_and_control() {
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#;
        assert_eq!(parse_inbound(blocks), Some(Inbound::Prompt("a\nb".into())));
        let interrupt =
            r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#;
        assert_eq!(
            parse_inbound(interrupt),
            Some(Inbound::Interrupt {
                request_id: "r1".into()
            })
        );
        assert_eq!(parse_inbound("{not json"), None);
    }
}
