//! Fleets: `fleet.toml` read, validated (every error with file, line and key, before
//! anything spawns) and built into a [`Fleet`] — the engine's routing spec, one
//! session spec per session, the answerer's policy, budgets and run settings — plus
//! where runs keep their journal.
//!
//! ```text
//! fleet::load("fleet.toml", task_override).await -> Loaded { fleet, warnings }
//!                                                 | FleetErrors (all of them, in source order)
//! ```

mod answerer;
mod build;
mod chaos;
pub mod config;
pub(crate) mod error;
mod notify;
mod read;
pub mod run_dir;
mod sandbox;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use capfleet_engine::answerer::Policy;
use capfleet_engine::answerer::ResearchSpec;
use capfleet_engine::router::RoutingSpec;
use capfleet_engine::session::SessionSpec;
use capfleet_engine::tomldoc::Warning;
use capfleet_engine::workspace::TestCommand;
use capfleet_wire::supervision::rate_limit::RateLimitPolicy;

pub use chaos::inline as inline_chaos;
pub(crate) use config::OnError;
pub(crate) use error::{FleetError, FleetErrors};
pub use run_dir::RunDir;

use crate::sandboxing::Confinement;

/// The variable naming a simulator's state directory (`once` crash markers).
pub(crate) const SIM_STATE_ENV: &str = "CAPFLEET_SIM_STATE";

/// The variable naming the file a simulator appends each turn result it wrote to
/// (`--emitted`): `emitted.jsonl` in its state directory unless the fleet sets one,
/// where the chaos report counts what the agents emitted against the journal.
pub(crate) const SIM_EMITTED_ENV: &str = "CAPFLEET_SIM_EMITTED";

/// The variable naming the fleet `capfleet speak` answers as (a session's `fleet` key).
pub(crate) const SPEAK_FLEET_ENV: &str = "CAPFLEET_SPEAK_FLEET";

/// A validated fleet, ready to run.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub name: String,
    /// The fleet file, as given.
    pub file: PathBuf,
    /// Start sessions, task (read, `--task` applied), routes, `max_concurrent`.
    pub routing: RoutingSpec,
    /// In file order; each URN is `cap://<fleet>/<session>`.
    pub sessions: Vec<FleetSession>,
    /// The session whose final text answers for the fleet as one agent
    /// (`[fleet].answer_from`, else the first start session).
    pub answer_from: String,
    /// The answerer's policy (`deny_tools`, `allow_tools`, `max_risk`).
    pub policy: Policy,
    /// Ask no human what the policy leaves open (`auto_answer = true` or
    /// `"research"`): research answers it when the fleet has an `[answerer]`, else the
    /// answer is fail-safe.
    pub auto_answer: bool,
    /// The research answerer (`[answerer]`), if any.
    pub research: Option<ResearchSpec>,
    pub budgets: Budgets,
    pub on_error: OnError,
    /// Every session's turn timeout (`turn_timeout_s`, default 600 s).
    pub turn_timeout: Duration,
    /// Every session's rate-limit policy (`on_rate_limit`, `max_pause`,
    /// `rate_limit_backoff`).
    pub rate_limit: RateLimitPolicy,
    /// The git revision coding sessions' worktrees branch from (default `HEAD`).
    pub base: Option<String>,
    /// One run's journal at most (`journal_max_mb`, default 1024 MiB): past it text
    /// bodies are cut, each cut recorded. The same bound holds for the text of the
    /// run's transcripts, all together (past it a transcript marks the cut and counts
    /// it in `text_cut_bytes`).
    pub journal_max_bytes: u64,
    /// How long a question waits for a remote answer (`[fleet] ask_timeout`; unset:
    /// the server's `--ask-timeout`).
    pub ask_timeout: Option<Duration>,
    /// `[notify]`: the run's webhook.
    pub notify: Option<crate::notify::NotifySpec>,
    /// `[chaos]` (or `capfleet run --chaos`, which replaces it): the run's faults.
    pub chaos: Option<std::sync::Arc<capfleet_engine::chaos::ChaosSpec>>,
}

/// One session of a fleet.
#[derive(Debug, Clone)]
pub struct FleetSession {
    pub spec: SessionSpec,
    /// The agent as written (registry key or manifest path).
    pub agent: String,
    /// Where its manifest came from (e.g. `shipped manifest sim`).
    pub source: String,
    pub budget_usd: Option<f64>,
    /// The agent claims the coding profile: the session gets its own workspace.
    pub coding: bool,
    /// Declared paths (globs) for vetting.
    pub paths: Vec<String>,
    pub test_command: Option<TestCommand>,
}

/// The fleet's budgets, in USD.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    pub total_usd: Option<f64>,
    /// Sessions with their own budget (each at most the total).
    pub per_session: Vec<(String, f64)>,
}

/// A fleet with what it was warned about (unknown keys).
#[derive(Debug)]
pub struct Loaded {
    pub fleet: Fleet,
    pub warnings: Vec<Warning>,
}

/// A fleet file read and validated: everything said about its text, before anything
/// it names is looked for on disk.
pub struct Checked {
    file: config::FleetFile,
    pub errors: Vec<FleetError>,
    pub warnings: Vec<Warning>,
}

/// Reads and validates the fleet file `src` (`origin` names it in every finding); a
/// file that is not TOML is the error.
pub fn check(origin: &str, src: &str) -> Result<Checked, FleetErrors> {
    let mut r = read::Reader::new(origin, src);
    let root = r.parse(src).map_err(|errors| FleetErrors {
        errors,
        warnings: Vec::new(),
    })?;
    let file = read::read(&mut r, root.get_ref());
    let mut found = validate::validate(&file);
    let (mut errors, warnings) = r.finish();
    errors.append(&mut found);
    Ok(Checked {
        file,
        errors,
        warnings,
    })
}

/// No `..`, no root, no prefix: a path that stays inside the directory it is joined to.
pub fn plain_relative(name: &str) -> bool {
    !name.is_empty()
        && Path::new(name)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Read, validate and build a fleet file; `task` replaces `[fleet].task`.
pub async fn load(path: &Path, task: Option<&str>) -> Result<Loaded, FleetErrors> {
    load_in(path, task, None).await
}

/// [`load`], sessions without a `cwd` working in `cwd` (default: the current
/// directory): a fleet answering an editor works in the editor's directory.
pub(crate) async fn load_in(
    path: &Path,
    task: Option<&str>,
    cwd: Option<&Path>,
) -> Result<Loaded, FleetErrors> {
    load_with(path, task, cwd, None, None).await
}

/// [`load_in`] for a fleet someone submitted to this host (`serve`, `worker`): its
/// sessions' own `cwd` must resolve inside one of `roots` (with none, no session
/// names a `cwd`), its `[notify]` signs with a secret file it submitted, never a
/// variable of this host, and its sessions are confined as `confinement` says.
pub(crate) async fn load_submitted(
    path: &Path,
    task: Option<&str>,
    cwd: Option<&Path>,
    roots: &[PathBuf],
    confinement: &Confinement,
) -> Result<Loaded, FleetErrors> {
    load_with(path, task, cwd, Some(roots), Some(confinement)).await
}

/// [`load_in`] of a fleet submitted to run on another host (a run queued in NATS):
/// confined as `confinement` says (its `sandbox = "none"` refused here already).
pub(crate) async fn load_confined(
    path: &Path,
    task: Option<&str>,
    confinement: &Confinement,
) -> Result<Loaded, FleetErrors> {
    load_with(path, task, None, None, Some(confinement)).await
}

async fn load_with(
    path: &Path,
    task: Option<&str>,
    cwd: Option<&Path>,
    submitted: Option<&[PathBuf]>,
    confinement: Option<&Confinement>,
) -> Result<Loaded, FleetErrors> {
    let src = std::fs::read_to_string(path).map_err(|source| FleetErrors {
        errors: vec![FleetError::Io {
            path: path.to_owned(),
            source,
        }],
        warnings: Vec::new(),
    })?;
    let Checked {
        file,
        mut errors,
        warnings,
    } = check(&path.display().to_string(), &src)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("fleet");
    let cx = build::Context {
        dir,
        stem,
        task,
        cwd,
        submitted,
        confinement,
    };
    let built = build::build(&file, &cx).await;
    match built {
        Err(mut e) => errors.append(&mut e),
        Ok(mut fleet) if errors.is_empty() => {
            fleet.file = path.to_owned();
            return Ok(Loaded { fleet, warnings });
        }
        Ok(_) => {}
    }
    // A key with a value of the wrong type is reported once, not also as missing.
    let reported: Vec<String> = errors
        .iter()
        .filter(|e| matches!(e, FleetError::WrongType { .. }))
        .filter_map(|e| e.location().map(|l| l.key.clone()))
        .collect();
    errors.retain(|e| !matches!(e, FleetError::Missing { at } if reported.contains(&at.key)));
    errors.sort_by_key(|e| e.location().and_then(|l| l.line).unwrap_or(usize::MAX));
    Err(FleetErrors { errors, warnings })
}

impl Fleet {
    /// The session specs, in file order.
    pub fn specs(&self) -> impl Iterator<Item = &SessionSpec> {
        self.sessions.iter().map(|s| &s.spec)
    }

    /// Give every capfleet-run agent (the simulator) a state directory inside the
    /// run's directory, unless the fleet file sets one: `once` crashes then happen
    /// once per run. Its emitted results go to a file there, unless the fleet names one.
    pub fn bind_run_dir(&mut self, run: &RunDir) {
        for s in &mut self.sessions {
            let launch = &mut s.spec.launch;
            if launch.program.is_none() {
                continue;
            }
            let dir = run.sim_state(&s.spec.name);
            let emitted = dir.join(capfleet_engine::chaos::EMITTED);
            for (key, value) in [(SIM_STATE_ENV, dir), (SIM_EMITTED_ENV, emitted)] {
                if !launch.env.iter().any(|(k, _)| k == key) {
                    launch.env.push((key.into(), value.display().to_string()));
                    // Inside the run's directory, hidden: written through its sandbox.
                    if let Some(sandbox) = launch.sandbox.as_mut().filter(|_| key == SIM_STATE_ENV)
                    {
                        sandbox.writable.push(value);
                    }
                }
            }
        }
    }
}
