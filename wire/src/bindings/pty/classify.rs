//! What one rendered line is on its own, whatever the turn: terminal chrome, the
//! kind of an error line, the fields a pattern's named groups carry.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value};

use crate::protocol::ErrorKind;

/// Lines that are terminal chrome in any TUI: spinners, rules and boxes, a logo drawn
/// in block elements with text beside it (Claude Code's banner, whose mascot 2.1.337
/// animates, so its rows change after the prompt is sent), status and hint lines (one
/// showing the working directory after a `·`), token counters, turn footers
/// (`Worked for 3s`).
pub(super) const CHROME_PATTERNS: &[&str] = &[
    r"^\s*[\x{2800}-\x{28FF}]",
    r"^[\s\x{2500}-\x{259F}]+$",
    r"^\s*[\x{2580}-\x{259F}][\x{2580}-\x{259F} ]*\s{2,}\S",
    r"^\s*⎿",
    r"^\s*·\s",
    r"(?i)esc to interrupt",
    r"\? for shortcuts",
    r"^Tokens: .* sent",
    r"^\s*[✻✳✶✢✽]\s",
    r"^\s*[*+]\s+\w+…",
    r"^\s*(?:─+\s*)?Worked for \S",
    r"\s·\s[/~]",
];

static CHROME: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    CHROME_PATTERNS
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
});

/// Assistant text without the bullet some TUIs put before a message (`●`, `⏺`,
/// `•`).
pub(super) fn strip_bullet(line: &str) -> &str {
    line.strip_prefix("● ")
        .or_else(|| line.strip_prefix("⏺ "))
        .or_else(|| line.strip_prefix("• "))
        .unwrap_or(line)
}

/// Whether `line` is chrome (never assistant text).
pub(super) fn is_chrome(line: &str) -> bool {
    CHROME.iter().any(|re| re.is_match(line))
}

/// The `cap.error` code of an error line (a `code` group wins) and whether retrying
/// may help.
pub(super) fn error_kind(line: &str, code: Option<&str>) -> (ErrorKind, bool) {
    match code {
        Some(code) => (ErrorKind::parse(code), false),
        None => crate::bindings::error_text::classify(line),
    }
}

pub(super) fn first<'h>(res: &[Regex], line: &'h str) -> Option<Captures<'h>> {
    res.iter().find_map(|re| re.captures(line))
}

/// The named groups of a match (but `skip`) as a JSON object.
pub(super) fn fields(re: &Regex, c: &Captures<'_>, skip: &[&str]) -> Value {
    let map: Map<String, Value> = re
        .capture_names()
        .flatten()
        .filter(|name| !skip.contains(name))
        .filter_map(|name| {
            Some((
                name.to_owned(),
                Value::String(c.name(name)?.as_str().to_owned()),
            ))
        })
        .collect();
    Value::Object(map)
}
