//! `sandbox = "none" | "workspace"` on a session or as the `[fleet]` default, and the
//! `[sandbox]` table of its details, read strictly (a misspelt key would weaken a
//! confinement silently):
//!
//! ```toml
//! [fleet]
//! sandbox = "workspace"          # every session's default; a session may say "none"
//!
//! [sandbox]
//! network = "host"               # or "none": nothing but its own loopback
//! writable = ["/srv/cache"]      # beyond the workspace and the agent's own paths
//! readable = ["/opt/models"]     # inside the hidden roots (home, temp, the repo)
//! backend = "auto"               # or "bubblewrap", "landlock"
//! ```

use std::path::PathBuf;

use capfleet_engine::tomldoc::join;
use capfleet_wire::process::sandbox::{BackendChoice, Network, SandboxSpec};
use toml::de::DeTable;

use super::config::At;
use super::read::{Reader, choice, strict_keys};

const KEYS: &[&str] = &["network", "writable", "readable", "backend"];
const MODES: &[(bool, &str)] = &[(false, "none"), (true, "workspace")];
const NETWORKS: &[(Network, &str)] = &[(Network::Host, "host"), (Network::None, "none")];
const BACKENDS: &[(BackendChoice, &str)] = &[
    (BackendChoice::Auto, "auto"),
    (BackendChoice::Bubblewrap, "bubblewrap"),
    (BackendChoice::Landlock, "landlock"),
];

/// `sandbox` of the table at `path`: `true` for `"workspace"`, with where it was written.
pub(super) fn read_mode(r: &mut Reader, t: &DeTable<'_>, path: &str) -> Option<At<bool>> {
    let value = choice(r, t, path, "sandbox", MODES)?;
    Some(At {
        value,
        at: r.at(&join(path, "sandbox"), Reader::span_of(t, "sandbox")),
    })
}

/// `[sandbox]`, if present.
pub(super) fn read(r: &mut Reader, root: &DeTable<'_>) -> Option<SandboxSpec> {
    let path = "sandbox";
    let (t, _) = r.table(root, "", path)?;
    strict_keys(r, t, path, KEYS);
    let mut paths = |key: &str| -> Vec<PathBuf> {
        let list = r.strings(t, path, key).unwrap_or_default();
        for p in &list {
            if !p.starts_with('/') {
                let reason =
                    format!("{p:?}: an absolute path (a sandbox has no working directory)");
                r.invalid(&join(path, key), Reader::span_of(t, key), reason);
            }
        }
        list.into_iter().map(PathBuf::from).collect()
    };
    let writable = paths("writable");
    let readable = paths("readable");
    Some(SandboxSpec {
        network: choice(r, t, path, "network", NETWORKS).unwrap_or_default(),
        writable,
        readable,
        hidden: Vec::new(),
        backend: choice(r, t, path, "backend", BACKENDS).unwrap_or_default(),
    })
}
