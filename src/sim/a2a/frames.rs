//! The sim's side of the A2A wire: agent messages, status and artifact updates and
//! the task object, in the spelling the sim was started with (the shared spelling
//! tables are the engine's, `capfleet_actors::bindings::a2a`).

use capfleet_actors::bindings::a2a::{Spelling, TaskState};
use serde_json::{Map, Value, json};

/// Where frames of one task go: its ids and spelling.
#[derive(Debug, Clone)]
pub(super) struct Task {
    pub spelling: Spelling,
    pub id: String,
    pub context: String,
}

impl Task {
    fn v03(&self) -> bool {
        self.spelling == Spelling::V03
    }

    /// An agent message of `parts`.
    pub(super) fn message_obj(&self, message_id: &str, parts: Vec<Value>) -> Value {
        let mut m = Map::new();
        if self.v03() {
            m.insert("kind".into(), "message".into());
        }
        m.insert("messageId".into(), message_id.into());
        let role = if self.v03() { "agent" } else { "ROLE_AGENT" };
        m.insert("role".into(), role.into());
        m.insert("parts".into(), Value::Array(parts));
        m.insert("taskId".into(), self.id.clone().into());
        m.insert("contextId".into(), self.context.clone().into());
        Value::Object(m)
    }

    /// A stream response carrying a message.
    pub(super) fn message(&self, message_id: &str, parts: Vec<Value>) -> Value {
        let m = self.message_obj(message_id, parts);
        if self.v03() {
            m
        } else {
            json!({ "message": m })
        }
    }

    fn status_obj(&self, state: TaskState, message: Option<Value>) -> Value {
        let mut s = json!({ "state": state.spelled(self.spelling) });
        if let Some(m) = message {
            s["message"] = m;
        }
        s
    }

    /// The task itself, in `state`.
    pub(super) fn task(&self, state: TaskState) -> Value {
        let t = json!({ "id": self.id, "contextId": self.context, "status": self.status_obj(state, None) });
        if self.v03() {
            let mut t = t;
            t["kind"] = "task".into();
            t
        } else {
            json!({ "task": t })
        }
    }

    /// A status update; `message` is an agent message object.
    pub(super) fn status(&self, state: TaskState, message: Option<Value>) -> Value {
        let status = self.status_obj(state, message);
        if self.v03() {
            let done = state.is_terminal() || state.is_interrupted();
            json!({ "kind": "status-update", "taskId": self.id, "contextId": self.context,
                    "status": status, "final": done })
        } else {
            json!({ "statusUpdate": { "taskId": self.id, "contextId": self.context, "status": status } })
        }
    }

    /// An artifact update of one part.
    pub(super) fn artifact(
        &self,
        id: &str,
        name: &str,
        part: Value,
        append: bool,
        last: bool,
    ) -> Value {
        let a = json!({ "taskId": self.id, "contextId": self.context,
            "artifact": { "artifactId": id, "name": name, "parts": [part] },
            "append": append, "lastChunk": last });
        if self.v03() {
            let mut a = a;
            a["kind"] = "artifact-update".into();
            a
        } else {
            json!({ "artifactUpdate": a })
        }
    }

    /// A part with a media type: 1.0's `mediaType`, 0.3's `metadata.mimeType`.
    pub(super) fn typed(&self, mut part: Value, mime: &str) -> Value {
        if self.v03() {
            part["metadata"] = json!({ "mimeType": mime });
        } else {
            part["mediaType"] = mime.into();
        }
        part
    }
}

/// The card the sim serves at `base`: the CAP extension unless `plain`, the
/// interface of its spelling, a bearer scheme when it wants a token.
pub(super) fn card(base: &str, spelling: Spelling, plain: bool, bearer: bool) -> Value {
    let extensions: Vec<Value> = if plain {
        Vec::new()
    } else {
        vec![json!({ "uri": capfleet_actors::bindings::a2a::CAP_EXTENSION, "required": true })]
    };
    let mut c = json!({
        "name": "capfleet-sim", "description": "capfleet's scripted simulator agent over A2A",
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": { "streaming": true, "extensions": extensions },
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{ "id": "script", "name": "scripted turns", "description": "plays its script", "tags": ["sim"] }],
    });
    match spelling {
        Spelling::V1 => {
            c["supportedInterfaces"] =
                json!([{ "url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }]);
        }
        Spelling::V03 => {
            c["url"] = base.into();
            c["preferredTransport"] = "JSONRPC".into();
            c["protocolVersion"] = "0.3.0".into();
        }
    }
    if bearer {
        c["securitySchemes"] = match spelling {
            Spelling::V1 => {
                json!({ "token": { "httpAuthSecurityScheme": { "scheme": "Bearer" } } })
            }
            Spelling::V03 => json!({ "token": { "type": "http", "scheme": "bearer" } }),
        };
    }
    c
}

/// What a task has said so far, as `GetTask` / `tasks/get` answers it: its agent
/// messages (history), its artifacts (chunks joined) and its latest status.
#[derive(Debug)]
pub(super) struct Snapshot {
    task: Task,
    history: Vec<Value>,
    artifacts: Vec<Value>,
    status: Value,
}

impl Snapshot {
    pub(super) fn new(task: &Task) -> Snapshot {
        let status = json!({ "state": TaskState::Submitted.spelled(task.spelling) });
        Snapshot {
            task: task.clone(),
            history: Vec::new(),
            artifacts: Vec::new(),
            status,
        }
    }

    /// Take in a stream response the task sent.
    pub(super) fn record(&mut self, v: &Value) {
        let kind = v.get("kind").and_then(Value::as_str);
        let inner = |key: &str, k03: &str| v.get(key).or((kind == Some(k03)).then_some(v));
        if let Some(m) = inner("message", "message") {
            self.history.push(m.clone());
        } else if let Some(s) = inner("statusUpdate", "status-update").and_then(|u| u.get("status"))
        {
            if let Some(m) = s.get("message") {
                self.history.push(m.clone());
            }
            self.status = s.clone();
        } else if let Some(a) = inner("artifactUpdate", "artifact-update") {
            let append = a.get("append").and_then(Value::as_bool) == Some(true);
            let (Some(art), Some(last)) = (a.get("artifact"), self.artifacts.last_mut()) else {
                self.artifacts.extend(a.get("artifact").cloned());
                return;
            };
            let joined = append
                && last["artifactId"] == art["artifactId"]
                && last["parts"][0]["text"].is_string();
            if joined {
                let more = art["parts"][0]["text"].as_str().unwrap_or_default();
                let text = format!(
                    "{}{more}",
                    last["parts"][0]["text"].as_str().unwrap_or_default()
                );
                last["parts"][0]["text"] = text.into();
            } else {
                self.artifacts.push(art.clone());
            }
        }
    }

    /// The task object, in the sim's spelling.
    pub(super) fn task(&self) -> Value {
        let mut t = json!({ "id": self.task.id, "contextId": self.task.context,
            "status": self.status, "history": self.history, "artifacts": self.artifacts });
        if self.task.v03() {
            t["kind"] = "task".into();
        }
        t
    }
}
