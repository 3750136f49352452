//! The server's side of the A2A wire, in either spelling: agent messages, status and
//! artifact updates, the task object, and the agent card. What `capfleet sim --mode
//! a2a` and `capfleet serve --expose` send; the driver reads the same frames with
//! [`super::frames`].

use serde_json::{Map, Value, json};

use super::card::CAP_EXTENSION;
use super::spelling::{Spelling, TaskState};

/// Where frames of one task go: its ids and the spelling of the request that reads them.
#[derive(Debug, Clone)]
pub struct TaskFrames {
    pub spelling: Spelling,
    pub id: String,
    pub context: String,
}

impl TaskFrames {
    fn v03(&self) -> bool {
        self.spelling == Spelling::V03
    }

    /// An agent message of `parts`.
    pub fn message_obj(&self, message_id: &str, parts: Vec<Value>) -> Value {
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
    pub fn message(&self, message_id: &str, parts: Vec<Value>) -> Value {
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

    /// The task object itself (as `GetTask` and `CancelTask` answer it): its status
    /// (and that status's message), its artifacts and history when there are any.
    pub fn task_obj(
        &self,
        state: TaskState,
        message: Option<Value>,
        artifacts: Vec<Value>,
        history: Vec<Value>,
    ) -> Value {
        let mut t = json!({ "id": self.id, "contextId": self.context,
            "status": self.status_obj(state, message) });
        if !artifacts.is_empty() {
            t["artifacts"] = Value::Array(artifacts);
        }
        if !history.is_empty() {
            t["history"] = Value::Array(history);
        }
        if self.v03() {
            t["kind"] = "task".into();
        }
        t
    }

    /// A stream response carrying the task in `state`.
    pub fn task(&self, state: TaskState) -> Value {
        let t = self.task_obj(state, None, Vec::new(), Vec::new());
        self.wrap_task(t)
    }

    /// A stream response carrying the task object `t` (1.0 wraps it in `task`).
    pub fn wrap_task(&self, t: Value) -> Value {
        if self.v03() { t } else { json!({ "task": t }) }
    }

    /// A status update; `message` is an agent message object.
    pub fn status(&self, state: TaskState, message: Option<Value>) -> Value {
        let status = self.status_obj(state, message);
        if self.v03() {
            let done = state.is_terminal() || state.is_interrupted();
            json!({ "kind": "status-update", "taskId": self.id, "contextId": self.context,
                    "status": status, "final": done })
        } else {
            json!({ "statusUpdate": { "taskId": self.id, "contextId": self.context, "status": status } })
        }
    }

    /// An artifact object of `parts`.
    pub fn artifact_obj(id: &str, name: Option<&str>, parts: Vec<Value>) -> Value {
        let mut a = json!({ "artifactId": id, "parts": parts });
        if let Some(n) = name {
            a["name"] = n.into();
        }
        a
    }

    /// An artifact update of one part.
    pub fn artifact(&self, id: &str, name: &str, part: Value, append: bool, last: bool) -> Value {
        let a = json!({ "taskId": self.id, "contextId": self.context,
            "artifact": Self::artifact_obj(id, Some(name), vec![part]),
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
    pub fn typed(&self, mut part: Value, mime: &str) -> Value {
        if self.v03() {
            part["metadata"] = json!({ "mimeType": mime });
        } else {
            part["mediaType"] = mime.into();
        }
        part
    }
}

/// What an agent card offers (A2A §5), for [`card`].
#[derive(Debug, Clone)]
pub struct Offer<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub version: &'a str,
    /// The JSON-RPC endpoint.
    pub url: &'a str,
    /// The spellings served there: one interface each (1.0 first: clients pick in order).
    pub spellings: &'a [Spelling],
    /// Advertise the `cap-protocol/v1` extension.
    pub cap_extension: bool,
    /// Clients must activate it (a server that refuses plain A2A traffic, spec §13.5).
    pub cap_required: bool,
    /// A bearer token is required.
    pub bearer: bool,
    /// Skills: (id, name, description).
    pub skills: Vec<(String, String, String)>,
}

/// The agent card of `offer`: 1.0's `supportedInterfaces` (one JSON-RPC interface per
/// spelling) and, when 0.3 is served, 0.3's `url` / `preferredTransport` /
/// `protocolVersion` beside them (a 1.0 reader ignores those); the security scheme in
/// the spelling of the first interface (0.3's OpenAPI form when that is all there is).
pub fn card(offer: &Offer<'_>) -> Value {
    let extensions: Vec<Value> = if offer.cap_extension {
        vec![
            json!({ "uri": CAP_EXTENSION, "required": offer.cap_required,
            "description": "CAP events as data parts marked _meta.\"cap.kind\" (spec §11.3)" }),
        ]
    } else {
        Vec::new()
    };
    let skills: Vec<Value> = offer
        .skills
        .iter()
        .map(|(id, name, description)| {
            json!({ "id": id, "name": name, "description": description, "tags": ["cap"] })
        })
        .collect();
    let mut c = json!({
        "name": offer.name, "description": offer.description, "version": offer.version,
        "capabilities": { "streaming": true, "extensions": extensions },
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": skills,
    });
    let v1 = offer.spellings.contains(&Spelling::V1);
    if v1 {
        c["supportedInterfaces"] = offer
            .spellings
            .iter()
            .map(|s| {
                let version = match s {
                    Spelling::V1 => "1.0",
                    Spelling::V03 => "0.3.0",
                };
                json!({ "url": offer.url, "protocolBinding": "JSONRPC", "protocolVersion": version })
            })
            .collect();
    }
    if offer.spellings.contains(&Spelling::V03) {
        c["url"] = offer.url.into();
        c["preferredTransport"] = "JSONRPC".into();
        c["protocolVersion"] = "0.3.0".into();
    }
    if offer.bearer {
        c["securitySchemes"] = if v1 {
            json!({ "token": { "httpAuthSecurityScheme": { "scheme": "Bearer" } } })
        } else {
            json!({ "token": { "type": "http", "scheme": "bearer" } })
        };
        c["securityRequirements"] = json!([{ "schemes": { "token": { "list": [] } } }]);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::super::card::Card;
    use super::*;

    #[test]
    fn a_card_offering_both_spellings_reads_back_with_either() {
        let offer = Offer {
            name: "sim",
            description: "d",
            version: "1",
            url: "http://h/a2a/sim/",
            spellings: &[Spelling::V1, Spelling::V03],
            cap_extension: true,
            cap_required: true,
            bearer: true,
            skills: vec![("s".into(), "S".into(), "d".into())],
        };
        let card = Card::parse("http://h/card", &super::card(&offer)).unwrap();
        assert!(card.has_cap_extension());
        assert_eq!(card.choose().unwrap().spelling, Spelling::V1);
        let v03 = card.choose_spelling(Spelling::V03).unwrap();
        assert_eq!(v03.endpoint, "http://h/a2a/sim/");
        assert_eq!(card.schemes[0].kind, super::super::SchemeKind::Bearer);
    }

    #[test]
    fn a_task_object_carries_kind_only_in_0_3() {
        let t = |spelling| TaskFrames {
            spelling,
            id: "t".into(),
            context: "c".into(),
        };
        let v1 = t(Spelling::V1).task_obj(TaskState::Completed, None, Vec::new(), Vec::new());
        assert!(v1.get("kind").is_none());
        assert_eq!(v1["status"]["state"], "TASK_STATE_COMPLETED");
        let v03 = t(Spelling::V03).task(TaskState::Working);
        assert_eq!(
            (v03["kind"].as_str(), v03["status"]["state"].as_str()),
            (Some("task"), Some("working"))
        );
        assert_eq!(t(Spelling::V1).task(TaskState::Working)["task"]["id"], "t");
    }
}
