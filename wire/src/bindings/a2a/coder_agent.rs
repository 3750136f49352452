//! The tool-call data parts of Gemini CLI's A2A server (`@google/gemini-cli-a2a-server`,
//! its "coder agent"): a plain A2A agent (no CAP extension) that reports each tool
//! call as a data part `{request: {callId, name, args}, status, confirmationDetails?}`
//! in a status update whose `metadata.coderAgent.kind` is `tool-call-update` or
//! `tool-call-confirmation`, and takes a tool's approval as a data part
//! `{callId, outcome}` in the next message to the task.
//!
//! Mapped: `awaiting_approval` -> `cap.permission.request` (`req_id` = the call id);
//! `executing` -> `cap.tool_call.start`; `success` / `error` / `cancelled` of a started
//! call -> `cap.tool_call.end`. A decision goes back as `proceed_once`,
//! `proceed_always` or `cancel`.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::protocol::{CapEvent, Decision, RiskLevel};

/// The calls of one peer this dialect has seen: which were started, which wait for
/// an approval.
#[derive(Debug, Default)]
pub(crate) struct CoderAgent {
    started: HashSet<String>,
    awaiting: HashSet<String>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

impl CoderAgent {
    /// The CAP event a data part of this dialect means (`None`: not one of its tool
    /// calls, or nothing new).
    pub(crate) fn on_data(&mut self, data: &Value) -> Option<CapEvent> {
        let call = str_at(data, &["request", "callId"])?.to_owned();
        let name = str_at(data, &["request", "name"]).unwrap_or("tool");
        let args = data
            .get("request")
            .and_then(|r| r.get("args"))
            .cloned()
            .unwrap_or(Value::Null);
        match str_at(data, &["status"])? {
            "awaiting_approval" if self.awaiting.insert(call.clone()) => {
                let risk = match str_at(data, &["confirmationDetails", "type"]) {
                    Some("exec") => RiskLevel::High,
                    _ => RiskLevel::Medium,
                };
                Some(CapEvent::permission_request(call, name, Some(args), risk))
            }
            "executing" if self.started.insert(call.clone()) => {
                Some(CapEvent::tool_start(call, name, args))
            }
            status @ ("success" | "error" | "cancelled") if self.started.remove(&call) => {
                let output = str_at(data, &["response", "resultDisplay"]).map(Value::from);
                Some(CapEvent::tool_end(call, output, status != "success", None))
            }
            _ => None,
        }
    }

    /// The data part answering the approval `req_id` asked for, if this dialect asked it.
    pub(crate) fn answer(&mut self, req_id: &str, decision: Decision) -> Option<Value> {
        if !self.awaiting.remove(req_id) {
            return None;
        }
        let outcome = match decision {
            Decision::AllowOnce => "proceed_once",
            Decision::AllowAlways => "proceed_always",
            Decision::Deny => "cancel",
        };
        Some(json!({ "callId": req_id, "outcome": outcome }))
    }

    /// Whether an approval is still unanswered (the task's `input-required` is then
    /// that question, not the turn's end).
    #[cfg(test)]
    pub(crate) fn is_awaiting(&self) -> bool {
        !self.awaiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(status: &str) -> Value {
        json!({"request": {"callId": "sh-1", "name": "run_shell_command", "args": {"command": "ls"}},
            "status": status, "confirmationDetails": {"type": "exec"},
            "response": {"resultDisplay": "a b"}})
    }

    #[test]
    fn an_approval_a_run_and_the_answer() {
        let mut c = CoderAgent::default();
        assert!(c.on_data(&part("validating")).is_none());
        let Some(CapEvent::PermissionRequest(p)) = c.on_data(&part("awaiting_approval")) else {
            panic!("no permission request")
        };
        assert_eq!(
            (p.req_id.as_str(), p.tool.as_str()),
            ("sh-1", "run_shell_command")
        );
        assert!(c.on_data(&part("awaiting_approval")).is_none(), "once");
        assert!(c.is_awaiting());
        assert_eq!(
            c.answer("sh-1", Decision::AllowOnce),
            Some(json!({"callId": "sh-1", "outcome": "proceed_once"}))
        );
        assert!(!c.is_awaiting() && c.answer("sh-1", Decision::Deny).is_none());
        assert!(matches!(
            c.on_data(&part("executing")),
            Some(CapEvent::ToolCallStart(_))
        ));
        let Some(CapEvent::ToolCallEnd(e)) = c.on_data(&part("success")) else {
            panic!("no end")
        };
        assert_eq!(e.output.get(), Some(&json!("a b")));
        assert!(c.on_data(&json!({"text": "x"})).is_none());
    }
}
