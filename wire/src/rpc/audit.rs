//! The audit of the reverse RPC (coding §7.2: under `tool_permission = "none"` every
//! spawn is logged): every action with an effect — a terminal started or killed, a
//! file written or deleted — becomes an [`Audited`] record with the rule that allowed
//! or refused it, sent to the session through the [`super::Host`] (the session
//! publishes it as `EventBody::Audit`, so it lands in the journal beside the events
//! that led to it) and logged. Reads, lists and waits have no effect and are not
//! audited.

use serde::Serialize;
use serde_json::Value;

use super::{Rpc, RpcError, Scope};
use crate::manifest::FsScope;
use crate::tomldoc::Wire as _;

/// The path an action touches, resolved in the scope; as the agent wrote it when it
/// is outside (the action is refused). Touches the filesystem: call it on the fs
/// worker.
pub(super) fn audited_path(scope: &Scope, path: &str) -> String {
    scope
        .check(path)
        .map_or_else(|_| path.to_owned(), |p| p.display().to_string())
}

impl Rpc {
    /// The rule that lets a file operation through: the capability and the scope.
    pub(super) fn fs_rule(&self, capability: &str) -> String {
        let scope = self.caps.fs.scope.unwrap_or(FsScope::WorkspaceOnly).wire();
        format!("{capability} (fs.scope = {scope})")
    }

    /// Record `action`, ended as `result` says, under `rule`.
    pub(super) async fn audit(
        &self,
        action: AuditAction,
        rule: String,
        result: &Result<Value, RpcError>,
    ) {
        let (outcome, error) = match result {
            Ok(_) => (AuditOutcome::Done, None),
            Err(
                e @ (RpcError::ScopeViolation | RpcError::Denied(_) | RpcError::Unsupported(_)),
            ) => (AuditOutcome::Refused, Some(e.to_string())),
            Err(e) => (AuditOutcome::Failed, Some(e.to_string())),
        };
        let record = Audited {
            action,
            outcome,
            rule,
            error,
        };
        tracing::info!(target: "capfleet::audit", action = ?record.action, ?record.outcome, rule = %record.rule, "reverse rpc");
        if let Some(host) = &self.host {
            let _session_gone = host.audit(record).await;
        }
    }
}

/// What the orchestrator did, or refused to do, for an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AuditAction {
    /// `cap.terminal.create`: a command started (its terminal id) or refused.
    TerminalCreate {
        command: String,
        cwd: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        terminal_id: Option<String>,
    },
    /// `cap.terminal.kill` / `cap.terminal.release` of a running command.
    TerminalKill {
        terminal_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        signal: String,
    },
    /// `cap.fs.write`: `bytes` written to `path`.
    FsWrite { path: String, bytes: u64 },
    /// `cap.fs.delete` of `path`.
    FsDelete { path: String, recursive: bool },
}

/// How the action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// It happened.
    Done,
    /// A rule stopped it before anything happened.
    Refused,
    /// It was allowed but did not succeed (the error says why).
    Failed,
}

/// One audited action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Audited {
    #[serde(flatten)]
    pub action: AuditAction,
    pub outcome: AuditOutcome,
    /// The rule that allowed (or refused) it, e.g. `tool_permission = "none"`,
    /// `tools_allowed entry "git *"`, `fs.write (fs.scope = workspace_only)`.
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Audited {
    /// Whether the action ran unattended: allowed only because nothing asks.
    pub fn unattended(&self) -> bool {
        self.outcome != AuditOutcome::Refused && self.rule.starts_with(RULE_UNATTENDED)
    }
}

/// The rule of everything allowed under `tool_permission = "none"`.
pub(crate) const RULE_UNATTENDED: &str = "tool_permission = \"none\"";
