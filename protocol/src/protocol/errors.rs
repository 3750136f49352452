//! The CAP error registry (core spec §14.2, coding profile §10).
//!
//! Two vocabularies share semantics one-to-one: JSON-RPC numeric codes with their
//! `cap_*` symbols ([`CapCode`]), and the string codes carried by `cap.error` events
//! ([`ErrorKind`]). Both are typed here; nothing else in capfleet spells them as
//! free strings.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A numeric CAP error code and its symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapCode {
    /// `-32001 cap_manifest_missing`: the agent has no resolvable manifest.
    ManifestMissing,
    /// `-32002 cap_session_config_missing`: the first frame was not `cap.session.config`.
    SessionConfigMissing,
    /// `-32003 cap_unsupported_capability`: a feature the manifest does not declare.
    UnsupportedCapability,
    /// `-32004 cap_budget_exceeded`: the request would exceed the declared budget.
    BudgetExceeded,
    /// `-32005 cap_invalid_answer`: an `ask_user.answer` value failed form validation.
    InvalidAnswer,
    /// `-32006 cap_unknown_permission`: a permission response for an unknown `req_id`.
    UnknownPermission,
    /// `-32007 cap_queued_input_unsupported`: inject asked of an agent without queued input.
    QueuedInputUnsupported,
    /// `-32008 cap_cancel_unsupported`: cancel asked where `mid_turn_cancel = "none"`.
    CancelUnsupported,
    /// `-32009 cap_binding_unavailable`: every preferred binding failed, PTY included.
    BindingUnavailable,
    /// `-32010 cap_profile_unsupported`: a required profile the agent does not implement.
    ProfileUnsupported,
    /// `-32020 cap_scope_violation` (coding): a path outside the declared `fs.scope`.
    ScopeViolation,
    /// `-32021 cap_path_not_found` (coding): a filesystem operation on a missing path.
    PathNotFound,
    /// `-32022 cap_io_error` (coding): a filesystem I/O failure.
    IoError,
    /// `-32023 cap_terminal_unavailable` (coding): terminals asked for but disabled.
    TerminalUnavailable,
    /// `-32024 cap_terminal_killed` (coding): the orchestrator killed the terminal.
    TerminalKilled,
}

/// One row of the registry: code, symbol, meaning and the profile that defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRow {
    /// The typed code.
    pub code: CapCode,
    /// The JSON-RPC number, e.g. `-32001`.
    pub number: i32,
    /// The symbol, e.g. `cap_manifest_missing`.
    pub symbol: &'static str,
    /// The spec's one-line meaning.
    pub meaning: &'static str,
    /// `None` for core codes, `Some("coding")` for the coding profile's.
    pub profile: Option<&'static str>,
}

/// The registry as data: tests and the code read the same table.
pub const CODE_TABLE: [CodeRow; 15] = [
    row(
        CapCode::ManifestMissing,
        -32001,
        "cap_manifest_missing",
        "Agent has no resolvable Manifest",
        None,
    ),
    row(
        CapCode::SessionConfigMissing,
        -32002,
        "cap_session_config_missing",
        "First frame was not cap.session.config",
        None,
    ),
    row(
        CapCode::UnsupportedCapability,
        -32003,
        "cap_unsupported_capability",
        "Requested feature not declared in Manifest",
        None,
    ),
    row(
        CapCode::BudgetExceeded,
        -32004,
        "cap_budget_exceeded",
        "Would exceed declared budget",
        None,
    ),
    row(
        CapCode::InvalidAnswer,
        -32005,
        "cap_invalid_answer",
        "ask_user.answer.value failed form validation",
        None,
    ),
    row(
        CapCode::UnknownPermission,
        -32006,
        "cap_unknown_permission",
        "Permission response for unknown req_id",
        None,
    ),
    row(
        CapCode::QueuedInputUnsupported,
        -32007,
        "cap_queued_input_unsupported",
        "Inject requested but Agent doesn't support queued input",
        None,
    ),
    row(
        CapCode::CancelUnsupported,
        -32008,
        "cap_cancel_unsupported",
        "Cancel requested but Manifest says mid_turn_cancel = \"none\"",
        None,
    ),
    row(
        CapCode::BindingUnavailable,
        -32009,
        "cap_binding_unavailable",
        "All preferred bindings failed; PTY also unavailable",
        None,
    ),
    row(
        CapCode::ProfileUnsupported,
        -32010,
        "cap_profile_unsupported",
        "Required profile not implemented by Agent",
        None,
    ),
    row(
        CapCode::ScopeViolation,
        -32020,
        "cap_scope_violation",
        "Path outside declared fs.scope",
        Some("coding"),
    ),
    row(
        CapCode::PathNotFound,
        -32021,
        "cap_path_not_found",
        "Filesystem operation on missing path",
        Some("coding"),
    ),
    row(
        CapCode::IoError,
        -32022,
        "cap_io_error",
        "Generic filesystem I/O failure",
        Some("coding"),
    ),
    row(
        CapCode::TerminalUnavailable,
        -32023,
        "cap_terminal_unavailable",
        "Terminal capability requested but disabled",
        Some("coding"),
    ),
    row(
        CapCode::TerminalKilled,
        -32024,
        "cap_terminal_killed",
        "Terminal was killed by the Orchestrator",
        Some("coding"),
    ),
];

const fn row(
    code: CapCode,
    number: i32,
    symbol: &'static str,
    meaning: &'static str,
    profile: Option<&'static str>,
) -> CodeRow {
    CodeRow {
        code,
        number,
        symbol,
        meaning,
        profile,
    }
}

impl CapCode {
    fn row(self) -> &'static CodeRow {
        // The table is ordered like the enum; the unit test `table_order` holds it so.
        &CODE_TABLE[self as usize]
    }

    /// The JSON-RPC numeric code, e.g. `-32004`.
    pub fn number(self) -> i32 {
        self.row().number
    }

    /// The symbol, e.g. `cap_budget_exceeded`.
    pub fn symbol(self) -> &'static str {
        self.row().symbol
    }

    /// The spec's one-line meaning.
    pub fn meaning(self) -> &'static str {
        self.row().meaning
    }

    /// The code with this JSON-RPC number, if the registry has one.
    pub fn from_number(number: i32) -> Option<Self> {
        CODE_TABLE
            .iter()
            .find(|r| r.number == number)
            .map(|r| r.code)
    }

    /// The code with this symbol, e.g. `cap_manifest_missing`.
    pub fn from_symbol(symbol: &str) -> Option<Self> {
        CODE_TABLE
            .iter()
            .find(|r| r.symbol == symbol)
            .map(|r| r.code)
    }
}

impl fmt::Display for CapCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.symbol(), self.number())
    }
}

/// The string codes of `cap.error` events (core §7.11/§14.2 and coding §10).
///
/// A registry code (`cap_*`, [`CapCode`]) carried by a `cap.error` is
/// [`ErrorKind::Cap`]; bindings may carry codes of their own, which survive as
/// [`ErrorKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `rate_limit`: the API's rate limit was hit.
    RateLimit,
    /// `auth_error`: the agent's authentication failed.
    AuthError,
    /// `tool_timeout`: an internal tool timed out.
    ToolTimeout,
    /// `context_overflow`: the context exceeded the model's limit.
    ContextOverflow,
    /// `model_unavailable`: the configured model is offline.
    ModelUnavailable,
    /// `pty_died`: the agent's process exited unexpectedly.
    PtyDied,
    /// `parse_failed`: the driver could not parse the agent's output.
    ParseFailed,
    /// `git_dirty` (coding): the workspace has changes where clean was required.
    GitDirty,
    /// `test_failed` (coding): the test suite reported failures.
    TestFailed,
    /// `merge_conflict` (coding): a multi-agent merge could not be resolved automatically.
    MergeConflict,
    /// `language_server_down` (coding): a required language server is unavailable.
    LanguageServerDown,
    /// A code of the numeric registry, spelled by its symbol (`cap_invalid_answer`).
    Cap(CapCode),
    /// A code the spec does not define (binding-specific), kept verbatim.
    Other(String),
}

/// The standard string codes as data: `(kind, wire code, profile)`.
pub const ERROR_KIND_TABLE: [(ErrorKind, &str, Option<&str>); 11] = [
    (ErrorKind::RateLimit, "rate_limit", None),
    (ErrorKind::AuthError, "auth_error", None),
    (ErrorKind::ToolTimeout, "tool_timeout", None),
    (ErrorKind::ContextOverflow, "context_overflow", None),
    (ErrorKind::ModelUnavailable, "model_unavailable", None),
    (ErrorKind::PtyDied, "pty_died", None),
    (ErrorKind::ParseFailed, "parse_failed", None),
    (ErrorKind::GitDirty, "git_dirty", Some("coding")),
    (ErrorKind::TestFailed, "test_failed", Some("coding")),
    (ErrorKind::MergeConflict, "merge_conflict", Some("coding")),
    (
        ErrorKind::LanguageServerDown,
        "language_server_down",
        Some("coding"),
    ),
];

impl ErrorKind {
    /// The wire code, e.g. `rate_limit`, or the unknown code verbatim.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::Other(s) => s,
            ErrorKind::Cap(code) => code.symbol(),
            known => ERROR_KIND_TABLE
                .iter()
                .find(|(k, _, _)| k == known)
                .map(|(_, s, _)| *s)
                .unwrap_or("error"),
        }
    }

    /// The kind of a wire code: a string code of the table, a registry symbol
    /// ([`ErrorKind::Cap`]), else [`ErrorKind::Other`].
    pub fn parse(code: &str) -> Self {
        ERROR_KIND_TABLE
            .iter()
            .find(|(_, s, _)| *s == code)
            .map(|(k, _, _)| k.clone())
            .or_else(|| CapCode::from_symbol(code).map(ErrorKind::Cap))
            .unwrap_or_else(|| ErrorKind::Other(code.to_owned()))
    }

    /// True for the spec's own codes (core, coding or the numeric registry), false
    /// for [`ErrorKind::Other`].
    pub fn is_standard(&self) -> bool {
        !matches!(self, ErrorKind::Other(_))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(ErrorKind::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order() {
        for (i, r) in CODE_TABLE.iter().enumerate() {
            assert_eq!(r.code as usize, i, "CODE_TABLE row {i} out of enum order");
        }
    }

    #[test]
    fn codes_map_both_ways() {
        for r in CODE_TABLE {
            assert_eq!(CapCode::from_number(r.number), Some(r.code));
            assert_eq!(CapCode::from_symbol(r.symbol), Some(r.code));
            assert_eq!(r.code.symbol(), r.symbol);
            assert_eq!(r.code.number(), r.number);
        }
        assert_eq!(CapCode::from_number(-32000), None);
        assert_eq!(CapCode::from_symbol("cap_nope"), None);
    }

    #[test]
    fn error_kinds_round_trip() {
        for (k, s, _) in ERROR_KIND_TABLE {
            assert_eq!(k.as_str(), s);
            assert_eq!(ErrorKind::parse(s), k);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), k);
        }
        assert_eq!(
            ErrorKind::parse("acp_disconnected"),
            ErrorKind::Other("acp_disconnected".into())
        );
    }

    #[test]
    fn registry_codes_are_their_own_kind_spelled_by_symbol() {
        for r in CODE_TABLE {
            let kind = ErrorKind::Cap(r.code);
            assert_eq!(kind.as_str(), r.symbol);
            assert_eq!(ErrorKind::parse(r.symbol), kind);
            assert!(kind.is_standard());
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", r.symbol));
            assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), kind);
        }
    }
}
