//! Claude's control requests: `can_use_tool` → `cap.permission.request` (scope and
//! risk from [`super::risk`]) or, for the `AskUserQuestion` tool, `cap.ask_user`;
//! their answers; `control_cancel_request` → [`Output::PermissionWithdrawn`].
//!
//! `AskUserQuestion` input `{"questions":[{"question","header","options":[{"label",
//! "description"}],"multiSelect"}]}` becomes a form (JSON Schema object) with one
//! property per question text: a string (or, for `multiSelect`, an array of strings)
//! whose `oneOf` lists the options (`const` = label). The answer value is an object
//! question → label(s), sent back as `updatedInput.answers`.

use serde_json::{Map, Value, json};

use super::frames::{ControlCancelFrame, ControlRequestFrame, opt};
use super::mapper::StreamJsonMapper;
use super::outbound;
use super::output::Output;
use super::risk;
use crate::protocol::{CapCode, CapEvent, Decision, HasMeta};

/// The tool whose permission request is really a question for the user.
pub(crate) const ASK_USER_TOOL: &str = "AskUserQuestion";
/// `_meta` key with the tool call a permission request / ask is about.
pub(crate) const META_TOOL_USE_ID: &str = "claude.tool_use_id";

/// What a pending request was turned into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingKind {
    Permission,
    Ask,
}

/// A `can_use_tool` awaiting our answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRequest {
    pub kind: PendingKind,
    pub tool_name: String,
    /// The tool input, echoed back as `updatedInput` on allow.
    pub input: Value,
    pub tool_use_id: Option<String>,
}

/// Why an answer could not be turned into a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("no pending agent request {0}")]
    UnknownRequest(String),
    #[error("request {0} is a cap.ask_user, not a permission request")]
    NotAPermission(String),
    #[error("request {0} is a permission request, not a cap.ask_user")]
    NotAnAsk(String),
    #[error("invalid answer to {req_id}: {reason}")]
    InvalidAnswer { req_id: String, reason: String },
}

impl ResponseError {
    /// The CAP error code to report to the orchestrator.
    pub fn code(&self) -> CapCode {
        match self {
            ResponseError::UnknownRequest(_) | ResponseError::NotAPermission(_) => {
                CapCode::UnknownPermission
            }
            ResponseError::NotAnAsk(_) | ResponseError::InvalidAnswer { .. } => {
                CapCode::InvalidAnswer
            }
        }
    }
}

impl StreamJsonMapper {
    pub(super) fn on_control_request(
        &mut self,
        f: ControlRequestFrame<'_>,
        out: &mut Vec<Output>,
    ) -> bool {
        let (Some(id), Some(req)) = (opt(&f.request_id), f.request) else {
            return false;
        };
        let subtype = opt(&req.subtype).unwrap_or("");
        if subtype != "can_use_tool" {
            out.push(Output::UnsupportedControlRequest {
                request_id: id.to_owned(),
                subtype: subtype.to_owned(),
            });
            return true;
        }
        let tool = opt(&req.tool_name).unwrap_or("");
        let input = req.input.unwrap_or_else(|| json!({}));
        let tool_use_id = opt(&req.tool_use_id).map(str::to_owned);
        let (kind, mut event) = if tool == ASK_USER_TOOL {
            let (prompt, form) = ask_form(&input);
            (PendingKind::Ask, CapEvent::ask_user(id, prompt, Some(form)))
        } else {
            let r = risk::classify(tool, Some(&input));
            let mut e = CapEvent::permission_request(id, tool, Some(input.clone()), r.level);
            if let CapEvent::PermissionRequest(p) = &mut e {
                p.scope = Some(r.scope);
            }
            (PendingKind::Permission, e)
        };
        if let Some(t) = &tool_use_id {
            event.set_meta(META_TOOL_USE_ID, Value::from(t.as_str()));
        }
        if let Some(d) = opt(&req.description) {
            event.set_meta("claude.description", Value::from(d));
        }
        self.pending.insert(
            id.to_owned(),
            PendingRequest {
                kind,
                tool_name: tool.to_owned(),
                input,
                tool_use_id,
            },
        );
        self.emit(out, event);
        true
    }

    pub(super) fn on_control_cancel(
        &mut self,
        f: ControlCancelFrame<'_>,
        out: &mut Vec<Output>,
    ) -> bool {
        let Some(id) = opt(&f.request_id) else {
            return false;
        };
        let tool_use_id = self.pending.remove(id).and_then(|p| p.tool_use_id);
        out.push(Output::PermissionWithdrawn {
            req_id: id.to_owned(),
            tool_use_id,
        });
        true
    }

    /// Emits [`Output::PermissionWithdrawn`] for every request still pending (the
    /// turn ended without them being answered).
    pub(super) fn withdraw_all(&mut self, out: &mut Vec<Output>) {
        let mut ids: Vec<_> = self.pending.drain().collect();
        ids.sort_by(|a, b| a.0.cmp(&b.0));
        for (req_id, p) in ids {
            out.push(Output::PermissionWithdrawn {
                req_id,
                tool_use_id: p.tool_use_id,
            });
        }
    }

    pub fn pending(&self, req_id: &str) -> Option<&PendingRequest> {
        self.pending.get(req_id)
    }

    /// Ids of the requests awaiting an answer.
    pub fn pending_ids(&self) -> impl Iterator<Item = &str> {
        self.pending.keys().map(String::as_str)
    }

    /// The `control_response` line for `cap.permission.response`; the request stops
    /// being pending. `deny_message` goes to the model on deny.
    pub fn respond_permission(
        &mut self,
        req_id: &str,
        decision: Decision,
        deny_message: Option<&str>,
    ) -> Result<String, ResponseError> {
        match self.pending.get(req_id) {
            None => Err(ResponseError::UnknownRequest(req_id.to_owned())),
            Some(p) if p.kind != PendingKind::Permission => {
                Err(ResponseError::NotAPermission(req_id.to_owned()))
            }
            Some(p) => {
                let line = outbound::permission_response(req_id, decision, &p.input, deny_message);
                self.pending.remove(req_id);
                Ok(line)
            }
        }
    }

    /// The `control_response` line declining any pending request (a permission denied,
    /// or an ask nobody answered): the tool call is refused with `message`.
    pub fn decline(&mut self, req_id: &str, message: &str) -> Result<String, ResponseError> {
        let p = self
            .pending
            .remove(req_id)
            .ok_or_else(|| ResponseError::UnknownRequest(req_id.to_owned()))?;
        Ok(outbound::permission_response(
            req_id,
            Decision::Deny,
            &p.input,
            Some(message),
        ))
    }

    /// The `control_response` line for `cap.ask_user.answer`; `value` must be an
    /// object of question → label (or labels).
    pub fn respond_ask(&mut self, ask_id: &str, value: &Value) -> Result<String, ResponseError> {
        let p = match self.pending.get(ask_id) {
            None => return Err(ResponseError::UnknownRequest(ask_id.to_owned())),
            Some(p) if p.kind != PendingKind::Ask => {
                return Err(ResponseError::NotAnAsk(ask_id.to_owned()));
            }
            Some(p) => p,
        };
        let invalid = |reason: &str| ResponseError::InvalidAnswer {
            req_id: ask_id.to_owned(),
            reason: reason.to_owned(),
        };
        let answers = value
            .as_object()
            .ok_or_else(|| invalid("expected an object of question -> answer"))?;
        if answers.values().any(|a| {
            !(a.is_string() || a.as_array().is_some_and(|v| v.iter().all(Value::is_string)))
        }) {
            return Err(invalid("answers must be strings or arrays of strings"));
        }
        let line = outbound::ask_answer(ask_id, &p.input, answers);
        self.pending.remove(ask_id);
        Ok(line)
    }
}

/// The prompt and form of an `AskUserQuestion` input.
pub(crate) fn ask_form(input: &Value) -> (String, Value) {
    let questions = input
        .get("questions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut prompts = Vec::with_capacity(questions.len());
    let mut properties = Map::new();
    for q in questions {
        let Some(text) = q.get("question").and_then(Value::as_str) else {
            continue;
        };
        prompts.push(text);
        let options: Vec<Value> = q
            .get("options")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|o| {
                let label = o.get("label")?.as_str()?;
                let mut opt = json!({"const": label, "title": label});
                if let Some(d) = o.get("description") {
                    opt["description"] = d.clone();
                }
                Some(opt)
            })
            .collect();
        let choice = json!({"type": "string", "oneOf": options});
        let mut prop = if q.get("multiSelect").and_then(Value::as_bool) == Some(true) {
            json!({"type": "array", "items": choice})
        } else {
            choice
        };
        if let Some(h) = q.get("header") {
            prop["title"] = h.clone();
        }
        prop["description"] = Value::from(text);
        properties.insert(text.to_owned(), prop);
    }
    let required: Vec<Value> = properties.keys().map(|k| Value::from(k.as_str())).collect();
    let form = json!({"type": "object", "properties": properties, "required": required});
    (prompts.join("\n"), form)
}
