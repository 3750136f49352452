//! Manifest errors and warnings: each one names its origin (file or label), the dotted
//! key and, where the TOML source gives it, the 1-based line.

use std::fmt;
use std::path::PathBuf;

use crate::protocol::CapCode;
use crate::tomldoc::{Finding, Warning};
pub use crate::tomldoc::{Location, WarningKind};

/// A regex construct outside the CAP subset (spec §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexConstruct {
    /// `(?=` / `(?!`.
    LookAhead,
    /// `(?<=` / `(?<!`.
    LookBehind,
    /// `\1`, `\k<name>` and the like.
    Backreference,
}

impl fmt::Display for RegexConstruct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegexConstruct::LookAhead => "look-ahead",
            RegexConstruct::LookBehind => "look-behind",
            RegexConstruct::Backreference => "backreference",
        })
    }
}

/// One reason a manifest is rejected.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The source is not valid TOML.
    #[error("{at}: TOML syntax error: {message}")]
    Syntax {
        /// Where the parser stopped.
        at: Location,
        /// The TOML parser's message.
        message: String,
    },
    /// A required field (spec §5.2) is absent.
    #[error("{at}: required field missing")]
    Missing {
        /// The missing key.
        at: Location,
    },
    /// A field required by a rule (e.g. coding §3 `fs.scope` when any `fs.*` is true).
    #[error("{at}: required field missing: {reason}")]
    RequiredBy {
        /// The missing key.
        at: Location,
        /// The rule that requires it.
        reason: String,
    },
    /// The value has the wrong TOML type.
    #[error("{at}: expected {expected}, found {found}")]
    WrongType {
        /// The key.
        at: Location,
        /// The TOML type the schema wants.
        expected: &'static str,
        /// The TOML type found.
        found: &'static str,
    },
    /// The value has the right type but is not acceptable.
    #[error("{at}: invalid value: {reason}")]
    InvalidValue {
        /// The key.
        at: Location,
        /// Why the value is refused.
        reason: String,
    },
    /// The pattern uses a construct outside the CAP regex subset.
    #[error("{at}: {construct} is not allowed in CAP patterns (spec §5.4): {pattern:?}")]
    UnsupportedRegex {
        /// The key.
        at: Location,
        /// The construct found.
        construct: RegexConstruct,
        /// The pattern as written.
        pattern: String,
    },
    /// The pattern does not compile.
    #[error("{at}: invalid regex {pattern:?}: {message}")]
    Regex {
        /// The key.
        at: Location,
        /// The pattern as written.
        pattern: String,
        /// The regex engine's message.
        message: String,
    },
    /// The manifest file could not be read.
    #[error("{}: cannot read manifest: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        source: std::io::Error,
    },
}

impl ManifestError {
    /// Where the error sits (none for I/O errors).
    pub fn location(&self) -> Option<&Location> {
        match self {
            ManifestError::Syntax { at, .. }
            | ManifestError::Missing { at }
            | ManifestError::RequiredBy { at, .. }
            | ManifestError::WrongType { at, .. }
            | ManifestError::InvalidValue { at, .. }
            | ManifestError::UnsupportedRegex { at, .. }
            | ManifestError::Regex { at, .. } => Some(at),
            ManifestError::Io { .. } => None,
        }
    }

    /// The dotted key at fault, if any.
    pub fn key(&self) -> Option<&str> {
        self.location()
            .map(|l| l.key.as_str())
            .filter(|k| !k.is_empty())
    }

    /// The 1-based source line, if known.
    pub fn line(&self) -> Option<usize> {
        self.location().and_then(|l| l.line)
    }

    /// The CAP code this error surfaces as: an agent whose manifest cannot be read or
    /// validated has no resolvable manifest (`cap_manifest_missing`, spec §14.2).
    pub fn code(&self) -> CapCode {
        CapCode::ManifestMissing
    }
}

/// Every error found in one manifest (validation never stops at the first).
#[derive(Debug)]
pub struct ManifestErrors {
    /// The file or label the manifest came from.
    pub origin: String,
    /// The errors, in source order.
    pub errors: Vec<ManifestError>,
}

impl ManifestErrors {
    /// The CAP code they surface as: `cap_manifest_missing`.
    pub fn code(&self) -> CapCode {
        CapCode::ManifestMissing
    }

    /// The errors, in source order.
    pub fn iter(&self) -> std::slice::Iter<'_, ManifestError> {
        self.errors.iter()
    }

    /// How many errors there are.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl<'a> IntoIterator for &'a ManifestErrors {
    type Item = &'a ManifestError;
    type IntoIter = std::slice::Iter<'a, ManifestError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

impl fmt::Display for ManifestErrors {
    /// One error per line, in source order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}

/// Something accepted but worth telling the user.
pub type ManifestWarning = Warning;

impl Finding for ManifestError {
    fn syntax(at: Location, message: String) -> Self {
        ManifestError::Syntax { at, message }
    }

    fn missing(at: Location) -> Self {
        ManifestError::Missing { at }
    }

    fn wrong_type(at: Location, expected: &'static str, found: &'static str) -> Self {
        ManifestError::WrongType {
            at,
            expected,
            found,
        }
    }

    fn invalid(at: Location, reason: String) -> Self {
        ManifestError::InvalidValue { at, reason }
    }

    fn line(&self) -> Option<usize> {
        ManifestError::line(self)
    }
}
