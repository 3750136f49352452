//! Where a finding sits, the error constructors a reader needs, and warnings.

use std::fmt;

/// Where a finding sits: `origin:line: key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// File path or a label such as `<probe claude>` or `<shipped sim>`.
    pub origin: String,
    /// 1-based line in the source, when known.
    pub line: Option<usize>,
    /// Dotted key, e.g. `startup.ready_when`; empty for document-level findings.
    pub key: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        Ok(())
    }
}

/// A loader's error type: the generic findings a [`crate::tomldoc::Reader`] records.
pub trait Finding {
    /// The source is not valid TOML.
    fn syntax(at: Location, message: String) -> Self;
    /// A required key is absent.
    fn missing(at: Location) -> Self;
    /// The value has the wrong TOML type.
    fn wrong_type(at: Location, expected: &'static str, found: &'static str) -> Self;
    /// The value has the right type but is not acceptable.
    fn invalid(at: Location, reason: String) -> Self;
    /// The 1-based line of the finding, for sorting (none sorts last).
    fn line(&self) -> Option<usize>;
}

/// Something accepted but worth telling the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where the finding sits.
    pub at: Location,
    /// What the finding is.
    pub kind: WarningKind,
}

/// What a [`Warning`] is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarningKind {
    /// A key the schema does not define (and not `x-` prefixed); ignored. `suggestion`
    /// is the nearest key the schema does define, when one is near.
    UnknownKey {
        /// The known key the user probably meant.
        suggestion: Option<&'static str>,
    },
    /// Accepted, with a remark.
    Note(String),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WarningKind::UnknownKey { suggestion: None } => {
                write!(f, "{}: unknown key (ignored)", self.at)
            }
            WarningKind::UnknownKey {
                suggestion: Some(k),
            } => write!(f, "{}: unknown key (ignored); did you mean `{k}`?", self.at),
            WarningKind::Note(n) => write!(f, "{}: {n}", self.at),
        }
    }
}

/// The key of `known` nearest to `typed`, if it is near enough to be a typo: at most
/// one edit for short keys, two from six characters, and not a whole different word.
/// (A plain edit distance: the protocol crate keeps to its few dependencies.)
pub fn nearest(typed: &str, known: &[&'static str]) -> Option<&'static str> {
    let max = if typed.chars().count() < 6 { 1 } else { 2 };
    known
        .iter()
        .map(|k| (distance(typed, k), *k))
        .filter(|(d, k)| *d <= max && *d < k.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key_and_words_do_not() {
        let keys = &["task", "start", "routes", "sessions", "budget_usd", "name"];
        assert_eq!(nearest("taks", keys), Some("task"));
        assert_eq!(nearest("route", keys), Some("routes"));
        assert_eq!(nearest("session", keys), Some("sessions"));
        assert_eq!(nearest("budget_sud", keys), Some("budget_usd"));
        assert_eq!(nearest("strat", keys), Some("start"));
        assert_eq!(nearest("colour", keys), None);
        assert_eq!(
            nearest("x", &["y"]),
            None,
            "one letter is not a typo of another"
        );
    }
}
