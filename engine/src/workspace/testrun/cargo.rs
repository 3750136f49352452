//! `cargo test` (libtest's `test result:` line per test binary, named by cargo's
//! `Running …` / `Doc-tests …` line) and `cargo nextest run` (one `PASS`/`FAIL`/`SKIP`
//! line per test, its binary id naming the suite; the `Summary` line's counts).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

use super::summary::{Counts, Parser, Suite, Summary, secs_to_ms};

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("the test-output patterns compile"))
}

/// `cargo test`.
#[derive(Default)]
pub(super) struct CargoTest {
    current: Option<String>,
    suites: Vec<Suite>,
    seen: bool,
}

impl Parser for CargoTest {
    fn line(&mut self, line: &str) {
        static RUNNING: OnceLock<Regex> = OnceLock::new();
        static DOC: OnceLock<Regex> = OnceLock::new();
        static RESULT: OnceLock<Regex> = OnceLock::new();
        if let Some(c) =
            re(&RUNNING, r"^\s+Running (?:unittests )?(.+?)(?: \(.*\))?$").captures(line)
        {
            self.current = Some(c[1].to_owned());
            return;
        }
        if let Some(c) = re(&DOC, r"^\s+Doc-tests (\S+)$").captures(line) {
            self.current = Some(format!("doc-tests {}", &c[1]));
            return;
        }
        let result = re(
            &RESULT,
            r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; \d+ filtered out(?:; finished in ([\d.]+)s)?",
        );
        if let Some(c) = result.captures(line) {
            self.seen = true;
            let counts = Counts {
                passed: c[1].parse().unwrap_or(0),
                failed: c[2].parse().unwrap_or(0),
                skipped: c[3].parse().unwrap_or(0),
            };
            let name = self.current.take().unwrap_or_else(|| "tests".to_owned());
            if counts != Counts::default() {
                self.suites.push(Suite {
                    name,
                    counts,
                    duration_ms: c.get(4).and_then(|d| secs_to_ms(d.as_str())),
                });
            }
        }
    }

    fn summary(&self) -> Option<Summary> {
        if !self.seen {
            return None;
        }
        let mut counts = Counts::default();
        let mut duration = None::<u64>;
        for s in &self.suites {
            counts.add(&s.counts);
            if let Some(d) = s.duration_ms {
                duration = Some(duration.unwrap_or(0) + d);
            }
        }
        Some(Summary {
            framework: "cargo-test",
            counts,
            duration_ms: duration,
            suites: self.suites.clone(),
        })
    }
}

/// `cargo nextest run`.
#[derive(Default)]
pub(super) struct Nextest {
    /// binary id -> test name -> (final status, ms); the latest line of a test wins
    /// (retries).
    tests: BTreeMap<String, BTreeMap<String, (Status, u64)>>,
    total: Option<(Counts, Option<u64>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Passed,
    Failed,
    Skipped,
}

impl Parser for Nextest {
    fn line(&mut self, line: &str) {
        static TEST: OnceLock<Regex> = OnceLock::new();
        static SUMMARY: OnceLock<Regex> = OnceLock::new();
        static PART: OnceLock<Regex> = OnceLock::new();
        if self.total.is_some() {
            return; // after the summary nextest repeats the failures
        }
        let summary = re(
            &SUMMARY,
            r"^\s*Summary \[\s*([\d.]+)s\] \d+ tests? run: (.*)$",
        );
        if let Some(c) = summary.captures(line) {
            let mut counts = Counts::default();
            for p in re(&PART, r"(\d+) (passed|failed|skipped|timed out)").captures_iter(&c[2]) {
                let n: u64 = p[1].parse().unwrap_or(0);
                match &p[2] {
                    "passed" => counts.passed += n,
                    "skipped" => counts.skipped += n,
                    _ => counts.failed += n,
                }
            }
            self.total = Some((counts, secs_to_ms(&c[1])));
            return;
        }
        let test = re(
            &TEST,
            r"^\s+(?:TRY \d+ )?([A-Z][A-Z-]+) \[\s*([\d.]+)s\](?: \(\s*\d+/\d+\))? (\S+) (\S.*)$",
        );
        let Some(c) = test.captures(line) else {
            return;
        };
        let status = match &c[1] {
            "PASS" | "LEAK" | "FLAKY" => Status::Passed,
            "SKIP" => Status::Skipped,
            "RETRY" | "START" | "SLOW" | "TERMINATING" | "KILLING" | "SETUP" => return,
            _ => Status::Failed,
        };
        let ms = secs_to_ms(&c[2]).unwrap_or(0);
        self.tests
            .entry(c[3].to_owned())
            .or_default()
            .insert(c[4].trim().to_owned(), (status, ms));
    }

    fn summary(&self) -> Option<Summary> {
        let (counts, duration_ms) = self.total.clone()?;
        let suites = self
            .tests
            .iter()
            .map(|(binary, tests)| {
                let mut counts = Counts::default();
                let mut ms = 0;
                for (status, t) in tests.values() {
                    ms += t;
                    match status {
                        Status::Passed => counts.passed += 1,
                        Status::Failed => counts.failed += 1,
                        Status::Skipped => counts.skipped += 1,
                    }
                }
                Suite {
                    name: binary.clone(),
                    counts,
                    duration_ms: Some(ms),
                }
            })
            .collect();
        Some(Summary {
            framework: "cargo-nextest",
            counts,
            duration_ms,
            suites,
        })
    }
}
