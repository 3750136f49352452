//! Why a fleet file is rejected: every finding names the file, the line and the
//! dotted key.

use std::fmt;
use std::path::PathBuf;

use capfleet_engine::tomldoc::{Finding, Location, Warning};

/// One reason a fleet file is rejected.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{at}: TOML syntax error: {message}")]
    Syntax { at: Location, message: String },
    #[error("{at}: required key missing")]
    Missing { at: Location },
    #[error(
        "{at}: unknown table (a fleet file has [fleet], [[sessions]], [[routes]] and [answerer]){}",
        suggestion.map_or(String::new(), |s| format!("; did you mean `{s}`?"))
    )]
    UnknownTable {
        at: Location,
        suggestion: Option<&'static str>,
    },
    #[error(
        "{at}: unknown key{} (the keys here: {known})",
        suggestion.map_or(String::new(), |s| format!("; did you mean `{s}`?"))
    )]
    UnknownKey {
        at: Location,
        known: String,
        suggestion: Option<&'static str>,
    },
    #[error("{at}: expected {expected}, found {found}")]
    WrongType {
        at: Location,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{at}: invalid value: {reason}")]
    InvalidValue { at: Location, reason: String },
    #[error(
        "{at}: sandbox = \"none\" is refused: a submitted run (capfleet serve, a NATS worker) runs every session sandboxed; remove this key or set it to \"workspace\" (only an admin token, on a server started with --allow-unsandboxed, may ask for \"none\")"
    )]
    Unsandboxed { at: Location },
    #[error("{at}: unknown session `{name}` (sessions: {known})")]
    UnknownSession {
        at: Location,
        name: String,
        known: String,
    },
    #[error("{at}: duplicate session name `{name}` (first defined on line {first})")]
    DuplicateSession {
        at: Location,
        name: String,
        first: usize,
    },
    #[error(
        "{at}: route cycle without an exit: {} (set max_turns on one of these sessions)",
        cycle.join(" -> ")
    )]
    Cycle { at: Location, cycle: Vec<String> },
    #[error("{at}: unknown agent `{agent}`: {reason}")]
    UnknownAgent {
        at: Location,
        agent: String,
        reason: String,
    },
    #[error("{at}: bad budget: {reason}")]
    BadBudget { at: Location, reason: String },
    #[error("{at}: no start session: name one or more sessions that receive the task")]
    EmptyStart { at: Location },
    #[error("{at}: cannot read {}: {source}", path.display())]
    File {
        at: Location,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: cannot read the fleet file: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl FleetError {
    /// Where the error sits (none for an unreadable fleet file).
    pub(crate) fn location(&self) -> Option<&Location> {
        match self {
            FleetError::Syntax { at, .. }
            | FleetError::Missing { at }
            | FleetError::UnknownTable { at, .. }
            | FleetError::UnknownKey { at, .. }
            | FleetError::WrongType { at, .. }
            | FleetError::InvalidValue { at, .. }
            | FleetError::Unsandboxed { at }
            | FleetError::UnknownSession { at, .. }
            | FleetError::DuplicateSession { at, .. }
            | FleetError::Cycle { at, .. }
            | FleetError::UnknownAgent { at, .. }
            | FleetError::BadBudget { at, .. }
            | FleetError::EmptyStart { at }
            | FleetError::File { at, .. } => Some(at),
            FleetError::Io { .. } => None,
        }
    }
}

impl Finding for FleetError {
    fn syntax(at: Location, message: String) -> Self {
        FleetError::Syntax { at, message }
    }

    fn missing(at: Location) -> Self {
        FleetError::Missing { at }
    }

    fn wrong_type(at: Location, expected: &'static str, found: &'static str) -> Self {
        FleetError::WrongType {
            at,
            expected,
            found,
        }
    }

    fn invalid(at: Location, reason: String) -> Self {
        FleetError::InvalidValue { at, reason }
    }

    fn line(&self) -> Option<usize> {
        self.location().and_then(|l| l.line)
    }
}

/// Every error found in one fleet file, in source order, with the warnings found
/// beside them (an unknown key is often why a required one is missing).
#[derive(Debug)]
pub struct FleetErrors {
    pub errors: Vec<FleetError>,
    pub warnings: Vec<Warning>,
}

impl fmt::Display for FleetErrors {
    /// One error per line.
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

impl std::error::Error for FleetErrors {}
