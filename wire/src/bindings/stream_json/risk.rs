//! Scope and risk of a Claude tool call, for `cap.permission.request`.
//!
//! | tool | scope | risk |
//! |---|---|---|
//! | `Read`, `Glob`, `Grep`, `LS`, `NotebookRead`, `TodoWrite`, `TaskList`, `TaskGet`, `TaskOutput` | read | low |
//! | `WebSearch` | network | low |
//! | `WebFetch` | network | medium (the URL can carry data out) |
//! | `Edit`, `MultiEdit`, `Write`, `NotebookEdit` | write | medium; high on a sensitive path (`/etc/`, `/usr/`, `/bin/`, `/boot/`, `.ssh/`, `.git/`, `.env`, shell rc files) |
//! | `Bash` (and `BashOutput`-free shells: `exec`, `shell`) | execute | see below |
//! | anything else (`Task`, `mcp__*`, unknown) | execute | medium |
//!
//! `Bash` commands are rated by [`command_risk`]. The session then raises whatever
//! this table says to what the input contains ([`crate::bindings::risk`]).

use serde_json::Value;

use crate::bindings::risk::{SENSITIVE_PATHS, command_risk};
use crate::protocol::{PermissionScope, RiskLevel};

/// The scope and risk of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Risk {
    pub scope: PermissionScope,
    pub level: RiskLevel,
}

const READ_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "TodoWrite",
    "TaskList",
    "TaskGet",
    "TaskOutput",
];
const WRITE_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];
const SHELL_TOOLS: &[&str] = &["Bash", "exec", "shell"];

/// Classifies a tool call by name and input (see the module table).
pub(crate) fn classify(tool: &str, input: Option<&Value>) -> Risk {
    let field = |k: &str| input.and_then(|i| i.get(k)).and_then(Value::as_str);
    if READ_TOOLS.contains(&tool) {
        return Risk {
            scope: PermissionScope::Read,
            level: RiskLevel::Low,
        };
    }
    match tool {
        "WebSearch" => Risk {
            scope: PermissionScope::Network,
            level: RiskLevel::Low,
        },
        "WebFetch" => Risk {
            scope: PermissionScope::Network,
            level: RiskLevel::Medium,
        },
        t if WRITE_TOOLS.contains(&t) => {
            let path = field("file_path").or_else(|| field("notebook_path"));
            let sensitive = path.is_some_and(|p| SENSITIVE_PATHS.iter().any(|s| p.contains(s)));
            Risk {
                scope: PermissionScope::Write,
                level: if sensitive {
                    RiskLevel::High
                } else {
                    RiskLevel::Medium
                },
            }
        }
        t if SHELL_TOOLS.contains(&t) => Risk {
            scope: PermissionScope::Execute,
            level: field("command").map_or(RiskLevel::Medium, command_risk),
        },
        _ => Risk {
            scope: PermissionScope::Execute,
            level: RiskLevel::Medium,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools() {
        let r = |t: &str, i: Value| classify(t, Some(&i));
        assert_eq!(
            r("Read", json!({"file_path": "/etc/passwd"})).level,
            RiskLevel::Low
        );
        assert_eq!(r("Glob", json!({})).scope, PermissionScope::Read);
        assert_eq!(r("WebSearch", json!({})).scope, PermissionScope::Network);
        assert_eq!(r("WebFetch", json!({})).level, RiskLevel::Medium);
        let w = r("Edit", json!({"file_path": "/w/src/main.rs"}));
        assert_eq!(
            (w.scope, w.level),
            (PermissionScope::Write, RiskLevel::Medium)
        );
        assert_eq!(
            r(
                "Write",
                json!({"file_path": "/home/u/.ssh/authorized_keys"})
            )
            .level,
            RiskLevel::High
        );
        assert_eq!(
            r("NotebookEdit", json!({"notebook_path": "/w/.env"})).level,
            RiskLevel::High
        );
        let b = r("Bash", json!({"command": "echo hello > out.txt"}));
        assert_eq!(
            (b.scope, b.level),
            (PermissionScope::Execute, RiskLevel::Medium)
        );
        assert_eq!(
            r("Bash", json!({"command": "sudo rm -rf /"})).level,
            RiskLevel::High
        );
        assert_eq!(classify("Bash", None).level, RiskLevel::Medium);
        assert_eq!(
            r("mcp__github__create_pr", json!({})).level,
            RiskLevel::Medium
        );
    }
}
