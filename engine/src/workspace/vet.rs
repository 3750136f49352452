//! Diff vetting (coding §7.3): unexpected changes flagged before anything is
//! committed — likely secrets (private keys, tokens and credentials by common
//! patterns, in added lines; key and credential files by name), large binaries,
//! deleted files, and files outside the session's declared paths. Each finding is
//! surfaced as a `cap.error` of the `git_dirty` class and in the run summary; a
//! likely secret also keeps `--commit` from committing the session's work.

use std::collections::HashSet;
use std::sync::OnceLock;

use regex::bytes::{Regex, RegexSet};
use serde::Serialize;

use super::diff::{Change, FileChange};

/// A binary file at least this large is flagged.
pub(crate) const LARGE_BINARY: u64 = 1 << 20;

/// Why a file is flagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Flag {
    /// Likely a secret (`rule` names the pattern; `line` where it was added).
    Secret {
        rule: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    },
    LargeBinary {
        bytes: u64,
    },
    Deleted,
    OutsidePaths,
}

/// One flagged file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub path: String,
    #[serde(flatten)]
    pub flag: Flag,
}

impl Finding {
    /// A finding that keeps the session's work from being committed.
    pub fn blocks_commit(&self) -> bool {
        matches!(self.flag, Flag::Secret { .. })
    }

    /// One line for people: `likely secret (AWS access key id) in .env line 2`.
    pub fn describe(&self) -> String {
        match &self.flag {
            Flag::Secret {
                rule,
                line: Some(n),
            } => format!("likely secret ({rule}) in {} line {n}", self.path),
            Flag::Secret { rule, line: None } => {
                format!("likely secret ({rule}): {}", self.path)
            }
            Flag::LargeBinary { bytes } => {
                format!("large binary {} ({})", self.path, human_bytes(*bytes))
            }
            Flag::Deleted => format!("deleted {}", self.path),
            Flag::OutsidePaths => format!("{} is outside the declared paths", self.path),
        }
    }
}

/// `20.0 MB`, `512 B`.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KB", n as f64 / f64::from(1u32 << 10)),
        n => format!("{n} B"),
    }
}

/// Secret patterns in added lines: (name, regex).
const CONTENT_RULES: &[(&str, &str)] = &[
    (
        "private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "AWS secret access key",
        r#"(?i)aws_?secret_?access_?key\s*[:=]\s*['"]?[A-Za-z0-9/+=]{40}"#,
    ),
    (
        "GitHub token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("API key (sk-…)", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("Stripe live key", r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}"),
    (
        "credential assignment",
        r#"(?i)\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd|client[_-]?secret)\b["']?\s*[:=]\s*['"][^'"\s]{12,}['"]"#,
    ),
];

fn content_rules() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        RegexSet::new(CONTENT_RULES.iter().map(|(_, re)| *re))
            .expect("the built-in secret patterns compile (unit-tested)")
    })
}

/// A file that holds secrets by its very name.
fn name_rule(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    if matches!(name, "id_rsa" | "id_dsa" | "id_ecdsa" | "id_ed25519")
        || matches!(
            ext.as_deref(),
            Some("pem" | "key" | "p12" | "pfx" | "keystore" | "jks")
        )
    {
        return Some("private key file");
    }
    let env_example = [".example", ".sample", ".template"]
        .iter()
        .any(|s| name.ends_with(s));
    if (name == ".env" || name.starts_with(".env.")) && !env_example {
        return Some("environment file");
    }
    if matches!(
        name,
        ".netrc" | ".pypirc" | ".git-credentials" | "credentials" | ".htpasswd"
    ) {
        return Some("credentials file");
    }
    None
}

/// The vetting pass over one diff: fed added lines as the diff streams, then the
/// changed files.
pub struct Vetter {
    declared: Vec<Regex>,
    secrets: Vec<Finding>,
    seen: HashSet<(String, &'static str)>,
}

impl Vetter {
    /// `declared`: the session's `paths` (globs relative to the workspace root).
    pub fn new(declared: &[String]) -> Vetter {
        Vetter {
            declared: declared
                .iter()
                .filter_map(|g| Regex::new(&glob_regex(g)).ok())
                .collect(),
            secrets: Vec::new(),
            seen: HashSet::new(),
        }
    }

    /// One added line of the diff.
    pub fn added_line(&mut self, path: &str, line: u32, content: &[u8]) {
        let matched = content_rules().matches(content);
        for i in matched.iter() {
            let rule = CONTENT_RULES[i].0;
            // One finding per file and rule: the first line.
            if self.seen.insert((path.to_owned(), rule)) {
                self.secrets.push(Finding {
                    path: path.to_owned(),
                    flag: Flag::Secret {
                        rule,
                        line: Some(line),
                    },
                });
            }
        }
    }

    /// Every finding, in path order.
    pub fn finish(self, files: &[FileChange]) -> Vec<Finding> {
        let mut out = self.secrets;
        for f in files {
            if f.change == Change::Deleted {
                out.push(finding(&f.path, Flag::Deleted));
            } else {
                if let Some(rule) = name_rule(&f.path) {
                    out.push(finding(&f.path, Flag::Secret { rule, line: None }));
                }
                if f.binary && f.size >= LARGE_BINARY {
                    out.push(finding(&f.path, Flag::LargeBinary { bytes: f.size }));
                }
            }
            if !self.declared.is_empty()
                && !self
                    .declared
                    .iter()
                    .any(|re| re.is_match(f.path.as_bytes()))
            {
                out.push(finding(&f.path, Flag::OutsidePaths));
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}

fn finding(path: &str, flag: Flag) -> Finding {
    Finding {
        path: path.to_owned(),
        flag,
    }
}

/// A glob as an anchored regex matching the path itself or anything under it:
/// `*` and `?` stay within one path segment, `**` spans segments.
pub(crate) fn glob_regex(glob: &str) -> String {
    let g = glob.trim_start_matches("./").trim_end_matches('/');
    let mut re = String::from("^");
    let mut rest = g;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("**/") {
            re.push_str("(?:.*/)?");
            rest = r;
        } else if let Some(r) = rest.strip_prefix("**") {
            re.push_str(".*");
            rest = r;
        } else {
            match c {
                '*' => re.push_str("[^/]*"),
                '?' => re.push_str("[^/]"),
                _ => re.push_str(&regex::escape(&c.to_string())),
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    re.push_str("(?:/.*)?$");
    re
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, change: Change, binary: bool, size: u64) -> FileChange {
        FileChange {
            path: path.into(),
            change,
            binary,
            size,
        }
    }

    #[test]
    fn patterns_compile_and_catch_common_secrets() {
        assert_eq!(content_rules().len(), CONTENT_RULES.len());
        let mut v = Vetter::new(&[]);
        v.added_line("k", 1, b"-----BEGIN OPENSSH PRIVATE KEY-----");
        v.added_line("cfg", 3, b"aws_access_key_id = AKIAIOSFODNN7EXAMPLE");
        v.added_line("cfg", 4, b"aws_access_key_id = AKIAIOSFODNN7EXAMPLE");
        v.added_line("ci", 1, b"token: ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789");
        v.added_line("app", 9, br#"API_KEY = "sk-proj-abcdefghijklmnopqrstuv""#);
        v.added_line("ok", 1, b"let key = compute_key(); // no secret here");
        v.added_line("ok", 2, b"password = input()");
        let found = v.finish(&[]);
        let rules: Vec<_> = found
            .iter()
            .map(|f| (f.path.as_str(), f.flag.clone()))
            .collect();
        assert!(rules.contains(&(
            "cfg",
            Flag::Secret {
                rule: "AWS access key id",
                line: Some(3)
            }
        )));
        assert!(found.iter().all(|f| f.path != "ok"), "{found:?}");
        assert_eq!(found.iter().filter(|f| f.path == "cfg").count(), 1);
        assert!(found.iter().any(|f| f.path == "k"));
        assert!(found.iter().any(|f| f.path == "ci"));
        assert!(found.iter().any(|f| f.path == "app"));
    }

    #[test]
    fn files_by_name_size_deletion_and_declared_paths() {
        let v = Vetter::new(&["src/**".into(), "README.md".into()]);
        let found = v.finish(&[
            file("src/a.rs", Change::Modified, false, 10),
            file("src/deep/b.rs", Change::Added, false, 10),
            file("README.md", Change::Deleted, false, 0),
            file(".env", Change::Added, false, 40),
            file(".env.example", Change::Added, false, 40),
            file("blob.bin", Change::Added, true, 20 << 20),
            file("small.bin", Change::Added, true, 10),
        ]);
        let described: Vec<String> = found.iter().map(Finding::describe).collect();
        assert_eq!(
            described,
            [
                "likely secret (environment file): .env",
                ".env is outside the declared paths",
                ".env.example is outside the declared paths",
                "deleted README.md",
                "large binary blob.bin (20.0 MB)",
                "blob.bin is outside the declared paths",
                "small.bin is outside the declared paths",
            ]
        );
        assert!(found[0].blocks_commit());
        assert!(!found[3].blocks_commit());
    }

    #[test]
    fn globs() {
        let m = |g: &str, p: &str| Regex::new(&glob_regex(g)).unwrap().is_match(p.as_bytes());
        assert!(m("src", "src/a/b.rs"));
        assert!(m("src/*.rs", "src/a.rs"));
        assert!(!m("src/*.rs", "src/a/b.txt"));
        assert!(m("**/*.md", "docs/x/y.md"));
        assert!(m("**/*.md", "y.md"));
        assert!(m("./tests/", "tests/t.rs"));
        assert!(!m("src", "srcx/a"));
        assert!(m("a?c", "abc"));
        assert!(m("a+b", "a+b"));
    }
}
