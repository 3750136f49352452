//! What the upstream driver writes to `speak`'s stdin, read on one task through the
//! bounded line reader into a bounded channel: user frames (a turn each), control
//! requests, and the answers to our own `can_use_tool` requests. A line that is not
//! a frame is counted and named on stderr, never fatal.

use capfleet_wire::bindings::stream_json::outbound::user_text;
use capfleet_wire::process::{LineItem, LineReader};
use serde_json::Value;
use tokio::sync::mpsc;

/// Lines read ahead of the session.
const INBOUND_CAPACITY: usize = 64;

/// A user message: its text, and the W3C `traceparent` of whoever sent it when the
/// frame carries one (a capfleet driver sends its turn's: see
/// `fast_path.x-stream_json_traceparent` in `config/agents/capfleet.toml`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Message {
    pub text: String,
    pub traceparent: Option<String>,
}

impl Message {
    /// A message with no trace of its own (the argument, text on stdin).
    pub(super) fn plain(text: String) -> Self {
        Message {
            text,
            traceparent: None,
        }
    }
}

/// One message from upstream.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Inbound {
    /// A `user` frame: the prompt.
    Prompt(Message),
    /// A `control_request` (`interrupt`, `initialize`, ...).
    Control {
        request_id: String,
        subtype: String,
        request: Value,
    },
    /// A `control_response` to one of our requests: its `response` on success, the
    /// error text otherwise.
    Response {
        request_id: String,
        answer: Result<Value, String>,
    },
}

/// Read stdin on a task until its end (then the channel closes).
pub(super) fn spawn_reader() -> mpsc::Receiver<Inbound> {
    let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
    tokio::spawn(async move {
        let mut lines = LineReader::new(tokio::io::stdin());
        let mut malformed = 0u64;
        loop {
            let line = match lines.next().await {
                Ok(Some(LineItem::Line(l) | LineItem::Unterminated(l))) => l,
                Ok(Some(LineItem::Oversize { len, .. })) => {
                    malformed += 1;
                    tracing::warn!(len, malformed, "input line over the line limit skipped");
                    continue;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("stdin: {e}");
                    break;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse(&line) {
                Some(message) => {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
                None => {
                    malformed += 1;
                    let text = String::from_utf8_lossy(&line);
                    let shown: String = text.chars().take(200).collect();
                    tracing::warn!(malformed, "input line that is no frame ignored: {shown}");
                }
            }
        }
    });
    rx
}

/// One input frame; `None` for what is not one.
pub(super) fn parse(line: &[u8]) -> Option<Inbound> {
    let frame: Value = serde_json::from_slice(line).ok()?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match frame.get("type")?.as_str()? {
        "user" => Some(Inbound::Prompt(Message {
            text: user_text(frame.get("message")?.get("content")?)?,
            traceparent: text(&frame, "traceparent"),
        })),
        "control_request" => {
            let request = frame.get("request")?.clone();
            Some(Inbound::Control {
                request_id: text(&frame, "request_id")?,
                subtype: text(&request, "subtype")?,
                request,
            })
        }
        "control_response" => {
            let body = frame.get("response")?;
            let answer = match body.get("subtype").and_then(Value::as_str) {
                Some("error") => Err(text(body, "error").unwrap_or_default()),
                _ => Ok(body.get("response").cloned().unwrap_or(Value::Null)),
            };
            Some(Inbound::Response {
                request_id: text(body, "request_id")?,
                answer,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_of_the_agent_sdk_parse() {
        let user = br#"{"type":"user","session_id":"","message":{"role":"user","content":"hi"},"parent_tool_use_id":null}"#;
        assert_eq!(
            parse(user),
            Some(Inbound::Prompt(Message::plain("hi".into())))
        );
        let traced = br#"{"type":"user","message":{"role":"user","content":"hi"},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#;
        assert_eq!(
            parse(traced),
            Some(Inbound::Prompt(Message {
                text: "hi".into(),
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
            }))
        );
        let init = br#"{"type":"control_request","request_id":"req_1_ab","request":{"subtype":"initialize","hooks":null}}"#;
        assert_eq!(
            parse(init),
            Some(Inbound::Control {
                request_id: "req_1_ab".into(),
                subtype: "initialize".into(),
                request: json!({"subtype": "initialize", "hooks": null}),
            })
        );
        let allow = br#"{"type":"control_response","response":{"subtype":"success","request_id":"p1","response":{"behavior":"allow","updatedInput":{}}}}"#;
        assert_eq!(
            parse(allow),
            Some(Inbound::Response {
                request_id: "p1".into(),
                answer: Ok(json!({"behavior": "allow", "updatedInput": {}})),
            })
        );
        let failed = br#"{"type":"control_response","response":{"subtype":"error","request_id":"p2","error":"boom"}}"#;
        assert_eq!(
            parse(failed),
            Some(Inbound::Response {
                request_id: "p2".into(),
                answer: Err("boom".into()),
            })
        );
        assert_eq!(parse(b"{not json"), None);
        assert_eq!(parse(br#"{"type":"keep_alive"}"#), None);
    }
}
