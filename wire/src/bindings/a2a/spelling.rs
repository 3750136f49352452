//! The two spellings of A2A's JSON-RPC binding this driver speaks: 1.0
//! (`SendStreamingMessage`, `TASK_STATE_*`, `ROLE_USER`, parts told apart by which
//! field they carry, the `A2A-Version` header) and 0.3 (`message/stream`, lowercase
//! states, `kind` discriminators on messages, parts and stream results, `final`,
//! the `X-A2A-Extensions` header).
//! Everything that differs between them is here, as data and small builders.

use serde_json::{Map, Value, json};

/// A spelling of the A2A wire, negotiated once per peer from its card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Spelling {
    /// A2A 1.0.
    #[serde(rename = "1.0")]
    V1,
    /// A2A 0.3 (the spelling most deployed servers still speak).
    #[serde(rename = "0.3")]
    V03,
}

/// The JSON-RPC methods a driver calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A send answered once the task pauses or ends (no stream).
    Send,
    /// A streaming send: the turn's SSE stream.
    Stream,
    /// Read a task.
    Get,
    /// Cancel a task.
    Cancel,
    /// Re-attach to a task's stream after a drop.
    Resubscribe,
}

impl Spelling {
    /// How `resolve` and the session's first event name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Spelling::V1 => "1.0",
            Spelling::V03 => "0.3",
        }
    }

    /// The spelling of a card's `protocolVersion` (`1.0`, `0.3.0`, ...).
    pub fn of_version(version: &str) -> Option<Spelling> {
        let major_minor: Vec<&str> = version.trim().splitn(3, '.').take(2).collect();
        match major_minor.as_slice() {
            ["1", "0"] | ["1"] => Some(Spelling::V1),
            ["0", "3"] | ["0", "2"] => Some(Spelling::V03),
            _ => None,
        }
    }

    /// The method's name in this spelling.
    pub fn method(self, m: Method) -> &'static str {
        match (self, m) {
            (Spelling::V1, Method::Send) => "SendMessage",
            (Spelling::V1, Method::Stream) => "SendStreamingMessage",
            (Spelling::V1, Method::Get) => "GetTask",
            (Spelling::V1, Method::Cancel) => "CancelTask",
            (Spelling::V1, Method::Resubscribe) => "SubscribeToTask",
            (Spelling::V03, Method::Send) => "message/send",
            (Spelling::V03, Method::Stream) => "message/stream",
            (Spelling::V03, Method::Get) => "tasks/get",
            (Spelling::V03, Method::Cancel) => "tasks/cancel",
            (Spelling::V03, Method::Resubscribe) => "tasks/resubscribe",
        }
    }

    /// The spelling and method a request's method name is (a server takes both).
    pub fn of_method(name: &str) -> Option<(Spelling, Method)> {
        const METHODS: [Method; 5] = [
            Method::Send,
            Method::Stream,
            Method::Get,
            Method::Cancel,
            Method::Resubscribe,
        ];
        [Spelling::V1, Spelling::V03].into_iter().find_map(|sp| {
            METHODS
                .into_iter()
                .find(|m| sp.method(*m) == name)
                .map(|m| (sp, m))
        })
    }

    /// The `A2A-Version` header value, sent with every 1.0 request.
    pub fn version_header(self) -> Option<&'static str> {
        match self {
            Spelling::V1 => Some("1.0"),
            Spelling::V03 => None,
        }
    }

    /// The header a client names the extensions it activates in (`A2A-Extensions`;
    /// 0.3's `X-A2A-Extensions`), lower-cased as HTTP/2 sends it.
    pub fn extensions_header(self) -> &'static str {
        match self {
            Spelling::V1 => "a2a-extensions",
            Spelling::V03 => "x-a2a-extensions",
        }
    }

    /// A text part.
    pub fn text_part(self, text: &str) -> Value {
        match self {
            Spelling::V1 => json!({ "text": text }),
            Spelling::V03 => json!({ "kind": "text", "text": text }),
        }
    }

    /// A data part.
    pub fn data_part(self, data: Value) -> Value {
        match self {
            Spelling::V1 => json!({ "data": data }),
            Spelling::V03 => json!({ "kind": "data", "data": data }),
        }
    }

    /// A user message of `parts`, in `context` and (continuing it) `task`.
    pub fn user_message(
        self,
        message_id: &str,
        parts: Vec<Value>,
        context: Option<&str>,
        task: Option<&str>,
    ) -> Value {
        let mut m = Map::new();
        if self == Spelling::V03 {
            m.insert("kind".into(), "message".into());
        }
        m.insert("messageId".into(), message_id.into());
        let role = match self {
            Spelling::V1 => "ROLE_USER",
            Spelling::V03 => "user",
        };
        m.insert("role".into(), role.into());
        m.insert("parts".into(), Value::Array(parts));
        if let Some(c) = context {
            m.insert("contextId".into(), c.into());
        }
        if let Some(t) = task {
            m.insert("taskId".into(), t.into());
        }
        Value::Object(m)
    }

    /// The params of a streaming send of `message`.
    pub fn send_params(message: Value) -> Value {
        json!({ "message": message })
    }

    /// The params naming a task (get, cancel, resubscribe).
    pub fn task_params(task: &str) -> Value {
        json!({ "id": task })
    }

    /// A JSON-RPC request.
    pub fn request(self, id: u64, m: Method, params: Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": self.method(m), "params": params })
    }
}

/// A task's state, whichever spelling named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    Unknown,
}

impl TaskState {
    /// Parses `TASK_STATE_INPUT_REQUIRED` (1.0) and `input-required` (0.3) alike.
    pub fn parse(s: &str) -> TaskState {
        let s = s.strip_prefix("TASK_STATE_").unwrap_or(s);
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "submitted" => TaskState::Submitted,
            "working" => TaskState::Working,
            "input-required" => TaskState::InputRequired,
            "auth-required" => TaskState::AuthRequired,
            "completed" => TaskState::Completed,
            "canceled" | "cancelled" => TaskState::Canceled,
            "failed" => TaskState::Failed,
            "rejected" => TaskState::Rejected,
            _ => TaskState::Unknown,
        }
    }

    /// The state as `spelling` writes it.
    pub fn spelled(self, spelling: Spelling) -> &'static str {
        let (v1, v03) = match self {
            TaskState::Submitted => ("TASK_STATE_SUBMITTED", "submitted"),
            TaskState::Working => ("TASK_STATE_WORKING", "working"),
            TaskState::InputRequired => ("TASK_STATE_INPUT_REQUIRED", "input-required"),
            TaskState::AuthRequired => ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
            TaskState::Completed => ("TASK_STATE_COMPLETED", "completed"),
            TaskState::Canceled => ("TASK_STATE_CANCELED", "canceled"),
            TaskState::Failed => ("TASK_STATE_FAILED", "failed"),
            TaskState::Rejected => ("TASK_STATE_REJECTED", "rejected"),
            TaskState::Unknown => ("TASK_STATE_UNSPECIFIED", "unknown"),
        };
        match spelling {
            Spelling::V1 => v1,
            Spelling::V03 => v03,
        }
    }

    /// A state no further update follows.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Canceled | TaskState::Failed | TaskState::Rejected
        )
    }

    /// A state in which the task waits for the client (the stream then ends).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// A part, whichever spelling wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    Text(&'a str),
    Data(&'a Value),
    /// A file: inline bytes (base64) or a URL, with its media type.
    File {
        media_type: Option<&'a str>,
        name: Option<&'a str>,
        inline: Option<&'a str>,
        url: Option<&'a str>,
    },
    Other,
}

impl<'a> Part<'a> {
    /// Reads a 1.0 part (`text` / `data` / `raw` / `url` present) or a 0.3 one
    /// (`kind` = `text` / `data` / `file` with `file.bytes` / `file.uri`).
    pub fn read(v: &'a Value) -> Part<'a> {
        if let Some(t) = v.get("text").and_then(Value::as_str) {
            return Part::Text(t);
        }
        if let Some(d) = v.get("data") {
            return Part::Data(d);
        }
        let str_of = |o: &'a Value, k: &str| o.get(k).and_then(Value::as_str);
        if let Some(f) = v.get("file") {
            return Part::File {
                media_type: str_of(f, "mimeType"),
                name: str_of(f, "name"),
                inline: str_of(f, "bytes"),
                url: str_of(f, "uri"),
            };
        }
        if v.get("raw").is_some() || v.get("url").is_some() {
            return Part::File {
                media_type: str_of(v, "mediaType"),
                name: str_of(v, "filename"),
                inline: str_of(v, "raw"),
                url: str_of(v, "url"),
            };
        }
        Part::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_in_both_spellings_and_round_trip() {
        for s in [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::AuthRequired,
            TaskState::Completed,
            TaskState::Canceled,
            TaskState::Failed,
            TaskState::Rejected,
        ] {
            for sp in [Spelling::V1, Spelling::V03] {
                assert_eq!(TaskState::parse(s.spelled(sp)), s, "{s:?} {sp:?}");
            }
        }
        assert_eq!(TaskState::parse("input_required"), TaskState::InputRequired);
    }

    #[test]
    fn messages_carry_each_spellings_discriminators() {
        let v1 = Spelling::V1.user_message("m1", vec![Spelling::V1.text_part("hi")], None, None);
        assert_eq!(v1["role"], "ROLE_USER");
        assert!(v1.get("kind").is_none());
        assert_eq!(v1["parts"][0], json!({"text": "hi"}));
        let v03 = Spelling::V03.user_message(
            "m1",
            vec![Spelling::V03.text_part("hi")],
            Some("c"),
            Some("t"),
        );
        assert_eq!(v03["kind"], "message");
        assert_eq!(v03["role"], "user");
        assert_eq!(v03["parts"][0]["kind"], "text");
        assert_eq!(
            (v03["contextId"].as_str(), v03["taskId"].as_str()),
            (Some("c"), Some("t"))
        );
        assert_eq!(
            Spelling::V03.request(3, Method::Cancel, json!({}))["method"],
            "tasks/cancel"
        );
        assert_eq!(
            Spelling::V1.request(3, Method::Resubscribe, json!({}))["method"],
            "SubscribeToTask"
        );
    }

    #[test]
    fn a_method_name_says_its_spelling() {
        assert_eq!(
            Spelling::of_method("SendStreamingMessage"),
            Some((Spelling::V1, Method::Stream))
        );
        assert_eq!(
            Spelling::of_method("tasks/resubscribe"),
            Some((Spelling::V03, Method::Resubscribe))
        );
        assert_eq!(Spelling::of_method("tasks/list"), None);
    }

    #[test]
    fn versions_pick_a_spelling() {
        assert_eq!(Spelling::of_version("1.0"), Some(Spelling::V1));
        assert_eq!(Spelling::of_version("0.3.0"), Some(Spelling::V03));
        assert_eq!(Spelling::of_version("2.0"), None);
    }
}
