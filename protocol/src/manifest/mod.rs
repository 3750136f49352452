//! Agent manifests (spec §5, coding profile §3): typed sections, the §5.2 required
//! fields, §5.3 defaults, the §5.4 regex subset, and every error with its line.
//!
//! ```text
//! Manifest::parse(src, "cap-agent.toml") -> Validated { manifest, warnings }
//!                                        | ManifestErrors (all of them, in source order)
//! ```
//!
//! Unknown keys are warnings; `x-` prefixed keys (spec §14.1) are accepted silently at
//! any level. Compiled patterns live in [`Manifest::patterns`] so drivers never recompile.

pub mod a2a;
mod build;
pub mod coding;
pub mod error;
mod fast_path;
mod limits;
mod parse_section;
pub mod patterns;
mod reader;
pub mod sandbox;
pub mod types;

use std::path::Path;

pub use coding::{CodingCaps, FsCaps, FsScope, TerminalCaps, ToolPermission};
pub use error::{
    Location, ManifestError, ManifestErrors, ManifestWarning, RegexConstruct, WarningKind,
};
pub use patterns::{PatternError, Patterns};
pub use types::*;

use reader::Reader;

/// A validated manifest: defaults applied, patterns compiled.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Manifest {
    /// `revision` (`YYYY-MM-DD`, spec §4), top-level or from `[agent].revision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// `[agent]`: name, binary, version match, profiles.
    pub agent: Agent,
    /// `[probe]`: how to ask the binary its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// `[startup]`: the command, its flags and the ready condition.
    pub startup: Startup,
    /// `[fast_path]`: the structured bindings the agent speaks.
    pub fast_path: FastPath,
    /// `[pty]`: terminal size and input behaviour.
    pub pty: Pty,
    /// `[parse]`: the screen patterns the PTY driver matches.
    pub parse: Parse,
    /// `[capabilities]`: what the agent declares it supports.
    pub capabilities: Capabilities,
    /// `[cost]`: whether the agent's usage is metered.
    pub cost: Cost,
    /// `[limits]` (capfleet extension): bounds on the agent's output.
    pub limits: Limits,
    /// `[x-a2a]` (capfleet extension): how the A2A binding reaches its peer.
    #[serde(rename = "x-a2a", skip_serializing_if = "a2a::A2aOptions::is_default")]
    pub a2a: a2a::A2aOptions,
    /// `[sandbox]` (capfleet extension): the agent's state paths under a sandbox.
    #[serde(skip_serializing_if = "sandbox::SandboxPaths::is_empty")]
    pub sandbox: sandbox::SandboxPaths,
    /// Every pattern, compiled (multi-line) from the fields above.
    #[serde(skip)]
    pub patterns: Patterns,
}

/// A manifest that passed validation, with what it was warned about.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The manifest, defaults applied.
    pub manifest: Manifest,
    /// Unknown keys and other findings that do not invalidate it.
    pub warnings: Vec<ManifestWarning>,
}

impl Manifest {
    /// The agent claims the coding profile: `"coding"` in `agent.profiles` or a
    /// `[capabilities.coding]` section (its sessions get isolated workspaces).
    pub fn claims_coding(&self) -> bool {
        self.agent.profiles.iter().any(|p| p == "coding") || self.capabilities.coding.is_some()
    }

    /// Parse and validate TOML source; `origin` (a path or a label) prefixes every finding.
    pub fn parse(src: &str, origin: &str) -> Result<Validated, ManifestErrors> {
        let mut r = Reader::new(origin, src);
        let root = r.parse(src).map_err(|errors| ManifestErrors {
            origin: origin.to_owned(),
            errors,
        })?;
        let read = build::read(&mut r, root.get_ref());
        let (errors, warnings) = r.finish();
        if !errors.is_empty() {
            return Err(ManifestErrors {
                origin: origin.to_owned(),
                errors,
            });
        }
        let manifest = Manifest {
            revision: read.revision,
            agent: read.agent,
            probe: read.probe,
            startup: read.startup,
            fast_path: read.fast_path,
            pty: read.pty,
            parse: read.parse,
            capabilities: read.capabilities,
            cost: read.cost,
            limits: read.limits,
            a2a: read.a2a,
            sandbox: read.sandbox,
            patterns: read.patterns,
        };
        Ok(Validated { manifest, warnings })
    }

    /// Read and validate a manifest file; its path is the origin.
    pub fn load(path: impl AsRef<Path>) -> Result<Validated, ManifestErrors> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(src) => Manifest::parse(&src, &origin),
            Err(source) => Err(ManifestErrors {
                origin,
                errors: vec![ManifestError::Io {
                    path: path.to_owned(),
                    source,
                }],
            }),
        }
    }

    /// The effective manifest (defaults applied) as TOML; parses back to an equal manifest.
    pub fn to_toml_string(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// True when `agent.profiles` declares `profile` (e.g. `"coding"`).
    pub fn has_profile(&self, profile: &str) -> bool {
        self.agent.profiles.iter().any(|p| p == profile)
    }
}
