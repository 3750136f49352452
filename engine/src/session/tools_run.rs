//! The tool calls a turn's attempts started, as a re-issued prompt names them
//! (issue 36, point 5): an attempt cut mid-way may have applied an edit already, and
//! an agent prompted again without its own conversation cannot know. What the
//! journal holds of them (a cut attempt's last 100 ms batch may be lost) goes with
//! the partial answer: `Write src/health.rs, Bash cargo test`. Bounded: the first
//! [`MAX_TOOLS_NAMED`] calls by name and first argument, each cut to
//! [`MAX_TOOL_TITLE`] bytes, the rest counted.

use serde_json::Value;

/// Tool calls named at most; the others are counted.
pub(crate) const MAX_TOOLS_NAMED: usize = 8;
/// Bytes of one tool call's title at most.
pub(crate) const MAX_TOOL_TITLE: usize = 80;

/// The input fields that say what a tool call touched, the first one present taken.
const ARG_KEYS: [&str; 6] = ["file_path", "path", "command", "pattern", "url", "query"];

/// The tool calls a turn started, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolsRun {
    named: Vec<String>,
    more: u32,
}

impl ToolsRun {
    /// None was started.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    /// Another call can be named (else it is only counted).
    pub(crate) fn has_room(&self) -> bool {
        self.named.len() < MAX_TOOLS_NAMED
    }

    /// A call of tool `name` with `input` started.
    pub(crate) fn note(&mut self, name: &str, input: Option<&Value>) {
        if !self.has_room() {
            self.more += 1;
            return;
        }
        let arg = input.and_then(|i| ARG_KEYS.iter().find_map(|k| i.get(k)?.as_str()));
        let title = match arg {
            Some(a) => format!("{name} {a}"),
            None => name.to_owned(),
        };
        let mut title = title.replace(['\n', '\r'], " ");
        if title.len() > MAX_TOOL_TITLE {
            let mut cut = MAX_TOOL_TITLE;
            while !title.is_char_boundary(cut) {
                cut -= 1;
            }
            title.truncate(cut);
            title.push('…');
        }
        self.named.push(title);
    }

    /// A call counted but not named (no room left).
    pub(crate) fn count(&mut self) {
        self.more += 1;
    }

    /// `Write a.md, Bash ls and 3 more`.
    pub fn describe(&self) -> String {
        let mut s = self.named.join(", ");
        if self.more > 0 {
            s.push_str(&format!(" and {} more", self.more));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_are_named_by_their_first_argument_and_bounded() {
        let mut t = ToolsRun::default();
        assert!(t.is_empty());
        t.note(
            "Write",
            Some(&json!({ "file_path": "src/a.rs", "content": "x" })),
        );
        t.note("Bash", Some(&json!({ "command": "cargo\ntest" })));
        t.note("TodoWrite", Some(&json!({ "todos": [] })));
        t.note("Read", None);
        assert_eq!(
            t.describe(),
            "Write src/a.rs, Bash cargo test, TodoWrite, Read"
        );
        let long = "x".repeat(200);
        t.note("Edit", Some(&json!({ "path": long })));
        assert!(t.describe().ends_with('…'));
        for _ in 0..10 {
            t.note("Read", None);
        }
        assert!(!t.has_room());
        assert!(t.describe().ends_with(" and 7 more"), "{}", t.describe());
        assert!(t.describe().len() < MAX_TOOLS_NAMED * (MAX_TOOL_TITLE + 8));
    }
}
