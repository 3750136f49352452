//! Plan entries as TUIs draw them: `[x] id content (priority)` checklists.

use std::sync::LazyLock;

use regex::Regex;

use crate::protocol::{PlanEntry, PlanStatus, Priority};

/// A checklist row: `[x] …`, `- [ ] …`.
pub(super) const PLAN_ENTRY_PATTERN: &str =
    r"^\s*(?:[-*]\s+)?\[(?P<mark>[ xX~!\-])\]\s+(?P<rest>.+?)\s*$";

static PLAN_ENTRY: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(PLAN_ENTRY_PATTERN).ok());

/// One checklist row as a plan entry; `index` numbers entries without an id.
pub(super) fn plan_entry(line: &str, index: usize) -> Option<PlanEntry> {
    let c = PLAN_ENTRY.as_ref()?.captures(line)?;
    let status = match c.name("mark").map_or(" ", |m| m.as_str()) {
        "x" | "X" => PlanStatus::Completed,
        "~" => PlanStatus::InProgress,
        "-" => PlanStatus::Cancelled,
        "!" => PlanStatus::Blocked,
        _ => PlanStatus::Pending,
    };
    let mut rest = c.name("rest").map_or("", |m| m.as_str()).trim();
    let mut priority = None;
    if let Some(open) = rest.rfind(" (")
        && rest.ends_with(')')
        && let Some(p) = Priority::parse(&rest[open + 2..rest.len() - 1])
    {
        priority = Some(p);
        rest = rest[..open].trim_end();
    }
    let (id, content) = match rest.split_once(' ') {
        Some((id, content))
            if id.chars().any(|c| c.is_ascii_digit())
                && id.chars().all(|c| c.is_alphanumeric() || "._-".contains(c)) =>
        {
            (id.to_owned(), content.trim().to_owned())
        }
        _ => ((index + 1).to_string(), rest.to_owned()),
    };
    let mut entry = PlanEntry::new(id, content, status);
    entry.priority = priority;
    Some(entry)
}
