//! `pytest`: the final `N failed, M passed, K skipped … in 0.05s` line (with or
//! without its `===` rule) gives the counts; suites are the test files, from the
//! progress lines (`tests/test_a.py .Fsx   [ 66%]`) or, with `-v`, from each
//! `path::test STATUS` line.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

use super::summary::{Counts, Parser, Suite, Summary, secs_to_ms};

#[derive(Default)]
pub(super) struct Pytest {
    files: BTreeMap<String, Counts>,
    total: Option<(Counts, Option<u64>)>,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("the pytest patterns compile"))
}

impl Parser for Pytest {
    fn line(&mut self, line: &str) {
        static FINAL: OnceLock<Regex> = OnceLock::new();
        static PART: OnceLock<Regex> = OnceLock::new();
        static PROGRESS: OnceLock<Regex> = OnceLock::new();
        static VERBOSE: OnceLock<Regex> = OnceLock::new();
        let last = re(
            &FINAL,
            r"^=*\s*((?:\d+ (?:passed|failed|skipped|xfailed|xpassed|errors?|deselected|warnings?|rerun)(?:, )?)+) in ([\d.]+)s\b.*?=*$",
        );
        if let Some(c) = last.captures(line) {
            let mut counts = Counts::default();
            for p in re(&PART, r"(\d+) (\w+)").captures_iter(&c[1]) {
                let n: u64 = p[1].parse().unwrap_or(0);
                match &p[2] {
                    "passed" | "xpassed" => counts.passed += n,
                    "failed" | "error" | "errors" => counts.failed += n,
                    "skipped" | "xfailed" => counts.skipped += n,
                    _ => {}
                }
            }
            self.total = Some((counts, secs_to_ms(&c[2])));
            return;
        }
        if let Some(c) = re(&PROGRESS, r"^(\S+\.py) ([.FEsxX]+)\s*(?:\[\s*\d+%\])?$").captures(line)
        {
            let counts = self.files.entry(c[1].to_owned()).or_default();
            for ch in c[2].chars() {
                match ch {
                    '.' | 'X' => counts.passed += 1,
                    'F' | 'E' => counts.failed += 1,
                    _ => counts.skipped += 1,
                }
            }
            return;
        }
        let verbose = re(
            &VERBOSE,
            r"^(\S+\.py)::\S.*? (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b",
        );
        if let Some(c) = verbose.captures(line) {
            let counts = self.files.entry(c[1].to_owned()).or_default();
            match &c[2] {
                "PASSED" | "XPASS" => counts.passed += 1,
                "FAILED" | "ERROR" => counts.failed += 1,
                _ => counts.skipped += 1,
            }
        }
    }

    fn summary(&self) -> Option<Summary> {
        let (counts, duration_ms) = self.total.clone()?;
        Some(Summary {
            framework: "pytest",
            counts,
            duration_ms,
            suites: self
                .files
                .iter()
                .map(|(name, counts)| Suite {
                    name: name.clone(),
                    counts: counts.clone(),
                    duration_ms: None,
                })
                .collect(),
        })
    }
}
