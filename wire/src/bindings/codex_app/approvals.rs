//! The app-server's requests to its client: approvals, each put to the answerer as a
//! `cap.permission.request` (the session rates its risk again from the content), the
//! decision sent back as the request's response.
//!
//! | method (0.171.0) | CAP tool | intent | response on allow once / always / deny / withdrawn |
//! |---|---|---|---|
//! | `item/commandExecution/requestApproval` | `command_execution` | command, cwd, reason | `accept` / `acceptForSession` / `decline` / `cancel` |
//! | `item/fileChange/requestApproval` | `file_change` | reason, grant root | the same |
//! | `item/permissions/requestApproval` | `permissions` | the permissions asked | the permissions granted for the turn / the session / none |
//! | `execCommandApproval` (v1) | `command_execution` | command, cwd, reason | `approved` / `approved_for_session` / `denied` (with a rejection) / `abort` |
//! | `applyPatchApproval` (v1) | `file_change` | the changes | the same |
//!
//! Any other request (`item/tool/requestUserInput`, `mcpServer/elicitation/request`,
//! `item/tool/call`, `account/chatgptAuthTokens/refresh`, `attestation/generate`) is
//! refused with "method not found": capfleet declares none of what would bring them.

use serde_json::{Value, json};

use super::frames::{
    CommandApprovalParams, FileChangeApprovalParams, LegacyApprovalParams, Params,
    PermissionsApprovalParams, RequestId,
};
use crate::protocol::{Decision, RiskLevel};

/// The rejection a v1 denial carries (the model reads it).
const DENIED: &str = "denied by the orchestrator's policy or user";

/// What kind of answer a request wants.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalKind {
    /// `item/commandExecution/requestApproval`, `item/fileChange/requestApproval`.
    Item,
    /// `item/permissions/requestApproval`, with the permissions asked.
    Permissions(Value),
    /// `execCommandApproval`, `applyPatchApproval`.
    Legacy,
}

/// A server request for the answerer.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: RequestId,
    pub kind: ApprovalKind,
    pub tool: &'static str,
    pub intent: Value,
    /// The agent's own label (the session rates the content again).
    pub risk: RiskLevel,
}

/// Why a server request is not put to the answerer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("method not found: {0}")]
    Unknown(String),
    #[error("invalid params of {method}: {message}")]
    Invalid { method: String, message: String },
}

impl Refusal {
    /// The JSON-RPC error code the refusal is answered with.
    pub fn code(&self) -> i64 {
        match self {
            Refusal::Unknown(_) => -32601,
            Refusal::Invalid { .. } => -32602,
        }
    }
}

fn params<'a, T: serde::Deserialize<'a>>(method: &str, raw: Params<'a>) -> Result<T, Refusal> {
    raw.parse().map_err(|e| Refusal::Invalid {
        method: method.to_owned(),
        message: e.to_string(),
    })
}

/// The request `method` with `params` as an approval; `prefix` is put before Codex's
/// item ids, as the mapper does, so the intent names the tool call it is about.
pub fn approval(
    id: RequestId,
    method: &str,
    raw: Params<'_>,
    prefix: &str,
) -> Result<Approval, Refusal> {
    let call = |item: &str| format!("{prefix}{item}");
    let (kind, tool, intent, risk) = match method {
        "item/commandExecution/requestApproval" => {
            let p: CommandApprovalParams = params(method, raw)?;
            let intent = json!({
                "command": p.command, "cwd": p.cwd, "reason": p.reason,
                "tool_call_id": call(&p.item_id),
            });
            (
                ApprovalKind::Item,
                "command_execution",
                intent,
                RiskLevel::Medium,
            )
        }
        "item/fileChange/requestApproval" => {
            let p: FileChangeApprovalParams = params(method, raw)?;
            let intent = json!({
                "reason": p.reason, "grant_root": p.grant_root,
                "tool_call_id": call(&p.item_id),
            });
            (ApprovalKind::Item, "file_change", intent, RiskLevel::Medium)
        }
        "item/permissions/requestApproval" => {
            let p: PermissionsApprovalParams = params(method, raw)?;
            let intent = json!({
                "permissions": p.permissions, "cwd": p.cwd, "reason": p.reason,
                "tool_call_id": call(&p.item_id),
            });
            let kind = ApprovalKind::Permissions(p.permissions);
            (kind, "permissions", intent, RiskLevel::High)
        }
        "execCommandApproval" | "applyPatchApproval" => {
            let p: LegacyApprovalParams = params(method, raw)?;
            let command = p.command.map(|c| c.join(" "));
            let tool = if method == "execCommandApproval" {
                "command_execution"
            } else {
                "file_change"
            };
            let intent = json!({
                "command": command, "cwd": p.cwd, "reason": p.reason,
                "changes": p.file_changes, "tool_call_id": call(&p.call_id),
            });
            (ApprovalKind::Legacy, tool, intent, RiskLevel::Medium)
        }
        other => return Err(Refusal::Unknown(other.to_owned())),
    };
    Ok(Approval {
        id,
        kind,
        tool,
        intent,
        risk,
    })
}

impl ApprovalKind {
    /// The response's `result` for `decision` (`None`: withdrawn, unanswered).
    pub fn response(&self, decision: Option<Decision>) -> Value {
        match self {
            ApprovalKind::Item => {
                let d = match decision {
                    Some(Decision::AllowOnce) => "accept",
                    Some(Decision::AllowAlways) => "acceptForSession",
                    Some(Decision::Deny) => "decline",
                    None => "cancel",
                };
                json!({ "decision": d })
            }
            ApprovalKind::Legacy => {
                let d = match decision {
                    Some(Decision::AllowOnce) => json!("approved"),
                    Some(Decision::AllowAlways) => json!("approved_for_session"),
                    Some(Decision::Deny) => json!({ "denied": { "rejection": DENIED } }),
                    None => json!("abort"),
                };
                json!({ "decision": d })
            }
            ApprovalKind::Permissions(asked) => {
                let granted = |asked: &Value| {
                    let mut g = serde_json::Map::new();
                    for key in ["network", "fileSystem"] {
                        if let Some(v) = asked.get(key).filter(|v| !v.is_null()) {
                            g.insert(key.to_owned(), v.clone());
                        }
                    }
                    Value::Object(g)
                };
                match decision {
                    Some(Decision::AllowOnce) => {
                        json!({ "permissions": granted(asked), "scope": "turn" })
                    }
                    Some(Decision::AllowAlways) => {
                        json!({ "permissions": granted(asked), "scope": "session" })
                    }
                    Some(Decision::Deny) | None => json!({ "permissions": {}, "scope": "turn" }),
                }
            }
        }
    }
}
