//! [`CapEvent`]: one value per core event kind, tagged by `"kind"` on the wire.
//!
//! Serializing writes `{"kind": ..., <fields>, "_meta": ..., <extra>}`.
//! Deserializing goes through [`super::decode::decode_value`], so the serde path
//! and the decoder validate alike.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::agent_events::{
    Artifact, AskUser, ErrorEvent, FsChange, PermissionRequest, Plan, PlanEntry, PtyRawBytes,
    SessionReady, TextChunk, Thought, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage,
};
use super::control_events::{AskUserAnswer, Cancel, PermissionResponse, UserInputInject};
use super::errors::ErrorKind;
use super::kinds::EventKind;
use super::meta::{HasMeta, Meta};
use super::nullable::Nullable;
use super::session_config::SessionConfig;
use super::vocab::{CancelScope, Channel, Decision, Direction, FsEvent, RiskLevel};

/// The protocol URI carried by `cap.session.ready.version`.
pub const PROTOCOL_VERSION: &str = "cap-protocol/v1";

#[derive(Serialize)]
struct Tagged<'a, T> {
    kind: &'static str,
    #[serde(flatten)]
    event: &'a T,
}

macro_rules! cap_events {
    ($($(#[$doc:meta])* $variant:ident($ty:ty),)+) => {
        /// A CAP core event. Variants are named like [`EventKind`]'s.
        #[derive(Debug, Clone, PartialEq)]
        pub enum CapEvent {
            $($(#[$doc])* $variant($ty),)+
        }

        impl CapEvent {
            /// The kind, whose [`EventKind::spec`] row holds direction and rules.
            pub fn event_kind(&self) -> EventKind {
                match self {
                    $(CapEvent::$variant(_) => EventKind::$variant,)+
                }
            }

            /// Fields outside the spec, kept verbatim.
            pub fn extra(&self) -> &Map<String, Value> {
                match self {
                    $(CapEvent::$variant(e) => &e.extra,)+
                }
            }

            /// Reads the typed event of `kind` straight from `json`, the text of an
            /// event capfleet encoded itself (a journal's): no `Value` of the whole
            /// event, none of the checks it passed when it was first decoded. `None`
            /// when the text is no such event.
            pub(crate) fn from_trusted_json(kind: EventKind, json: &str) -> Option<Self> {
                Some(match kind {
                    $(EventKind::$variant => {
                        let mut e: $ty = serde_json::from_str(json).ok()?;
                        // The tag, taken by `extra` (it keeps every other field).
                        e.extra.shift_remove("kind");
                        CapEvent::$variant(e)
                    })+
                })
            }

            /// Builds the typed event from a validated object without `"kind"`.
            pub(crate) fn from_object(
                kind: EventKind,
                obj: Map<String, Value>,
            ) -> Result<Self, serde_json::Error> {
                let v = Value::Object(obj);
                Ok(match kind {
                    $(EventKind::$variant => CapEvent::$variant(serde_json::from_value(v)?),)+
                })
            }
        }

        impl HasMeta for CapEvent {
            fn meta(&self) -> Option<&Meta> {
                match self {
                    $(CapEvent::$variant(e) => e.meta.as_ref(),)+
                }
            }
            fn meta_mut(&mut self) -> &mut Option<Meta> {
                match self {
                    $(CapEvent::$variant(e) => &mut e.meta,)+
                }
            }
        }

        impl Serialize for CapEvent {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let kind = self.kind();
                match self {
                    $(CapEvent::$variant(event) => Tagged { kind, event }.serialize(s),)+
                }
            }
        }

        $(impl From<$ty> for CapEvent {
            fn from(e: $ty) -> Self {
                CapEvent::$variant(e)
            }
        })+
    };
}

cap_events! {
    /// `cap.session.ready`
    SessionReady(SessionReady),
    /// `cap.text_chunk`
    TextChunk(TextChunk),
    /// `cap.tool_call.start`
    ToolCallStart(ToolCallStart),
    /// `cap.tool_call.delta`
    ToolCallDelta(ToolCallDelta),
    /// `cap.tool_call.end`
    ToolCallEnd(ToolCallEnd),
    /// `cap.plan`
    Plan(Plan),
    /// `cap.thought`
    Thought(Thought),
    /// `cap.ask_user`
    AskUser(AskUser),
    /// `cap.permission.request`
    PermissionRequest(PermissionRequest),
    /// `cap.usage`
    Usage(Usage),
    /// `cap.error`
    Error(ErrorEvent),
    /// `cap.artifact`
    Artifact(Artifact),
    /// `cap.fs.change`
    FsChange(FsChange),
    /// `cap.pty.raw_bytes`
    PtyRawBytes(PtyRawBytes),
    /// `cap.user_input.inject`
    UserInputInject(UserInputInject),
    /// `cap.cancel`
    Cancel(Cancel),
    /// `cap.session.config`
    SessionConfig(SessionConfig),
    /// `cap.ask_user.answer`
    AskUserAnswer(AskUserAnswer),
    /// `cap.permission.response`
    PermissionResponse(PermissionResponse),
}

impl<'de> Deserialize<'de> for CapEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        super::decode::decode_value(value).map_err(serde::de::Error::custom)
    }
}

/// Constructors for drivers and the orchestrator.
impl CapEvent {
    /// The wire name, e.g. `cap.text_chunk`.
    pub fn kind(&self) -> &'static str {
        self.event_kind().wire()
    }

    /// Which way the event flows: agent to orchestrator or back.
    pub fn direction(&self) -> Direction {
        self.event_kind().direction()
    }

    /// `cap.session.ready` with `version` set to [`PROTOCOL_VERSION`].
    pub fn ready(session_id: Option<&str>) -> Self {
        CapEvent::SessionReady(SessionReady {
            version: Nullable::Value(PROTOCOL_VERSION.to_owned()),
            session_id: session_id.map(str::to_owned).into(),
            ..Default::default()
        })
    }

    /// `cap.text_chunk` on the assistant channel.
    pub fn text(message_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self::text_on(Channel::Assistant, message_id, text)
    }

    /// `cap.text_chunk` on the given channel.
    pub fn text_on(
        channel: Channel,
        message_id: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        CapEvent::TextChunk(TextChunk {
            message_id: Nullable::Value(message_id.into()),
            text: text.into(),
            channel: Some(channel),
            ..Default::default()
        })
    }

    /// `cap.thought` for a message.
    pub fn thought(message_id: impl Into<String>, text: impl Into<String>) -> Self {
        CapEvent::Thought(Thought {
            message_id: Nullable::Value(message_id.into()),
            text: text.into(),
            ..Default::default()
        })
    }

    /// `cap.tool_call.start` with its input.
    pub fn tool_start(call_id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        CapEvent::ToolCallStart(ToolCallStart {
            call_id: call_id.into(),
            name: name.into(),
            input: Nullable::Value(input),
            ..Default::default()
        })
    }

    /// `cap.tool_call.delta`: one piece of a running call's output.
    pub fn tool_delta(call_id: impl Into<String>, output_chunk: impl Into<String>) -> Self {
        CapEvent::ToolCallDelta(ToolCallDelta {
            call_id: call_id.into(),
            output_chunk: output_chunk.into(),
            ..Default::default()
        })
    }

    /// `cap.tool_call.end` with the call's result.
    pub fn tool_end(
        call_id: impl Into<String>,
        output: Option<Value>,
        is_error: bool,
        duration_ms: Option<u64>,
    ) -> Self {
        CapEvent::ToolCallEnd(ToolCallEnd {
            call_id: call_id.into(),
            output: output.into(),
            is_error: Nullable::Value(is_error),
            duration_ms: duration_ms.into(),
            ..Default::default()
        })
    }

    /// `cap.plan` with these entries.
    pub fn plan(entries: Vec<PlanEntry>) -> Self {
        CapEvent::Plan(Plan {
            entries,
            ..Default::default()
        })
    }

    /// `cap.ask_user` with an optional form.
    pub fn ask_user(
        ask_id: impl Into<String>,
        prompt: impl Into<String>,
        form: Option<Value>,
    ) -> Self {
        CapEvent::AskUser(AskUser {
            ask_id: ask_id.into(),
            prompt: prompt.into(),
            form: form.into(),
            ..Default::default()
        })
    }

    /// `cap.ask_user.answer` to the ask with this id.
    pub fn ask_answer(ask_id: impl Into<String>, value: Value) -> Self {
        CapEvent::AskUserAnswer(AskUserAnswer {
            ask_id: ask_id.into(),
            value,
            meta: None,
            extra: Map::new(),
        })
    }

    /// `cap.permission.request` without a scope.
    pub fn permission_request(
        req_id: impl Into<String>,
        tool: impl Into<String>,
        intent: Option<Value>,
        risk_level: RiskLevel,
    ) -> Self {
        CapEvent::PermissionRequest(PermissionRequest {
            req_id: req_id.into(),
            tool: tool.into(),
            intent: intent.into(),
            scope: None,
            risk_level,
            meta: None,
            extra: Map::new(),
        })
    }

    /// `cap.permission.response` to the request with this id.
    pub fn permission_response(req_id: impl Into<String>, decision: Decision) -> Self {
        CapEvent::PermissionResponse(PermissionResponse {
            req_id: req_id.into(),
            decision,
            meta: None,
            extra: Map::new(),
        })
    }

    /// `cap.error` without details.
    pub fn error(code: ErrorKind, message: impl Into<String>, retryable: bool) -> Self {
        CapEvent::Error(ErrorEvent {
            code,
            message: message.into(),
            retryable: Nullable::Value(retryable),
            details: Nullable::Absent,
            meta: None,
            extra: Map::new(),
        })
    }

    /// `cap.artifact` with inline content.
    pub fn artifact(
        artifact_id: impl Into<String>,
        mime_type: impl Into<String>,
        name: Option<String>,
        content: Value,
    ) -> Self {
        CapEvent::Artifact(Artifact {
            artifact_id: artifact_id.into(),
            mime_type: mime_type.into(),
            name: name.into(),
            content: Nullable::Value(content),
            ..Default::default()
        })
    }

    /// `cap.fs.change`; `new_path` only for a rename.
    pub fn fs_change(
        subscription_id: impl Into<String>,
        path: impl Into<String>,
        event: FsEvent,
        new_path: Option<String>,
    ) -> Self {
        CapEvent::FsChange(FsChange {
            subscription_id: subscription_id.into(),
            path: path.into(),
            event,
            new_path: new_path.into(),
            meta: None,
            extra: Map::new(),
        })
    }

    /// `cap.pty.raw_bytes` for one chunk of raw PTY output.
    pub fn pty_raw(bytes: &[u8]) -> Self {
        CapEvent::PtyRawBytes(PtyRawBytes::from_bytes(bytes))
    }

    /// `cap.user_input.inject` with one text block.
    pub fn inject_text(text: &str) -> Self {
        CapEvent::UserInputInject(UserInputInject::text(text))
    }

    /// `cap.cancel` of the turn or the session.
    pub fn cancel(scope: CancelScope, reason: Option<String>) -> Self {
        CapEvent::Cancel(Cancel {
            scope,
            reason: reason.into(),
            meta: None,
            extra: Map::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kind_tag_comes_first() {
        let e = CapEvent::text("m1", "hi");
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(
            s,
            r#"{"kind":"cap.text_chunk","message_id":"m1","text":"hi","channel":"assistant"}"#
        );
        assert_eq!(e.direction(), Direction::AgentToOrchestrator);
        let back: CapEvent = serde_json::from_str(&s).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn constructors_round_trip() {
        let events = [
            CapEvent::ready(Some("s1")),
            CapEvent::thought("m", "t"),
            CapEvent::tool_start("c", "Bash", json!({})),
            CapEvent::tool_delta("c", "x"),
            CapEvent::tool_end("c", Some(json!("ok")), false, Some(3)),
            CapEvent::plan(vec![PlanEntry::new(
                "p1",
                "do",
                super::super::PlanStatus::Pending,
            )]),
            CapEvent::ask_user("a", "?", None),
            CapEvent::ask_answer("a", json!("pg")),
            CapEvent::permission_request("r", "Bash", None, RiskLevel::High),
            CapEvent::permission_response("r", Decision::Deny),
            CapEvent::error(ErrorKind::RateLimit, "slow down", true),
            CapEvent::artifact("a1", "text/plain", None, json!("x")),
            CapEvent::fs_change("s", "/a", FsEvent::Renamed, Some("/b".into())),
            CapEvent::pty_raw(b"\x1b[0m"),
            CapEvent::inject_text("hi"),
            CapEvent::cancel(CancelScope::Session, None),
            SessionConfig::new("/w").into(),
        ];
        for e in events {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["kind"], json!(e.kind()));
            let back: CapEvent = serde_json::from_value(v).unwrap();
            assert_eq!(back, e);
        }
    }
}
