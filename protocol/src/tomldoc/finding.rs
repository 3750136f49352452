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
    /// A key the schema does not define (and not `x-` prefixed); ignored.
    UnknownKey,
    /// Accepted, with a remark.
    Note(String),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WarningKind::UnknownKey => write!(f, "{}: unknown key (ignored)", self.at),
            WarningKind::Note(n) => write!(f, "{}: {n}", self.at),
        }
    }
}
