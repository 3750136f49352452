//! Sandboxes: a session's agent, its terminals and its test command confined to its
//! workspace (`sandbox = "workspace"`), on one of two backends.
//!
//! ```text
//! SandboxSpec (the fleet's [sandbox], the session's choice)
//!   --Sandbox::resolve(spec, workspace, manifest's [sandbox])-->  Sandbox (journaled)
//!   --Sandbox::confine(program)-->  Confined (per spawn: private TMPDIR, the
//!                                   bubblewrap argv or the Landlock ruleset)
//!   --SpawnSpec::confined(..)-->    every child process spawned inside it
//! ```
//!
//! The model is the same on both backends: the whole file system is readable but the
//! hidden roots (the home directory, the temporary directory, the repository the
//! worktree belongs to, capfleet's run directory and whatever the fleet adds), inside
//! which only the readable and writable paths come back; only the writable paths
//! (the workspace, the worktree's own git admin directory, a private `TMPDIR`, the
//! agent's state paths) can be written. bubblewrap ([`bwrap`]) does it with mounts in
//! new user, pid, ipc, uts (and, for `network = "none"`, net) namespaces; Landlock
//! ([`landlock`]) with rules a helper process applies to itself before it executes the
//! program ([`HELPER_BIN`] beside capfleet's binary: [`set_helper`], [`serve_landlock`]),
//! and its scoping of signals and abstract unix sockets. Either way the spawn itself
//! runs no code in the child between fork and exec, so the standard library spawns
//! with `posix_spawn`, not a fork of the whole application. What a backend cannot
//! enforce is listed in [`Sandbox::unenforced`], journaled and shown, never silently
//! dropped.

mod bwrap;
mod landlock;
mod paths;
mod probe;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::manifest::sandbox::SandboxPaths;

pub use landlock::{HELPER_BIN, serve as serve_landlock, set_helper};
pub use probe::availability;

/// What a sandboxed session reaches of the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network, as unsandboxed (agents must reach their model's API).
    #[default]
    Host,
    /// Nothing but its own loopback.
    None,
}

impl Network {
    /// Its name in a fleet's `[sandbox]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Host => "host",
            Network::None => "none",
        }
    }
}

/// Which backend a sandbox asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// bubblewrap where it can create its namespaces, else Landlock.
    #[default]
    Auto,
    Bubblewrap,
    Landlock,
}

/// The backend a sandbox runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Bubblewrap,
    Landlock,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Bubblewrap => "bubblewrap",
            Backend::Landlock => "landlock",
        })
    }
}

/// A session's sandbox as configured (`sandbox = "workspace"` and the `[sandbox]`
/// table), before its workspace is known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    pub network: Network,
    /// Paths writable beyond the workspace and the agent's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<PathBuf>,
    /// Paths readable inside the hidden roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<PathBuf>,
    /// Roots hidden beyond the home and temporary directories and the repository
    /// (capfleet's run directory, serve's data directory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
    #[serde(default)]
    pub backend: BackendChoice,
}

/// Why a sandbox cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("no sandbox backend: {0}")]
    Unavailable(String),
    #[error("sandbox: {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("sandbox: the Landlock ruleset: {0}")]
    Landlock(String),
}

/// A sandbox resolved for a workspace: what is enforced, journaled and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    pub backend: Backend,
    pub network: Network,
    pub workspace: PathBuf,
    /// Everything the session may write (a private `TMPDIR` is added per spawn).
    pub writable: Vec<PathBuf>,
    /// What it may read inside the hidden roots (beside the writable paths).
    pub readable: Vec<PathBuf>,
    /// The roots it cannot see (bubblewrap) or read (Landlock).
    pub hidden: Vec<PathBuf>,
    /// What this backend does not enforce here, said as such.
    pub unenforced: Vec<String>,
}

impl Sandbox {
    /// Resolve `spec` for a session working in `workspace` whose agent declares
    /// `agent` state paths: the backend chosen (see [`availability`]), `~/` expanded,
    /// the worktree's git directories added.
    pub fn resolve(
        spec: &SandboxSpec,
        workspace: &Path,
        agent: &SandboxPaths,
    ) -> Result<Sandbox, SandboxError> {
        let backend = availability().choose(spec.backend)?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let workspace = paths::canonical(workspace)?;
        let git = paths::git_dirs(&workspace);
        let mut writable = vec![workspace.clone()];
        writable.extend(git.admin.iter().cloned());
        writable.extend(paths::expand_all(&agent.writable, home.as_deref()));
        writable.extend(spec.writable.iter().cloned());
        let mut readable: Vec<PathBuf> = git.common.iter().cloned().collect();
        readable.extend(paths::expand_all(&agent.readable, home.as_deref()));
        readable.extend(spec.readable.iter().cloned());
        let mut hidden: Vec<PathBuf> = home.into_iter().collect();
        hidden.push(std::env::temp_dir());
        hidden.extend(git.repository);
        hidden.extend(spec.hidden.iter().cloned());
        let mut unenforced = probe::unenforced(backend, spec.network);
        let (writable, readable) = (paths::dedup(writable), paths::dedup(readable));
        let allowed: Vec<PathBuf> = writable.iter().chain(&readable).cloned().collect();
        let hidden = paths::roots(paths::dedup(hidden), &allowed);
        if backend == Backend::Landlock {
            unenforced.extend(paths::uncovered(&hidden, &writable, &readable));
        }
        Ok(Sandbox {
            backend,
            network: spec.network,
            workspace,
            writable,
            readable,
            hidden,
            unenforced,
        })
    }

    /// The spec that resolves to this sandbox again (a resumed run keeps the sandbox
    /// its journal holds): the same backend and network, every path it had.
    pub fn as_spec(&self) -> SandboxSpec {
        SandboxSpec {
            network: self.network,
            writable: self.writable.clone(),
            readable: self.readable.clone(),
            hidden: self.hidden.clone(),
            backend: match self.backend {
                Backend::Bubblewrap => BackendChoice::Bubblewrap,
                Backend::Landlock => BackendChoice::Landlock,
            },
        }
    }

    /// Everything needed to spawn `program` inside: a private `TMPDIR`, the agent's
    /// missing state paths created, the program's install made readable when a
    /// hidden root holds it, and the backend's argv (bubblewrap's, or the Landlock
    /// helper's, which builds the ruleset in the child).
    pub fn confine(&self, program: &Path) -> Result<Confined, SandboxError> {
        let tmp = tempfile::Builder::new()
            .prefix("capfleet-sandbox-")
            .tempdir()
            .map_err(|source| SandboxError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        for w in &self.writable {
            paths::create_missing(w)?;
        }
        let mut sandbox = self.clone();
        sandbox.writable.push(tmp.path().to_owned());
        let found = crate::process::find_program(program, &self.workspace, None);
        let program = found.unwrap_or_else(|| program.to_owned());
        sandbox
            .readable
            .extend(paths::install_roots(&program, &self.hidden));
        let enforce = match self.backend {
            Backend::Bubblewrap => Enforce {
                wrapper: probe::bwrap().to_owned(),
                args: bwrap::args(&sandbox),
            },
            Backend::Landlock => {
                let (wrapper, args) = landlock::helper_argv(&sandbox)?;
                Enforce { wrapper, args }
            }
        };
        Ok(Confined {
            program,
            tmp,
            enforce,
        })
    }
}

/// One spawn's confinement; its private `TMPDIR` is removed when the last holder
/// (the spawn's process group) drops it.
#[derive(Debug)]
pub struct Confined {
    /// The program, looked up on `PATH` before the hidden roots hide it.
    program: PathBuf,
    tmp: tempfile::TempDir,
    enforce: Enforce,
}

/// The program that confines, and its arguments before the program confined: both
/// backends wrap the program, so the spawn is a plain one (`posix_spawn`).
#[derive(Debug)]
struct Enforce {
    /// bubblewrap (its path, so that a `PATH` in the spawn's environment does not
    /// make the standard library fork to search it), or the Landlock helper.
    wrapper: PathBuf,
    /// bubblewrap's arguments up to `--`, or the helper's sandbox.
    args: Vec<OsString>,
}

impl Confined {
    /// The command that runs `args` of the program inside (`TMPDIR` set).
    pub fn command(&self, args: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.enforce.wrapper);
        cmd.args(&self.enforce.args).arg(&self.program).args(args);
        cmd.env("TMPDIR", self.tmp.path());
        cmd
    }
}

#[cfg(test)]
mod tests;
