//! `node --test`, with its TAP reporter (the default when output is not a terminal
//! up to Node 22) or its spec reporter: the closing `# pass N` / `ℹ pass N` lines give
//! the counts (`cancelled` count as failed, `todo` as skipped); top-level `describe`
//! blocks are the suites.

use std::sync::OnceLock;

use regex::Regex;

use super::summary::{Counts, Parser, Suite, Summary};

#[derive(Default)]
pub(super) struct NodeTest {
    /// The top-level subtest being read, and the results nested in it.
    open: Option<(String, Counts)>,
    suites: Vec<Suite>,
    totals: Totals,
}

#[derive(Default)]
struct Totals {
    seen: bool,
    pass: u64,
    fail: u64,
    cancelled: u64,
    skipped: u64,
    todo: u64,
    duration_ms: Option<u64>,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("the node test patterns compile"))
}

/// How a result line ended.
fn outcome(ok: bool, rest: &str) -> Counts {
    let mut c = Counts::default();
    if rest.contains("# SKIP") || rest.contains("# TODO") {
        c.skipped = 1;
    } else if ok {
        c.passed = 1;
    } else {
        c.failed = 1;
    }
    c
}

impl NodeTest {
    fn close(&mut self, name: &str) {
        if let Some((open, counts)) = self.open.take()
            && open == name
            && counts != Counts::default()
        {
            self.suites.push(Suite {
                name: open,
                counts,
                duration_ms: None,
            });
        }
    }

    fn nested(&mut self, c: Counts) {
        if let Some((_, counts)) = self.open.as_mut() {
            counts.add(&c);
        }
    }
}

impl Parser for NodeTest {
    fn line(&mut self, line: &str) {
        static TOTAL: OnceLock<Regex> = OnceLock::new();
        static TAP_START: OnceLock<Regex> = OnceLock::new();
        static TAP_RESULT: OnceLock<Regex> = OnceLock::new();
        static SPEC_START: OnceLock<Regex> = OnceLock::new();
        static SPEC_RESULT: OnceLock<Regex> = OnceLock::new();
        let total = re(
            &TOTAL,
            r"^(?:#|ℹ) (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$",
        );
        if let Some(c) = total.captures(line) {
            let t = &mut self.totals;
            t.seen = true;
            let n = c[2].parse::<f64>().unwrap_or(0.0);
            let whole = n as u64;
            match &c[1] {
                "pass" => t.pass = whole,
                "fail" => t.fail = whole,
                "cancelled" => t.cancelled = whole,
                "skipped" => t.skipped = whole,
                "todo" => t.todo = whole,
                "duration_ms" => t.duration_ms = Some(n.round() as u64),
                _ => {}
            }
            return;
        }
        // TAP: `# Subtest: name` at the top level opens; `    ok 1 - x` nested results
        // count; `ok 5 - name` at the top level closes.
        if let Some(c) = re(&TAP_START, r"^# Subtest: (.+)$").captures(line) {
            self.open = Some((c[1].to_owned(), Counts::default()));
            return;
        }
        let tap = re(&TAP_RESULT, r"^( *)(not ok|ok) \d+ - (.*)$");
        if let Some(c) = tap.captures(line) {
            let ok = &c[2] == "ok";
            let (name, directive) = match c[3].split_once(" # ") {
                Some((n, d)) => (n.to_owned(), format!("# {d}")),
                None => (c[3].to_owned(), String::new()),
            };
            if c[1].len() == 4 {
                self.nested(outcome(ok, &directive));
            } else if c[1].is_empty() {
                self.close(&name);
            }
            return;
        }
        // spec: `▶ name` opens; `  ✔ x (1ms)` nested results count; `✔ name (2ms)` closes.
        if let Some(c) = re(&SPEC_START, r"^▶ (.+)$").captures(line) {
            self.open = Some((c[1].to_owned(), Counts::default()));
            return;
        }
        let spec = re(
            &SPEC_RESULT,
            r"^( *)(✔|✖|﹣) (.*?)(?: \([\d.]+m?s\))?( # \w+)?$",
        );
        if let Some(c) = spec.captures(line) {
            let ok = &c[2] != "✖";
            let directive = c.get(4).map_or("", |m| m.as_str());
            let counts = if &c[2] == "﹣" {
                Counts {
                    skipped: 1,
                    ..Counts::default()
                }
            } else {
                outcome(ok, directive)
            };
            if c[1].len() == 2 {
                self.nested(counts);
            } else if c[1].is_empty() {
                let name = c[3].to_owned();
                self.close(&name);
            }
        }
    }

    fn summary(&self) -> Option<Summary> {
        let t = &self.totals;
        if !t.seen {
            return None;
        }
        Some(Summary {
            framework: "node-test",
            counts: Counts {
                passed: t.pass,
                failed: t.fail + t.cancelled,
                skipped: t.skipped + t.todo,
            },
            duration_ms: t.duration_ms,
            suites: self.suites.clone(),
        })
    }
}
