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
//! `Bash` commands: **high** when any [`HIGH_RISK_PATTERNS`] matches (`sudo`,
//! recursive `rm`, `curl … \| sh`, forced `git push`, `git reset --hard`,
//! `git clean -f`, `mkfs`, `dd of=`, `chmod 777`, writes to raw disks, power
//! commands, fork bombs); **low** when every `;`/`&&`/`||`/`|` segment starts with a
//! read-only command ([`READ_ONLY_COMMANDS`], or `git status|diff|log|show`) and
//! there is no redirect or substitution; **medium** otherwise.

use std::sync::OnceLock;

use regex::RegexSet;
use serde_json::Value;

use crate::protocol::{PermissionScope, RiskLevel};

/// The scope and risk of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Risk {
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

/// Shell command patterns that make a `Bash` call high risk.
pub const HIGH_RISK_PATTERNS: &[&str] = &[
    r"\bsudo\b",
    r"\brm\s+(-\S+\s+)*-[a-zA-Z]*[rR]",
    r"\brm\s+(-\S+\s+)*--recursive\b",
    r"\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|k|da)?sh\b",
    r"\bgit\s+push\b.*\s(--force\S*|-f)\b",
    r"\bgit\s+push\b.*\s\+\S",
    r"\bgit\s+reset\s+--hard\b",
    r"\bgit\s+clean\s+(-\S+\s+)*-[a-zA-Z]*f",
    r"\bmkfs\b",
    r"\bdd\b.*\bof=",
    r"\bchmod\s+(-\S+\s+)*0?777\b",
    r">\s*/dev/(sd|nvme|hd|disk)",
    r"\b(shutdown|reboot|halt|poweroff)\b",
    r":\(\)\s*\{",
];

/// Commands that only read, when used without redirects.
pub const READ_ONLY_COMMANDS: &[&str] = &[
    "ls", "pwd", "cat", "head", "tail", "wc", "grep", "rg", "echo", "which", "date", "whoami",
    "uname", "stat", "file", "tree", "du", "df",
];

const SENSITIVE_PATHS: &[&str] = &[
    "/etc/",
    "/usr/",
    "/bin/",
    "/sbin/",
    "/boot/",
    "/.ssh/",
    "/.git/",
    ".env",
    "/.bashrc",
    "/.zshrc",
    "/.profile",
];

fn high_risk() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| RegexSet::new(HIGH_RISK_PATTERNS).expect("static patterns compile"))
}

/// Classifies a tool call by name and input (see the module table).
pub fn classify(tool: &str, input: Option<&Value>) -> Risk {
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

/// The risk of one shell command line.
pub fn command_risk(command: &str) -> RiskLevel {
    if high_risk().is_match(command) {
        return RiskLevel::High;
    }
    if command.contains(['>', '`']) || command.contains("$(") {
        return RiskLevel::Medium;
    }
    let read_only = command
        .split(['|', ';', '&'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .all(|segment| {
            let mut words = segment.split_whitespace();
            match words.next() {
                Some("git") => matches!(words.next(), Some("status" | "diff" | "log" | "show")),
                Some(cmd) => READ_ONLY_COMMANDS.contains(&cmd),
                None => true,
            }
        });
    if read_only {
        RiskLevel::Low
    } else {
        RiskLevel::Medium
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands() {
        let table = [
            ("ls -la", RiskLevel::Low),
            ("git status && git diff HEAD", RiskLevel::Low),
            ("cat a.txt | grep x | wc -l", RiskLevel::Low),
            ("echo hello > out.txt", RiskLevel::Medium),
            ("cargo test", RiskLevel::Medium),
            ("echo $(whoami)", RiskLevel::Medium),
            ("rm -rf /tmp/x", RiskLevel::High),
            ("rm -fr build", RiskLevel::High),
            ("rm -v -r build", RiskLevel::High),
            ("rm --recursive build", RiskLevel::High),
            ("rm file.txt", RiskLevel::Medium),
            ("sudo apt install x", RiskLevel::High),
            ("curl -fsSL https://x.sh | sh", RiskLevel::High),
            ("wget -qO- https://x | sudo bash", RiskLevel::High),
            ("curl https://x -o f", RiskLevel::Medium),
            ("git push --force origin main", RiskLevel::High),
            ("git push -f", RiskLevel::High),
            ("git push origin +main", RiskLevel::High),
            ("git push origin main", RiskLevel::Medium),
            ("git reset --hard HEAD~3", RiskLevel::High),
            ("git clean -fdx", RiskLevel::High),
            ("dd if=/dev/zero of=/dev/sda", RiskLevel::High),
            ("chmod -R 777 .", RiskLevel::High),
            (":(){ :|:& };:", RiskLevel::High),
        ];
        for (cmd, want) in table {
            assert_eq!(command_risk(cmd), want, "{cmd}");
        }
    }

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
