//! stream-json input: a thread reads stdin lines and turns them into
//! [`Inbound`] messages, so turns can watch for interrupts while running; and the
//! bounded line reader ([`for_each_line`]) the ACP mode's reader shares.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{Receiver, Sender, channel};

use capfleet_wire::bindings::stream_json::outbound::user_text;
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
    for_each_line(input, |line| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return true;
        }
        match parse_inbound(text) {
            Some(message) => tx.send(message).is_ok(),
            None => {
                eprintln!("capfleet sim: ignored input line: {}", truncate(text, 200));
                true
            }
        }
    });
    let _ = tx.send(Inbound::Eof);
}

/// Reads `input` line by line (a line over [`LINE_MAX`] bytes is skipped, said on
/// stderr) and hands each line to `each` until it returns false or the input ends
/// (its end or a read error). The stdin readers of the stream-json and ACP modes.
pub(super) fn for_each_line(input: impl Read, mut each: impl FnMut(&[u8]) -> bool) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(LINE_MAX).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') && line.len() as u64 == LINE_MAX {
            eprintln!("capfleet sim: input line over {LINE_MAX} bytes skipped");
            if skip_line(&mut reader).is_err() {
                return;
            }
            continue;
        }
        if !each(&line) {
            return;
        }
    }
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

    fn lines_of(input: Vec<u8>, stop_after: usize) -> Vec<String> {
        let mut seen = Vec::new();
        for_each_line(std::io::Cursor::new(input), |line| {
            seen.push(String::from_utf8_lossy(line).into_owned());
            seen.len() < stop_after
        });
        seen
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_whole_and_the_reader_goes_on() {
        let mut input = b"a\n".to_vec();
        input.resize(input.len() + usize::try_from(LINE_MAX).unwrap() + 10, b'x');
        input.extend_from_slice(b"\nb\nc");
        assert_eq!(lines_of(input.clone(), usize::MAX), ["a\n", "b\n", "c"]);
        assert_eq!(lines_of(input, 2), ["a\n", "b\n"], "stops when told");
    }
}
