//! The coding profile's `[capabilities.coding]` section (coding profile §3).
//!
//! `fs.read = true` and `fs = { read = true }` are the same TOML table, so both
//! spellings read identically here.

use toml::de::DeTable;

use super::error::ManifestError;
use super::reader::{Reader, Wire, join};
use super::types::wire_serialize;

/// `fs.scope`: where `cap.fs.*` may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsScope {
    /// `workspace_only`: only inside the session's workspace.
    WorkspaceOnly,
    /// `project_root`: anywhere under the project's root.
    ProjectRoot,
    /// `unrestricted`: anywhere the agent's user can reach.
    Unrestricted,
}

impl Wire for FsScope {
    const ALL: &'static [(Self, &'static str)] = &[
        (FsScope::WorkspaceOnly, "workspace_only"),
        (FsScope::ProjectRoot, "project_root"),
        (FsScope::Unrestricted, "unrestricted"),
    ];
}

/// `tool_permission`: `none | confirm | interactive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolPermission {
    /// `none`: the agent never asks before using a tool.
    None,
    /// `confirm`: the agent asks with a yes/no before tools it deems risky.
    Confirm,
    /// `interactive`: the agent asks through `cap.permission.request`.
    Interactive,
}

impl Wire for ToolPermission {
    const ALL: &'static [(Self, &'static str)] = &[
        (ToolPermission::None, "none"),
        (ToolPermission::Confirm, "confirm"),
        (ToolPermission::Interactive, "interactive"),
    ];
}

wire_serialize!(FsScope, ToolPermission);

/// `fs.*`: every flag defaults to false; `scope` is required when any flag is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct FsCaps {
    /// `fs.read`: the agent may read files through the client.
    pub read: bool,
    /// `fs.write`: the agent may write files through the client.
    pub write: bool,
    /// `fs.list`: the agent may list directories.
    pub list: bool,
    /// `fs.exists`: the agent may test whether a path exists.
    pub exists: bool,
    /// `fs.delete`: the agent may delete files.
    pub delete: bool,
    /// `fs.watch`: the agent may subscribe to `cap.fs.change` events.
    pub watch: bool,
    /// `fs.scope`: where those operations may reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<FsScope>,
}

impl FsCaps {
    /// True when any filesystem operation is enabled.
    pub fn any(&self) -> bool {
        self.read || self.write || self.list || self.exists || self.delete || self.watch
    }
}

/// `terminal.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TerminalCaps {
    /// Default false.
    pub enabled: bool,
    /// The most terminals open at once; unset means no declared limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_max: Option<u32>,
}

/// The artifact names of coding §6.
pub const KNOWN_ARTIFACTS: [&str; 6] = [
    "diff",
    "pr_link",
    "test_result",
    "commit",
    "plan_doc",
    "transcript",
];

/// `[capabilities.coding]`. All optional except `tool_permission` (and `fs.scope`, see [`FsCaps`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CodingCaps {
    /// `revision` of the coding profile the agent implements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Required.
    pub tool_permission: ToolPermission,
    /// Empty = all permitted.
    pub tools_allowed: Vec<String>,
    /// Evaluated after the allow-list.
    pub tools_denied: Vec<String>,
    /// The coding artifact types the agent emits (names of [`KNOWN_ARTIFACTS`]).
    pub artifacts: Vec<String>,
    /// Default false.
    pub git_aware: bool,
    /// Language servers the agent can use, by name.
    pub language_servers: Vec<String>,
    /// Test runners the agent can drive, by name.
    pub test_runners: Vec<String>,
    /// `fs.*`: the client filesystem operations the agent uses.
    pub fs: FsCaps,
    /// `terminal.*`: the client terminals the agent uses.
    pub terminal: TerminalCaps,
}

impl CodingCaps {
    /// Caps that declare `tool_permission` and nothing more: no tool lists, no
    /// artifacts, not git-aware, no language servers or test runners, no `fs.*`, no
    /// terminal (what a table without the optional keys reads as).
    pub fn only(tool_permission: ToolPermission) -> Self {
        CodingCaps {
            revision: None,
            tool_permission,
            tools_allowed: Vec::new(),
            tools_denied: Vec::new(),
            artifacts: Vec::new(),
            git_aware: false,
            language_servers: Vec::new(),
            test_runners: Vec::new(),
            fs: FsCaps::default(),
            terminal: TerminalCaps::default(),
        }
    }
}

const KNOWN: &[&str] = &[
    "revision",
    "fs",
    "terminal",
    "tool_permission",
    "tools_allowed",
    "tools_denied",
    "artifacts",
    "git_aware",
    "language_servers",
    "test_runners",
];

/// Read `[capabilities.coding]` (`path` is `capabilities.coding`); `None` if it has errors.
pub(crate) fn read(
    r: &mut Reader,
    t: &DeTable<'_>,
    path: &str,
    span: std::ops::Range<usize>,
) -> Option<CodingCaps> {
    let before = r.errors.len();
    r.unknown_keys(t, path, KNOWN);
    let revision = r.string_or_date(t, path, "revision");

    let mut fs = FsCaps::default();
    if let Some((ft, _)) = r.table(t, path, "fs") {
        let fp = join(path, "fs");
        r.unknown_keys(
            ft,
            &fp,
            &[
                "read", "write", "list", "exists", "delete", "watch", "scope",
            ],
        );
        fs.read = r.boolean(ft, &fp, "read").unwrap_or(false);
        fs.write = r.boolean(ft, &fp, "write").unwrap_or(false);
        fs.list = r.boolean(ft, &fp, "list").unwrap_or(false);
        fs.exists = r.boolean(ft, &fp, "exists").unwrap_or(false);
        fs.delete = r.boolean(ft, &fp, "delete").unwrap_or(false);
        fs.watch = r.boolean(ft, &fp, "watch").unwrap_or(false);
        fs.scope = r.wire(ft, &fp, "scope");
        if fs.any() && ft.get("scope").is_none() {
            let at = r.at(&join(&fp, "scope"), t.get("fs").map(|v| v.span()));
            let reason = "coding §3 requires fs.scope when any fs.* capability is true".to_owned();
            r.push(ManifestError::RequiredBy { at, reason });
        }
    }

    let mut terminal = TerminalCaps::default();
    if let Some((tt, _)) = r.table(t, path, "terminal") {
        let tp = join(path, "terminal");
        r.unknown_keys(tt, &tp, &["enabled", "concurrent_max"]);
        terminal.enabled = r.boolean(tt, &tp, "enabled").unwrap_or(false);
        terminal.concurrent_max = r.uint(tt, &tp, "concurrent_max");
    }

    let tool_permission = r.wire(t, path, "tool_permission");
    if t.get("tool_permission").is_none() {
        let at = r.at(&join(path, "tool_permission"), Some(span));
        let reason = "coding §3 requires tool_permission in [capabilities.coding]".to_owned();
        r.push(ManifestError::RequiredBy { at, reason });
    }

    let artifacts = r.strings(t, path, "artifacts").unwrap_or_default();
    for a in &artifacts {
        if !KNOWN_ARTIFACTS.contains(&a.as_str()) && !a.starts_with("x-") {
            let span = Reader::span_of(t, "artifacts");
            r.note(
                &join(path, "artifacts"),
                span,
                format!("unknown artifact type {a:?} (coding §6)"),
            );
        }
    }

    let caps = CodingCaps {
        revision,
        tool_permission: tool_permission.unwrap_or(ToolPermission::Interactive),
        tools_allowed: r.strings(t, path, "tools_allowed").unwrap_or_default(),
        tools_denied: r.strings(t, path, "tools_denied").unwrap_or_default(),
        artifacts,
        git_aware: r.boolean(t, path, "git_aware").unwrap_or(false),
        language_servers: r.strings(t, path, "language_servers").unwrap_or_default(),
        test_runners: r.strings(t, path, "test_runners").unwrap_or_default(),
        fs,
        terminal,
    };
    (r.errors.len() == before).then_some(caps)
}
