//! What a test run's output says: counts, duration and suites, read line by line
//! by one parser per framework; the framework whose summary appears wins.

use regex::Regex;
use std::sync::OnceLock;

use super::cargo::{CargoTest, Nextest};
use super::node::NodeTest;
use super::pytest::Pytest;

/// Counts of one suite or of the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, other: &Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }
}

/// One suite (a test binary, a file, a `describe` block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suite {
    pub name: String,
    pub counts: Counts,
    pub duration_ms: Option<u64>,
}

/// A parsed test run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// `cargo-test`, `cargo-nextest`, `pytest` or `node-test`.
    pub framework: &'static str,
    pub counts: Counts,
    /// As the framework reports it (wall time of the command otherwise).
    pub duration_ms: Option<u64>,
    pub suites: Vec<Suite>,
}

/// A parser of one framework's output.
pub(crate) trait Parser {
    fn line(&mut self, line: &str);
    /// The run as parsed, once the framework's summary was seen.
    fn summary(&self) -> Option<Summary>;
}

/// Every parser at once.
#[derive(Default)]
pub(crate) struct Parsers {
    nextest: Nextest,
    cargo: CargoTest,
    pytest: Pytest,
    node: NodeTest,
}

impl Parsers {
    /// One line of output (ANSI colours stripped here).
    pub(crate) fn line(&mut self, raw: &str) {
        let line = strip_ansi(raw);
        let line = line.trim_end_matches('\r');
        self.nextest.line(line);
        self.cargo.line(line);
        self.pytest.line(line);
        self.node.line(line);
    }

    /// The first framework (nextest before cargo: nextest quotes libtest's lines)
    /// whose summary was seen.
    pub(crate) fn summary(&self) -> Option<Summary> {
        self.nextest
            .summary()
            .or_else(|| self.pytest.summary())
            .or_else(|| self.node.summary())
            .or_else(|| self.cargo.summary())
    }
}

/// `line` without ANSI CSI sequences.
pub(crate) fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    static CSI: OnceLock<Regex> = OnceLock::new();
    if !line.contains('\x1b') {
        return std::borrow::Cow::Borrowed(line);
    }
    let re = CSI.get_or_init(|| {
        Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]").expect("the CSI pattern compiles")
    });
    re.replace_all(line, "")
}

/// Seconds as written (`0.32`, `12`) to milliseconds.
pub(crate) fn secs_to_ms(secs: &str) -> Option<u64> {
    let s: f64 = secs.parse().ok()?;
    (s.is_finite() && s >= 0.0).then(|| (s * 1000.0).round() as u64)
}
