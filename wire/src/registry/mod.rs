//! Manifest resolution (spec §5) and binding selection (spec §6).
//!
//! For an agent name, the first source that has a manifest wins:
//!
//! 1. **binary sibling**: `cap-agent.toml` next to `<name>` found on `PATH`; first in the
//!    directory of the `PATH` entry, then (if the entry is a symlink) in the directory of
//!    the resolved real binary (the agent's package root, e.g. `/opt/agent/bin`);
//! 2. **user-local**: `$XDG_CONFIG_HOME/cap/agents/<name>.toml`, else `~/.config/cap/agents/<name>.toml`;
//! 3. **system-wide**: `/usr/share/cap-agents/<name>.toml`;
//! 4. **shipped**: the `(name, toml)` list the caller embeds (`config/agents/*.toml`);
//! 5. **probe**: `<binary> --cap-manifest`, bounded by a timeout (5 s by default), its
//!    output capped at 1 MiB, its whole process group killed on timeout.
//!
//! A source that has a manifest which fails validation is an error (never skipped
//! silently). A name containing `/` or ending in `.toml` is loaded as a file directly.
//!
//! Whatever the source, a manifest with `[probe] x-flag_fallbacks` then has its flag
//! spellings settled against the installed binary's help ([`flags`]), unless probing
//! is disabled.

pub(crate) mod binding;
mod flags;
mod probe;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use binding::{Binding, Selection, SkipReason, candidates, select_binding};
pub(crate) use flags::FlagChoice;
pub use probe::PROBE_STDOUT_MAX;

use crate::manifest::{Manifest, ManifestErrors, ManifestWarning, Validated};
use crate::protocol::CapCode;
use probe::ProbeOutcome;

/// Default probe timeout.
pub(crate) const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The in-package manifest file name.
pub(crate) const SIBLING_FILE: &str = "cap-agent.toml";
/// The default system-wide directory.
pub(crate) const SYSTEM_DIR: &str = "/usr/share/cap-agents";

/// Every place the registry looks; all overridable (tests use temp dirs).
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// Directories searched for the binary (the `PATH`).
    pub path_dirs: Vec<PathBuf>,
    /// User-local manifest directory; `None` skips this source.
    pub user_dir: Option<PathBuf>,
    /// System-wide manifest directory; `None` skips this source.
    pub system_dir: Option<PathBuf>,
    /// Shipped manifests: `(agent name, TOML source)`.
    pub shipped: Vec<(String, String)>,
    /// Probe timeout; `None` disables probing.
    pub probe_timeout: Option<Duration>,
}

impl RegistryConfig {
    /// The real places: `$PATH`, `$XDG_CONFIG_HOME` or `$HOME/.config`, `/usr/share/cap-agents`,
    /// a 5 s probe, and the given shipped list.
    pub fn from_env(shipped: Vec<(String, String)>) -> Self {
        let path_dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        RegistryConfig {
            path_dirs,
            user_dir: config_home.map(|c| c.join("cap").join("agents")),
            system_dir: Some(PathBuf::from(SYSTEM_DIR)),
            shipped,
            probe_timeout: Some(DEFAULT_PROBE_TIMEOUT),
        }
    }
}

/// Where a manifest came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    BinarySibling(PathBuf),
    UserLocal(PathBuf),
    SystemWide(PathBuf),
    Shipped(String),
    Probe(PathBuf),
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::BinarySibling(p) => write!(f, "binary sibling {}", p.display()),
            Source::UserLocal(p) => write!(f, "user-local {}", p.display()),
            Source::SystemWide(p) => write!(f, "system-wide {}", p.display()),
            Source::Shipped(n) => write!(f, "shipped manifest {n}"),
            Source::Probe(b) => write!(f, "probe `{} --cap-manifest`", b.display()),
            Source::File(p) => write!(f, "file {}", p.display()),
        }
    }
}

/// A manifest found and validated.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub manifest: Manifest,
    pub source: Source,
    pub warnings: Vec<ManifestWarning>,
    /// Flag spellings settled against the installed binary (`[probe] x-flag_fallbacks`).
    pub flags: Vec<FlagChoice>,
}

/// Why resolution failed. Every variant surfaces as `cap_manifest_missing`.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("no manifest for agent `{name}` ({}); tried:\n  {}", CapCode::ManifestMissing.symbol(), tried.join("\n  "))]
    NotFound { name: String, tried: Vec<String> },
    #[error("invalid manifest ({origin}):\n{errors}")]
    Invalid {
        origin: Source,
        errors: ManifestErrors,
    },
    #[error("probe `{} --cap-manifest` timed out after {after:?} and was killed", binary.display())]
    ProbeTimeout { binary: PathBuf, after: Duration },
    #[error("probe `{} --cap-manifest` printed more than {limit} bytes", binary.display())]
    ProbeOutputTooLarge { binary: PathBuf, limit: usize },
    #[error("probe `{} --cap-manifest` printed output that is not UTF-8", binary.display())]
    ProbeNotUtf8 { binary: PathBuf },
    #[error("probe `{} --cap-manifest` printed an invalid manifest:\n{errors}", binary.display())]
    ProbeInvalid {
        binary: PathBuf,
        errors: ManifestErrors,
    },
}

impl RegistryError {
    pub fn code(&self) -> CapCode {
        CapCode::ManifestMissing
    }
}

/// Resolves agent names to validated manifests.
#[derive(Debug, Clone)]
pub struct Registry {
    config: RegistryConfig,
}

impl Registry {
    pub fn new(config: RegistryConfig) -> Self {
        Registry { config }
    }

    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// Resolve `name` (or a manifest path) to a validated manifest, its flag
    /// spellings settled against the installed binary.
    pub async fn resolve(&self, name: &str) -> Result<Resolved, RegistryError> {
        let mut r = self.find(name).await?;
        if let Some(timeout) = self.config.probe_timeout {
            r.flags = flags::settle(&mut r.manifest, &self.config.path_dirs, timeout).await;
        }
        Ok(r)
    }

    /// The first source's manifest for `name` (or a manifest path).
    async fn find(&self, name: &str) -> Result<Resolved, RegistryError> {
        if name.contains('/') || name.ends_with(".toml") {
            let path = PathBuf::from(name);
            return load_file(&path, Source::File(path.clone()));
        }
        let mut tried = Vec::new();
        let binary = probe::which(name, &self.config.path_dirs);

        match &binary {
            Some(bin) => {
                for dir in sibling_dirs(bin) {
                    let file = dir.join(SIBLING_FILE);
                    if file.is_file() {
                        return load_file(&file, Source::BinarySibling(file.clone()));
                    }
                    tried.push(format!("binary sibling {}", file.display()));
                }
            }
            None => tried.push(format!("binary sibling: `{name}` not found on PATH")),
        }

        let file_name = format!("{name}.toml");
        let dirs = [
            (
                &self.config.user_dir,
                Source::UserLocal as fn(PathBuf) -> Source,
                "user-local",
            ),
            (
                &self.config.system_dir,
                Source::SystemWide as fn(PathBuf) -> Source,
                "system-wide",
            ),
        ];
        for (dir, make, label) in dirs {
            let Some(dir) = dir else { continue };
            let file = dir.join(&file_name);
            if file.is_file() {
                return load_file(&file, make(file.clone()));
            }
            tried.push(format!("{label} {}", file.display()));
        }

        if let Some((n, src)) = self.config.shipped.iter().find(|(n, _)| n == name) {
            let source = Source::Shipped(n.clone());
            return resolved(Manifest::parse(src, &format!("<shipped {n}>")), source);
        }
        tried.push(format!("shipped manifest `{name}`"));

        match (&binary, self.config.probe_timeout) {
            (Some(bin), Some(timeout)) => match self.probe(bin, timeout).await {
                Ok(r) => return Ok(r),
                Err(ProbeMiss(why)) => {
                    tried.push(format!("probe `{} --cap-manifest`: {why}", bin.display()))
                }
                Err(ProbeHard(e)) => return Err(e),
            },
            (None, Some(_)) => tried.push(format!("probe: `{name}` not found on PATH")),
            (_, None) => tried.push("probe: disabled".to_owned()),
        }
        Err(RegistryError::NotFound {
            name: name.to_owned(),
            tried,
        })
    }

    async fn probe(&self, bin: &Path, timeout: Duration) -> Result<Resolved, ProbeError> {
        let binary = bin.to_owned();
        match probe::run(bin, timeout).await {
            ProbeOutcome::Printed(text) => {
                let origin = format!("<probe {}>", bin.display());
                match Manifest::parse(&text, &origin) {
                    Ok(v) => Ok(Resolved {
                        manifest: v.manifest,
                        source: Source::Probe(binary),
                        warnings: v.warnings,
                        flags: Vec::new(),
                    }),
                    Err(errors) => Err(ProbeHard(RegistryError::ProbeInvalid { binary, errors })),
                }
            }
            ProbeOutcome::Failed { status, stderr } => {
                Err(ProbeMiss(format!("{status}: {stderr}")))
            }
            ProbeOutcome::Spawn(e) => Err(ProbeMiss(format!("cannot run: {e}"))),
            ProbeOutcome::TimedOut => Err(ProbeHard(RegistryError::ProbeTimeout {
                binary,
                after: timeout,
            })),
            ProbeOutcome::TooLarge => Err(ProbeHard(RegistryError::ProbeOutputTooLarge {
                binary,
                limit: PROBE_STDOUT_MAX,
            })),
            ProbeOutcome::NotUtf8 => Err(ProbeHard(RegistryError::ProbeNotUtf8 { binary })),
        }
    }
}

/// A probe that found nothing (keep looking / report as tried) vs one that failed loudly.
enum ProbeError {
    ProbeMiss(String),
    ProbeHard(RegistryError),
}
use ProbeError::{ProbeHard, ProbeMiss};

/// The binary's directory, then its real directory when it is a symlink elsewhere.
fn sibling_dirs(bin: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = bin.parent() {
        dirs.push(d.to_owned());
    }
    if let Some(real_dir) = std::fs::canonicalize(bin)
        .ok()
        .and_then(|r| r.parent().map(Path::to_owned))
    {
        let same = dirs
            .first()
            .and_then(|d| std::fs::canonicalize(d).ok())
            .is_some_and(|d| d == real_dir);
        if !same {
            dirs.push(real_dir);
        }
    }
    dirs
}

fn load_file(path: &Path, source: Source) -> Result<Resolved, RegistryError> {
    resolved(Manifest::load(path), source)
}

/// A manifest read from `source`, or why it is invalid.
fn resolved(
    read: Result<Validated, ManifestErrors>,
    source: Source,
) -> Result<Resolved, RegistryError> {
    match read {
        Ok(v) => Ok(Resolved {
            manifest: v.manifest,
            source,
            warnings: v.warnings,
            flags: Vec::new(),
        }),
        Err(errors) => Err(RegistryError::Invalid {
            origin: source,
            errors,
        }),
    }
}
