//! Typed inbound stream-json frames, parsed once and borrowing from the line.
//!
//! The top level dispatches on `"type"` without buffering: Claude writes `type` as the
//! first key, so the rest of the object is read straight into the frame's own struct.
//! When `type` is not first, the object is collected into a `Value` once and read
//! from there (slow path, owned strings). Unknown types skip the rest of the object.
//!
//! Every field is optional and unknown fields are skipped, so new Claude versions do
//! not break parsing; a field of the wrong JSON type fails the frame (counted as
//! malformed by the mapper).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A string borrowed from the line when it has no escapes, owned otherwise.
///
/// (`Option<Cow<str>>` never borrows under serde's derive; this newtype does.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl Str<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// `.as_deref()` for an optional [`Str`].
pub(crate) fn opt<'s>(s: &'s Option<Str<'_>>) -> Option<&'s str> {
    s.as_ref().map(Str::as_str)
}

/// One inbound line.
#[derive(Debug)]
pub(crate) enum Frame<'a> {
    System(SystemFrame<'a>),
    Assistant(MessageFrame<'a>),
    User(MessageFrame<'a>),
    StreamEvent(StreamEventFrame<'a>),
    /// Boxed: the largest frame by far, and one per turn.
    Result(Box<ResultFrame<'a>>),
    ControlRequest(ControlRequestFrame<'a>),
    ControlCancelRequest(ControlCancelFrame<'a>),
    ControlResponse(ControlResponseFrame<'a>),
    /// `artifact`: a `cap.artifact` event's fields as a frame (tai's artifact frames).
    Artifact(Map<String, Value>),
    /// `rate_limit_event`: Claude Code's subscription limit changed.
    RateLimitEvent(RateLimitEventFrame),
    /// A `type` this binding does not map (e.g. `tool_progress`).
    Unknown(Str<'a>),
    /// A JSON object without a string `type`.
    Untyped,
}

impl<'a> Frame<'a> {
    /// Parses one line (trailing whitespace allowed).
    pub(crate) fn parse(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(line)
    }
}

/// `system` (`init`, `status`, ...).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SystemFrame<'a> {
    #[serde(borrow)]
    pub subtype: Option<Str<'a>>,
    #[serde(borrow)]
    pub session_id: Option<Str<'a>>,
    #[serde(borrow)]
    pub model: Option<Str<'a>>,
    #[serde(borrow)]
    pub cwd: Option<Str<'a>>,
    #[serde(borrow, rename = "permissionMode")]
    pub permission_mode: Option<Str<'a>>,
    #[serde(borrow)]
    pub tools: Option<Vec<Str<'a>>>,
}

/// `assistant` and `user`: one API message (for `assistant`, one content block).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageFrame<'a> {
    #[serde(borrow)]
    pub message: Option<Message<'a>>,
    #[serde(borrow)]
    pub parent_tool_use_id: Option<Str<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Message<'a> {
    #[serde(borrow)]
    pub id: Option<Str<'a>>,
    #[serde(borrow)]
    pub model: Option<Str<'a>>,
    #[serde(borrow)]
    pub content: Option<Content<'a>>,
}

/// `message.content`: a bare string (user prompts) or content blocks.
#[derive(Debug)]
pub(crate) enum Content<'a> {
    /// A bare string (checked to be one; its text is not kept).
    Text,
    Blocks(Vec<Block<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_borrowed_str<E: de::Error>(self, _text: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text)
            }
            fn visit_str<E: de::Error>(self, _text: &str) -> Result<Self::Value, E> {
                Ok(Content::Text)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(b) = seq.next_element()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        d.deserialize_any(V)
    }
}

/// One content block, flattened: `text`, `thinking`, `tool_use`, `tool_result`, ...
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
    /// Anthropic's spelling for thinking blocks (C.1 writes `text`; both are read).
    #[serde(borrow)]
    pub thinking: Option<Str<'a>>,
    #[serde(borrow)]
    pub id: Option<Str<'a>>,
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    pub input: Option<Value>,
    #[serde(borrow)]
    pub tool_use_id: Option<Str<'a>>,
    /// `tool_result` content: a string or an array of blocks, kept as JSON.
    pub content: Option<Value>,
    pub is_error: Option<bool>,
}

/// `stream_event` (with `--include-partial-messages`): a raw Anthropic SSE event.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamEventFrame<'a> {
    #[serde(borrow)]
    pub event: Option<SseEvent<'a>>,
    #[serde(borrow)]
    pub parent_tool_use_id: Option<Str<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct SseEvent<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<Str<'a>>,
    pub index: Option<u64>,
    #[serde(borrow)]
    pub delta: Option<Delta<'a>>,
    /// `message_start` only.
    #[serde(borrow)]
    pub message: Option<Message<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
    #[serde(borrow)]
    pub thinking: Option<Str<'a>>,
}

/// `result`: the end of a turn.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResultFrame<'a> {
    #[serde(borrow)]
    pub subtype: Option<Str<'a>>,
    pub is_error: Option<bool>,
    pub duration_ms: Option<u64>,
    #[serde(borrow)]
    pub result: Option<Str<'a>>,
    #[serde(borrow)]
    pub stop_reason: Option<Str<'a>>,
    #[serde(borrow)]
    pub terminal_reason: Option<Str<'a>>,
    pub num_turns: Option<u64>,
    /// Cumulative per process; since Claude Code 2.1.337 a resumed process's first
    /// total also holds the conversation's earlier cost.
    pub total_cost_usd: Option<f64>,
    /// Older spelling of `total_cost_usd`.
    pub total_cost: Option<f64>,
    /// Older spelling of `total_cost_usd`.
    pub cost_usd: Option<f64>,
    pub usage: Option<ResultUsage>,
    /// Claude Code 2.1.337+: what the requests since the previous `result` used and
    /// cost (this turn's own, an interrupted request's included), summed over models.
    #[serde(default, deserialize_with = "sum_models")]
    pub model_usage_since_last_result: Option<ModelUsage>,
    /// HTTP status of a failed API call (number, string or null).
    pub api_error_status: Option<Value>,
    pub errors: Option<Value>,
}

impl ResultFrame<'_> {
    /// The cumulative process cost in its newest available spelling.
    pub(crate) fn cumulative_cost(&self) -> Option<f64> {
        self.total_cost_usd.or(self.total_cost).or(self.cost_usd)
    }
}

/// `result.usage`: per turn (all zero after an interrupted request, which 2.1.337
/// bills all the same: see [`ResultFrame::model_usage_since_last_result`]).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResultUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub thinking_tokens: Option<u64>,
    /// 2.1.337+: `{"thinking_tokens": n}`.
    pub output_tokens_details: Option<OutputTokensDetails>,
}

impl ResultUsage {
    /// `thinking_tokens`, flat (older) or under `output_tokens_details` (2.1.337+).
    pub(crate) fn thinking(&self) -> Option<u64> {
        self.thinking_tokens.or_else(|| {
            self.output_tokens_details
                .as_ref()
                .and_then(|d| d.thinking_tokens)
        })
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct OutputTokensDetails {
    pub thinking_tokens: Option<u64>,
}

/// One model's entry of `modelUsage` / `model_usage_since_last_result` (camelCase), or
/// their sum over models.
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub thinking_tokens: Option<u64>,
    #[serde(rename = "costUSD")]
    pub cost_usd: Option<f64>,
}

impl ModelUsage {
    fn add(self, o: ModelUsage) -> ModelUsage {
        fn sum<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        ModelUsage {
            input_tokens: sum(self.input_tokens, o.input_tokens),
            output_tokens: sum(self.output_tokens, o.output_tokens),
            cache_read_input_tokens: sum(self.cache_read_input_tokens, o.cache_read_input_tokens),
            cache_creation_input_tokens: sum(
                self.cache_creation_input_tokens,
                o.cache_creation_input_tokens,
            ),
            thinking_tokens: sum(self.thinking_tokens, o.thinking_tokens),
            cost_usd: sum(self.cost_usd, o.cost_usd),
        }
    }
}

/// A `{model: ModelUsage}` object (or null) summed over its models, without
/// allocating the model names.
fn sum_models<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ModelUsage>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<ModelUsage>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of model usages")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut total: Option<ModelUsage> = None;
            while let Some((IgnoredAny, u)) = map.next_entry::<IgnoredAny, ModelUsage>()? {
                total = Some(total.map_or(u, |t| t.add(u)));
            }
            Ok(total)
        }
    }
    d.deserialize_option(V)
}

/// `control_request` from the agent.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ControlRequestFrame<'a> {
    #[serde(borrow)]
    pub request_id: Option<Str<'a>>,
    #[serde(borrow)]
    pub request: Option<ControlRequestBody<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ControlRequestBody<'a> {
    #[serde(borrow)]
    pub subtype: Option<Str<'a>>,
    #[serde(borrow)]
    pub tool_name: Option<Str<'a>>,
    pub input: Option<Value>,
    #[serde(borrow)]
    pub tool_use_id: Option<Str<'a>>,
    #[serde(borrow)]
    pub description: Option<Str<'a>>,
}

/// `control_cancel_request`: the agent withdrew one of its requests.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ControlCancelFrame<'a> {
    #[serde(borrow)]
    pub request_id: Option<Str<'a>>,
}

/// `control_response`: the agent's answer to one of our control requests.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ControlResponseFrame<'a> {
    #[serde(borrow)]
    pub response: Option<ControlResponseBody<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ControlResponseBody<'a> {
    #[serde(borrow)]
    pub subtype: Option<Str<'a>>,
    #[serde(borrow)]
    pub request_id: Option<Str<'a>>,
    #[serde(borrow)]
    pub error: Option<Str<'a>>,
    pub response: Option<Value>,
}

/// `rate_limit_event`: `rate_limit_info` kept as JSON (read by `rate_limit.rs`, and
/// handed on verbatim in the event's details).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RateLimitEventFrame {
    pub rate_limit_info: Option<Value>,
}

fn by_type<'de, D: Deserializer<'de>>(ty: Str<'de>, d: D) -> Result<Frame<'de>, D::Error> {
    Ok(match ty.as_str() {
        "system" => Frame::System(Deserialize::deserialize(d)?),
        "assistant" => Frame::Assistant(Deserialize::deserialize(d)?),
        "user" => Frame::User(Deserialize::deserialize(d)?),
        "stream_event" => Frame::StreamEvent(Deserialize::deserialize(d)?),
        "result" => Frame::Result(Deserialize::deserialize(d)?),
        "control_request" => Frame::ControlRequest(Deserialize::deserialize(d)?),
        "control_cancel_request" => Frame::ControlCancelRequest(Deserialize::deserialize(d)?),
        "control_response" => Frame::ControlResponse(Deserialize::deserialize(d)?),
        "artifact" => Frame::Artifact(Deserialize::deserialize(d)?),
        "rate_limit_event" => Frame::RateLimitEvent(Deserialize::deserialize(d)?),
        _ => {
            IgnoredAny::deserialize(d)?;
            Frame::Unknown(ty)
        }
    })
}

impl<'de: 'a, 'a> Deserialize<'de> for Frame<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Frame<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a stream-json frame object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let Some(first) = map.next_key::<Str<'de>>()? else {
                    return Ok(Frame::Untyped);
                };
                if first.as_str() == "type" {
                    let ty: Str<'de> = map.next_value()?;
                    return by_type(ty, MapAccessDeserializer::new(map));
                }
                // Slow path: `type` is not the first key.
                let mut obj = Map::new();
                obj.insert(first.0.into_owned(), map.next_value()?);
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    obj.insert(k, v);
                }
                let Some(Value::String(ty)) = obj.get("type").cloned() else {
                    return Ok(Frame::Untyped);
                };
                by_type(Str(Cow::Owned(ty)), Value::Object(obj)).map_err(de::Error::custom)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_unescaped_strings() {
        let line = br#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}"#;
        let Frame::Assistant(f) = Frame::parse(line).unwrap() else {
            panic!("not assistant")
        };
        let m = f.message.unwrap();
        assert!(matches!(m.id.unwrap().0, Cow::Borrowed("m1")));
        let Some(Content::Blocks(b)) = m.content else {
            panic!("no blocks")
        };
        assert_eq!(opt(&b[0].text), Some("hi"));
    }

    #[test]
    fn type_not_first_and_unknown_types() {
        let f = Frame::parse(br#"{"subtype":"init","type":"system","session_id":"s\n"}"#).unwrap();
        let Frame::System(s) = f else {
            panic!("not system")
        };
        assert_eq!(opt(&s.session_id), Some("s\n"));
        assert!(matches!(
            Frame::parse(br#"{"type":"tool_progress","x":{"y":[1]}}"#).unwrap(),
            Frame::Unknown(t) if t.as_str() == "tool_progress"
        ));
        assert!(matches!(Frame::parse(b"{}").unwrap(), Frame::Untyped));
        assert!(matches!(
            Frame::parse(br#"{"a":1}"#).unwrap(),
            Frame::Untyped
        ));
        assert!(Frame::parse(b"[1]").is_err());
        assert!(Frame::parse(br#"{"type":"result"} x"#).is_err());
    }
}
