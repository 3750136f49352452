//! Terminal command vetting (coding §7.2): may `cap.terminal.create` run this command?

use super::RULE_UNATTENDED;
use crate::manifest::{CodingCaps, ToolPermission};

/// The vetting verdict before any spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Vet {
    /// Run it (allow-listed under `confirm`, or `none`: logged, unattended); the
    /// rule that allows it, for the audit.
    Allow(String),
    /// Ask the user (a `cap.permission.request`) first.
    Ask,
    /// Never run it; why.
    Deny(String),
}

/// Does a `tools_allowed`/`tools_denied` entry match this command line? An entry
/// matches the program (`git`, `/usr/bin/git`), the whole line (`git status`), or a
/// prefix ending in `*` (`git *`); `*` matches everything.
pub(crate) fn matches(entry: &str, program: &str, line: &str) -> bool {
    let base = program.rsplit('/').next().unwrap_or(program);
    if entry == "*" || entry == program || entry == base || entry == line {
        return true;
    }
    entry.strip_suffix('*').is_some_and(|prefix| {
        line.starts_with(prefix)
            || base.starts_with(prefix.trim_end()) && prefix.trim_end().len() == base.len()
    })
}

/// The command line as shown to the user and matched against the lists.
pub(crate) fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The verdict for `program args` under the manifest's coding caps.
pub(crate) fn vet(caps: &CodingCaps, program: &str, args: &[String]) -> Vet {
    let line = command_line(program, args);
    if let Some(d) = caps
        .tools_denied
        .iter()
        .find(|d| matches(d, program, &line))
    {
        return Vet::Deny(format!("command matches tools_denied entry {d:?}"));
    }
    let allowed = caps
        .tools_allowed
        .iter()
        .find(|a| matches(a, program, &line));
    match (caps.tool_permission, allowed) {
        (ToolPermission::Interactive, _) | (ToolPermission::Confirm, None) => Vet::Ask,
        (ToolPermission::Confirm, Some(a)) => Vet::Allow(format!("tools_allowed entry {a:?}")),
        (ToolPermission::None, _) => {
            tracing::warn!(command = %line, "UNATTENDED: tool_permission = none, spawning without asking");
            Vet::Allow(RULE_UNATTENDED.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(tp: ToolPermission, allowed: &[&str], denied: &[&str]) -> CodingCaps {
        CodingCaps {
            tools_allowed: allowed.iter().map(|s| s.to_string()).collect(),
            tools_denied: denied.iter().map(|s| s.to_string()).collect(),
            ..CodingCaps::only(tp)
        }
    }

    #[test]
    fn policy_table() {
        let a = |s: &str| vec![s.to_string()];
        let c = caps(ToolPermission::Confirm, &["git *", "ls"], &["git push*"]);
        assert_eq!(
            vet(&c, "git", &a("status")),
            Vet::Allow("tools_allowed entry \"git *\"".into())
        );
        assert_eq!(
            vet(&c, "/bin/ls", &[]),
            Vet::Allow("tools_allowed entry \"ls\"".into())
        );
        assert_eq!(vet(&c, "rm", &a("-rf")), Vet::Ask);
        assert!(matches!(vet(&c, "git", &a("push")), Vet::Deny(_)));
        let i = caps(ToolPermission::Interactive, &["*"], &[]);
        assert_eq!(vet(&i, "ls", &[]), Vet::Ask);
        let n = caps(ToolPermission::None, &[], &["rm"]);
        assert_eq!(vet(&n, "ls", &[]), Vet::Allow(RULE_UNATTENDED.into()));
        assert!(matches!(vet(&n, "/bin/rm", &[]), Vet::Deny(_)));
    }
}
