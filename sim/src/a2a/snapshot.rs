//! What a sim task has said so far, as `GetTask` / `tasks/get` answers it (durable
//! runs read a cut turn's task back from it).

use capfleet_wire::bindings::a2a::outbound::TaskFrames;
use capfleet_wire::bindings::a2a::{Spelling, TaskState};
use serde_json::{Value, json};

/// What a task has said so far, as `GetTask` / `tasks/get` answers it: its agent
/// messages (history), its artifacts (chunks joined) and its latest status.
#[derive(Debug)]
pub(super) struct Snapshot {
    task: TaskFrames,
    history: Vec<Value>,
    artifacts: Vec<Value>,
    status: Value,
}

impl Snapshot {
    pub(super) fn new(task: &TaskFrames) -> Snapshot {
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
        if self.task.spelling == Spelling::V03 {
            t["kind"] = "task".into();
        }
        t
    }
}
