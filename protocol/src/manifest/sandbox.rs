//! `[sandbox]` (a capfleet extension): the agent's own state paths that a session
//! confined to its workspace (`sandbox = "workspace"`) still reaches — what it
//! writes (its settings, its session store, its logs) and what it only reads. A path
//! starts with `~/` for the user's home directory, or is absolute.

use toml::de::DeTable;

use super::build::section;
use super::reader::{Reader, join};

/// `[sandbox]`: the agent's state paths, as written (`~/` unexpanded).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SandboxPaths {
    /// `writable`: paths the agent writes (created when missing: an empty file when
    /// the name has an extension, `~/.claude.json`, else a directory).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// `readable`: paths the agent only reads (its install, its credentials).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<String>,
}

impl SandboxPaths {
    /// Whether nothing is set (the section is then left out when printed).
    pub fn is_empty(&self) -> bool {
        self.writable.is_empty() && self.readable.is_empty()
    }
}

pub(crate) fn read_sandbox(
    r: &mut Reader,
    root: &DeTable<'_>,
    empty: &DeTable<'_>,
) -> SandboxPaths {
    const P: &str = "sandbox";
    let (t, _) = section(r, root, "", P, empty);
    r.unknown_keys(t, P, &["writable", "readable"]);
    let mut paths = |key: &str| {
        let list = r.strings(t, P, key).unwrap_or_default();
        for p in &list {
            if !(p.starts_with("~/") || p.starts_with('/')) {
                r.invalid(
                    &join(P, key),
                    Reader::span_of(t, key),
                    format!("`{p}`: a path starts with `~/` (the home directory) or `/`"),
                );
            }
        }
        list
    };
    let writable = paths("writable");
    let readable = paths("readable");
    SandboxPaths { writable, readable }
}
