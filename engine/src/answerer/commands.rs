//! Command rules of the answerer's policy (`deny_commands`, `allow_commands`; the
//! coding profile's §7.2 allow-list of commands): regular expressions matched
//! against the command lines a permission request carries, whatever the binding
//! ([`capfleet_wire::bindings::risk::commands`]: a Claude `Bash` input, an ACP tool's
//! raw input or terminal, a Codex approval). A pattern matches anywhere in a line
//! unless anchored (`^rm `, `^cargo test$`).

use regex::Regex;

/// Compiled command patterns, kept with their text.
#[derive(Debug, Clone, Default)]
pub struct CommandRules(Vec<Regex>);

/// A pattern that is no regular expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("pattern {index} ({pattern:?}) is not a regular expression: {reason}")]
pub struct CommandRuleError {
    /// Its place in the list, from 0.
    pub index: usize,
    pub pattern: String,
    pub reason: String,
}

impl CommandRules {
    /// Compile `patterns`; the first that does not compile is the error.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, CommandRuleError> {
        patterns
            .iter()
            .enumerate()
            .map(|(index, p)| {
                Regex::new(p.as_ref()).map_err(|e| CommandRuleError {
                    index,
                    pattern: p.as_ref().to_owned(),
                    reason: one_line(&e.to_string()),
                })
            })
            .collect::<Result<_, _>>()
            .map(CommandRules)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The patterns as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(Regex::as_str)
    }

    /// Some pattern matches `line`.
    pub fn matches(&self, line: &str) -> bool {
        self.0.iter().any(|r| r.is_match(line))
    }
}

impl PartialEq for CommandRules {
    fn eq(&self, other: &Self) -> bool {
        self.patterns().eq(other.patterns())
    }
}

/// The reason of the regex crate's multi-line error (the pattern, a caret, then
/// `error: <reason>`).
fn one_line(s: &str) -> String {
    let last = s
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(s);
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_anywhere_unless_anchored() {
        let rules = CommandRules::new(&["rm\\s+-rf", "^git push"]).expect("rules");
        assert!(rules.matches("cd x && rm -rf victim"));
        assert!(rules.matches("git push origin main"));
        assert!(!rules.matches("echo git push"));
        assert_eq!(
            rules.patterns().collect::<Vec<_>>(),
            ["rm\\s+-rf", "^git push"]
        );
    }

    #[test]
    fn a_bad_pattern_is_named_with_its_place_and_reason() {
        let err = CommandRules::new(&["ok", "rm (-rf"]).expect_err("unclosed group");
        assert_eq!((err.index, err.pattern.as_str()), (1, "rm (-rf"));
        assert!(err.reason.contains("unclosed group"), "{err}");
    }
}
