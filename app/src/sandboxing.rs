//! A session's sandbox as the verbs take it and say it: `--sandbox` and its details
//! on the command line (`chat`, `resolve`), the files a session is handed by name
//! made reachable inside it, how a submitted fleet is confined ([`Confinement`]:
//! `serve`, NATS workers), and what a sandbox confines said for people (`run
//! --dry-run`, `resolve --sandbox`, the run's summary). The sandbox itself is
//! `capfleet_wire::process::sandbox`.

use std::path::{Path, PathBuf};

use capfleet_engine::manifest::Manifest;
use capfleet_wire::process::sandbox::{Backend, BackendChoice, Network, Sandbox, SandboxSpec};
use capfleet_wire::registry::Binding;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agents::SIM_SCRIPT_ENV;
use crate::fleet::{SIM_EMITTED_ENV, SIM_STATE_ENV, SPEAK_FLEET_ENV};

/// `--sandbox`: a session's `sandbox = "none" | "workspace"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxMode {
    /// Unconfined: the agent runs with the user's authority.
    None,
    /// The agent and everything it spawns confined to its workspace.
    Workspace,
}

/// What a host that runs submitted fleets (`serve`, a NATS worker) lets them say of
/// their sandbox. Either way a session that says nothing runs under `sandbox =
/// "workspace"`; a queued run's message carries it (`sandbox`, missing: `workspace`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxRule {
    /// `sandbox = "none"` is refused (a finding with its line and key).
    #[default]
    Workspace,
    /// `sandbox = "none"` is honoured: an admin token on a server started with
    /// `--allow-unsandboxed` (an unsandboxed agent can write the server's token file
    /// and make itself admin, so no lesser role may ask for it).
    NoneAllowed,
}

/// How a submitted fleet is confined on the host that runs it.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    pub rule: SandboxRule,
    /// The host's own files every session's sandbox hides beside the usual roots
    /// (serve's token file and data directory, a worker's runs, credentials).
    pub hidden: Vec<PathBuf>,
}

/// The `[sandbox]` details as flags (`chat --sandbox workspace`, `resolve --sandbox`).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxFlags {
    /// Under a sandbox, the network it reaches: host (the default: an agent must
    /// reach its model's API) | none (nothing but its own loopback).
    #[arg(long = "sandbox-network", value_parser = parse_network, default_value = "host", value_name = "NET")]
    pub network: Network,
    /// Under a sandbox, a path it may also write (absolute; repeatable).
    #[arg(long = "sandbox-writable", value_parser = absolute, value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// Under a sandbox, a path inside the hidden roots (home, temporary directory,
    /// repository) it may also read (absolute; repeatable).
    #[arg(long = "sandbox-readable", value_parser = absolute, value_name = "PATH")]
    pub readable: Vec<PathBuf>,
    /// auto (bubblewrap where it can make its namespaces, else Landlock) |
    /// bubblewrap | landlock.
    #[arg(long = "sandbox-backend", value_parser = parse_backend, default_value = "auto", value_name = "BACKEND")]
    pub backend: BackendChoice,
}

fn parse_network(s: &str) -> Result<Network, String> {
    [Network::Host, Network::None]
        .into_iter()
        .find(|n| n.as_str() == s)
        .ok_or_else(|| format!("expected host | none, got {s:?}"))
}

fn parse_backend(s: &str) -> Result<BackendChoice, String> {
    match s {
        "auto" => Ok(BackendChoice::Auto),
        "bubblewrap" => Ok(BackendChoice::Bubblewrap),
        "landlock" => Ok(BackendChoice::Landlock),
        _ => Err(format!("expected auto | bubblewrap | landlock, got {s:?}")),
    }
}

fn absolute(s: &str) -> Result<PathBuf, String> {
    if s.starts_with('/') {
        Ok(PathBuf::from(s))
    } else {
        Err(format!(
            "{s:?}: an absolute path (a sandbox has no working directory)"
        ))
    }
}

impl SandboxFlags {
    /// The spec the flags describe, completed for a session with `env`.
    pub fn spec(&self, env: &[(String, String)]) -> SandboxSpec {
        let mut spec = SandboxSpec {
            network: self.network,
            writable: self.writable.clone(),
            readable: self.readable.clone(),
            hidden: Vec::new(),
            backend: self.backend,
        };
        complete(&mut spec, env);
        spec
    }
}

/// What every session's sandbox adds to its `[sandbox]`: the files the session is
/// handed by name (a simulator's script and a nested fleet read, a simulator's state
/// written), and the runs' journals and blobs (`.capfleet` of the directory capfleet
/// was started in) hidden.
pub(crate) fn complete(spec: &mut SandboxSpec, env: &[(String, String)]) {
    for (k, v) in env {
        match k.as_str() {
            SIM_SCRIPT_ENV | SPEAK_FLEET_ENV => spec.readable.push(PathBuf::from(v)),
            SIM_STATE_ENV | SIM_EMITTED_ENV => spec.writable.push(PathBuf::from(v)),
            _ => {}
        }
    }
    if let Ok(here) = std::env::current_dir() {
        spec.hidden.push(here.join(".capfleet"));
    }
}

/// What a session's sandbox would be (`run --dry-run`, `resolve --sandbox`).
pub enum Planned {
    Unconfined,
    /// An A2A session: nothing of it runs here.
    NoProcess,
    /// `sandbox = "workspace"` that cannot be had here (the run refuses it).
    Refused(String),
    Confined(Box<Sandbox>),
}

impl Planned {
    /// The sandbox `spec` resolves to for an agent of `manifest` on `binding` in `cwd`.
    pub fn of(
        spec: Option<&SandboxSpec>,
        binding: Binding,
        cwd: &Path,
        manifest: &Manifest,
    ) -> Planned {
        if binding == Binding::A2a {
            return Planned::NoProcess;
        }
        let Some(spec) = spec else {
            return Planned::Unconfined;
        };
        match Sandbox::resolve(spec, cwd, &manifest.sandbox) {
            Ok(sb) => Planned::Confined(Box::new(sb)),
            Err(e) => Planned::Refused(e.to_string()),
        }
    }

    /// Said in lines (see [`lines`]).
    pub fn lines(&self, ws: &Workspace<'_>) -> Vec<String> {
        match self {
            Planned::Unconfined => vec!["sandbox none".into()],
            Planned::NoProcess => {
                vec!["sandbox: none to apply: an A2A peer, no local process of it runs here".into()]
            }
            Planned::Refused(e) => vec![format!("sandbox workspace CANNOT be had here: {e}")],
            Planned::Confined(sb) => lines(sb, ws),
        }
    }

    /// As JSON: `null` unconfined, `{"local_process": false}` for an A2A session,
    /// `{"refused": why}`, or the sandbox with its lines (`said`).
    pub fn json(&self, ws: &Workspace<'_>) -> Value {
        match self {
            Planned::Unconfined => Value::Null,
            Planned::NoProcess => json!({ "local_process": false }),
            Planned::Refused(e) => json!({ "refused": e }),
            Planned::Confined(sb) => {
                let mut v = serde_json::to_value(sb).unwrap_or(Value::Null);
                v["workspace_made_at_start"] = Value::Bool(matches!(ws, Workspace::MadeAtStart(_)));
                v["said"] = json!(lines(sb, ws));
                v
            }
        }
    }
}

/// What the workspace of a sandbox said is.
pub enum Workspace<'a> {
    /// The path it was resolved for.
    Resolved,
    /// A coding session's own worktree of `repo`, made when the run starts (the
    /// sandbox was resolved for `repo` to say the rest).
    MadeAtStart(&'a Path),
}

/// What `sb` confines, one line each: the backend and network, what it may write,
/// what it may read, what it cannot see (bubblewrap) or read (Landlock), and each
/// thing the backend does not enforce.
pub fn lines(sb: &Sandbox, ws: &Workspace<'_>) -> Vec<String> {
    let mut writes: Vec<String> = Vec::new();
    let mut reads: Vec<String> = Vec::new();
    let mut hidden: Vec<String> = sb.hidden.iter().map(|p| shown(p)).collect();
    match ws {
        Workspace::Resolved => writes.push(format!("{} (its workspace)", shown(&sb.workspace))),
        Workspace::MadeAtStart(repo) => {
            writes.push(format!(
                "its own worktree of {} (made at start; a plain directory outside git) and that \
                 worktree's git admin directory",
                shown(repo)
            ));
            reads.push("the repository's git objects".into());
            hidden.push(format!("the repository's checkout {}", shown(repo)));
        }
    }
    let workspace = match ws {
        Workspace::Resolved => None,
        Workspace::MadeAtStart(_) => Some(sb.workspace.as_path()),
    };
    writes.extend(
        (sb.writable.iter())
            .filter(|p| Some(p.as_path()) != workspace && **p != sb.workspace)
            .map(|p| shown(p)),
    );
    writes.push("a private TMPDIR per spawn".into());
    reads.extend(sb.readable.iter().map(|p| shown(p)));
    reads.push("the agent's install when a hidden root holds it".into());
    let cannot = match sb.backend {
        Backend::Bubblewrap => "cannot see (an empty file system over each)",
        Backend::Landlock => "cannot read or write (Landlock rules)",
    };
    let mut out = vec![
        format!(
            "sandbox workspace on {}, network {}",
            sb.backend,
            sb.network.as_str()
        ),
        format!("may write: {}", writes.join(", ")),
        format!(
            "may read: the whole file system outside the hidden roots; inside them only {}",
            reads.join(", ")
        ),
        format!("{cannot}: {}", hidden.join(", ")),
    ];
    out.extend(sb.unenforced.iter().map(|u| format!("not enforced: {u}")));
    out
}

/// The row mark of a confined session in a run's summary.
pub fn mark(sb: &Sandbox) -> String {
    format!(
        "sandboxed ({}, network {})",
        sb.backend,
        sb.network.as_str()
    )
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
