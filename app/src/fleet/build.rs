//! From a validated [`FleetFile`] to a runnable [`Fleet`]: the task read, every agent
//! resolved through the registry, paths made absolute (relative to the fleet file),
//! and one `SessionSpec` per session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::answerer::Policy;
use capfleet_engine::manifest::Manifest;
use capfleet_engine::router::{Picker, Route, RouteAction, RoutingSpec};
use capfleet_engine::session::DEFAULT_TURN_TIMEOUT;
use capfleet_engine::tomldoc::Location;
use capfleet_engine::workspace::repo;
use capfleet_wire::driver::spawns_process;
use capfleet_wire::events::JOURNAL_MAX_BYTES;
use capfleet_wire::process::sandbox::{self, SandboxSpec};
use capfleet_wire::supervision::RestartPolicy;
use capfleet_wire::supervision::rate_limit::RateLimitPolicy;

use super::config::{ActionEntry, At, AutoAnswer, FleetFile, HUMAN, SessionEntry, names_manifest};
use super::error::FleetError;
use super::{Budgets, Fleet, FleetSession, SPEAK_FLEET_ENV};
use crate::agents::{SessionRequest, registry, session_spec};
use crate::sandboxing::{Confinement, SandboxRule};

/// Where relative paths start and what the task override is.
pub(super) struct Context<'a> {
    /// The fleet file's directory.
    pub dir: &'a Path,
    /// The fleet file's name without extension (the default fleet name).
    pub stem: &'a str,
    /// `--task`, replacing `[fleet].task`.
    pub task: Option<&'a str>,
    /// Where sessions without a `cwd` work (default: the current directory).
    pub cwd: Option<&'a Path>,
    /// A fleet someone submitted to this host (`serve`, `worker`): the roots its
    /// sessions' own `cwd` must resolve inside (none: it names no `cwd`), and it
    /// signs its notices with a secret of its own (a `secret_file` it submitted,
    /// never a variable of this host).
    pub submitted: Option<&'a [PathBuf]>,
    /// A submitted fleet's confinement: each session that says nothing sandboxed,
    /// `sandbox = "none"` refused unless the rule allows it, the host's files hidden
    /// (none: the fleet's own user runs it, as written).
    pub confinement: Option<&'a Confinement>,
}

/// Build the fleet; every problem found is returned (agents are all resolved even
/// when one fails).
pub(super) async fn build(file: &FleetFile, cx: &Context<'_>) -> Result<Fleet, Vec<FleetError>> {
    let mut errors = Vec::new();
    let f = &file.fleet;
    let name = f
        .name
        .as_ref()
        .map_or_else(|| cx.stem.to_owned(), |n| n.value.clone());
    let task = read_task(f.task.as_ref(), &f.at, cx)
        .map_err(|e| errors.push(e))
        .ok();
    let turn_timeout = f
        .turn_timeout_s
        .as_ref()
        .and_then(|t| Duration::try_from_secs_f64(t.value).ok())
        .unwrap_or(DEFAULT_TURN_TIMEOUT);
    let mut manifests: HashMap<String, (Arc<Manifest>, String)> = HashMap::new();
    let defaults = RateLimitPolicy::default();
    let rate_limit = RateLimitPolicy {
        on: f.on_rate_limit,
        max_pause: f.max_pause.unwrap_or(defaults.max_pause),
        backoff: f.rate_limit_backoff.unwrap_or(defaults.backoff),
        ..defaults
    };
    if cx
        .confinement
        .is_some_and(|c| c.rule == SandboxRule::Workspace)
    {
        let said = f
            .sandbox
            .iter()
            .chain(file.sessions.iter().filter_map(|s| s.sandbox.as_ref()));
        errors.extend(
            said.filter(|a| !a.value)
                .map(|a| FleetError::Unsandboxed { at: a.at.clone() }),
        );
    }
    let mut sessions = Vec::new();
    for s in &file.sessions {
        match session(s, &name, turn_timeout, cx, &mut manifests).await {
            Ok(mut fs) => {
                fs.spec.rate_limit = rate_limit;
                let said = s.sandbox.as_ref().or(f.sandbox.as_ref()).map(|a| a.value);
                // Submitted: sandboxed unless it says "none" (an A2A peer has no
                // process here to confine).
                let confined = match cx.confinement {
                    None => said.unwrap_or(false),
                    Some(_) => said.unwrap_or_else(|| spawns_process(fs.spec.binding)),
                };
                if confined {
                    match confinement(s, file, &fs.spec.launch.env, cx.confinement) {
                        Ok(spec) => fs.spec.launch.sandbox = Some(spec),
                        Err(e) => errors.push(e),
                    }
                }
                sessions.push(fs);
            }
            Err(e) => errors.extend(e),
        }
    }
    if let Some(base) = &f.base {
        check_base(base, &sessions, &mut errors);
    }
    let research = match &file.answerer {
        Some(a) => super::answerer::build(a, f.auto_answer.value, &name, cx, &mut manifests)
            .await
            .map_err(|e| errors.extend(e))
            .ok(),
        None => None,
    };
    let notify = file
        .notify
        .as_ref()
        .and_then(|n| super::notify::build(n, cx).map_err(|e| errors.push(e)).ok());
    if !errors.is_empty() {
        return Err(errors);
    }
    let start = f
        .start
        .as_ref()
        .map(|s| s.value.clone())
        .unwrap_or_default();
    let answer_from = f
        .answer_from
        .as_ref()
        .map(|a| a.value.clone())
        .or_else(|| start.first().cloned())
        .unwrap_or_default();
    let routing = RoutingSpec {
        start,
        task: task.unwrap_or_default(),
        routes: file
            .routes
            .iter()
            .map(|r| route(&r.when.value, &r.action))
            .collect(),
        max_concurrent: f.max_concurrent.unwrap_or(0),
        queue: f.queue,
    };
    Ok(Fleet {
        name,
        file: PathBuf::new(),
        routing,
        sessions,
        answer_from,
        policy: Policy {
            deny_tools: f.deny_tools.clone(),
            allow_tools: f.allow_tools.clone(),
            deny_commands: f.deny_commands.clone(),
            allow_commands: f.allow_commands.clone(),
            max_risk: f.max_risk,
        },
        auto_answer: f.auto_answer.value != AutoAnswer::Off,
        research,
        budgets: Budgets {
            total_usd: f.budget_usd.as_ref().map(|b| b.value),
            per_session: file
                .sessions
                .iter()
                .filter_map(|s| Some((s.name.value.clone(), s.budget_usd.as_ref()?.value)))
                .collect(),
        },
        on_error: f.on_error,
        turn_timeout,
        rate_limit,
        base: f.base.as_ref().map(|b| b.value.clone()),
        journal_max_bytes: f
            .journal_max_mb
            .as_ref()
            .map_or(JOURNAL_MAX_BYTES, |mb| mb.value << 20),
        ask_timeout: f.ask_timeout,
        notify,
        chaos: file.chaos.clone().map(std::sync::Arc::new),
    })
}

/// `base` must name a commit in the repository of every coding session.
fn check_base(base: &At<String>, sessions: &[FleetSession], errors: &mut Vec<FleetError>) {
    let mut seen = std::collections::HashSet::new();
    for s in sessions.iter().filter(|s| s.coding) {
        let cwd = PathBuf::from(&s.spec.launch.config.cwd);
        if !seen.insert(cwd.clone()) {
            continue;
        }
        let reason = match repo::resolve_base(&cwd, Some(&base.value)) {
            Ok(Some(_)) => continue,
            Ok(None) => format!(
                "base {:?} is set, but session `{}` works in {}, which is not in a git repository",
                base.value,
                s.spec.name,
                cwd.display()
            ),
            Err(e) => format!("base {:?}: {e}", base.value),
        };
        errors.push(FleetError::InvalidValue {
            at: base.at.clone(),
            reason,
        });
        return;
    }
}

/// The task text: `--task` over `[fleet].task`; `@path` reads a file (relative to
/// the fleet file, or for `--task` to the current directory).
fn read_task(
    task: Option<&At<String>>,
    fleet_at: &Location,
    cx: &Context<'_>,
) -> Result<String, FleetError> {
    let (text, base, at) = match (cx.task, task) {
        (Some(t), _) => (t.to_owned(), Path::new("."), None),
        (None, Some(t)) => (t.value.clone(), cx.dir, Some(&t.at)),
        (None, None) => {
            let at = Location {
                key: "fleet.task".into(),
                ..fleet_at.clone()
            };
            return Err(FleetError::Missing { at });
        }
    };
    let at = at.cloned().unwrap_or_else(|| Location {
        origin: "--task".into(),
        line: None,
        key: String::new(),
    });
    let text = match text.strip_prefix('@') {
        Some(file) => {
            let path = base.join(file);
            std::fs::read_to_string(&path).map_err(|source| FleetError::File {
                at: at.clone(),
                path,
                source,
            })?
        }
        None => text,
    };
    if text.trim().is_empty() {
        return Err(FleetError::InvalidValue {
            at,
            reason: "the task is empty".into(),
        });
    }
    Ok(text)
}

/// A path relative to the fleet file, made absolute (it must exist).
fn existing(p: &At<String>, cx: &Context<'_>) -> Result<PathBuf, FleetError> {
    let path = cx.dir.join(&p.value);
    std::fs::canonicalize(&path).map_err(|source| FleetError::File {
        at: p.at.clone(),
        path,
        source,
    })
}

/// A submitted fleet's session `cwd` (resolved, symlinks and all): a directory
/// inside one of the roots this host allows.
fn confined(dir: PathBuf, p: &At<String>, cx: &Context<'_>) -> Result<PathBuf, FleetError> {
    let Some(roots) = cx.submitted else {
        return Ok(dir);
    };
    let refuse = |reason: &str| FleetError::InvalidValue {
        at: p.at.clone(),
        reason: format!("`cwd` {:?}: {reason}", p.value),
    };
    if roots.is_empty() {
        return Err(refuse(
            "this server takes no cwd (start it with --allow-root DIR)",
        ));
    }
    if !dir.is_dir() {
        return Err(refuse("not a directory"));
    }
    if !roots.iter().any(|r| dir.starts_with(r)) {
        return Err(refuse(
            "not inside a root this server allows (--allow-root)",
        ));
    }
    Ok(dir)
}

pub(super) async fn session(
    s: &SessionEntry,
    fleet: &str,
    turn_timeout: Duration,
    cx: &Context<'_>,
    manifests: &mut HashMap<String, (Arc<Manifest>, String)>,
) -> Result<FleetSession, Vec<FleetError>> {
    let mut errors = Vec::new();
    let agent = &s.agent.value;
    let key = if names_manifest(agent) {
        cx.dir.join(agent).display().to_string()
    } else {
        agent.clone()
    };
    if !manifests.contains_key(&key) {
        match registry().resolve(&key).await {
            Ok(r) => {
                manifests.insert(key.clone(), (Arc::new(r.manifest), r.source.to_string()));
            }
            Err(e) => errors.push(FleetError::UnknownAgent {
                at: s.agent.at.clone(),
                agent: agent.clone(),
                reason: e.to_string(),
            }),
        }
    }
    let cwd = match (&s.cwd, cx.cwd) {
        (Some(c), _) => existing(c, cx)
            .and_then(|dir| confined(dir, c, cx))
            .map_err(|e| errors.push(e))
            .ok(),
        (None, Some(dir)) => Some(dir.to_owned()),
        (None, None) => std::env::current_dir()
            .map_err(|source| {
                errors.push(FleetError::File {
                    at: s.at.clone(),
                    path: PathBuf::from("."),
                    source,
                })
            })
            .ok(),
    };
    let script = s
        .script
        .as_ref()
        .and_then(|p| existing(p, cx).map_err(|e| errors.push(e)).ok());
    let mut env = s.env.clone();
    if let Some(inner) = s
        .fleet
        .as_ref()
        .and_then(|p| existing(p, cx).map_err(|e| errors.push(e)).ok())
    {
        env.push((SPEAK_FLEET_ENV.to_owned(), inner.display().to_string()));
    }
    let (Some((manifest, source)), Some(cwd), true) =
        (manifests.get(&key).cloned(), cwd, errors.is_empty())
    else {
        return Err(errors);
    };
    // max_turns and budget_usd are enforced by capfleet (session, budget actor),
    // not asked of the agent.
    let mut spec = session_spec(SessionRequest {
        fleet,
        name: s.name.value.clone(),
        manifest,
        cwd: &cwd,
        model: s.model.clone(),
        system_prompt: s.system_prompt.clone(),
        permission_mode: s.permission_mode,
        argv: s.argv.clone(),
        env,
        script: script.as_deref(),
    });
    let defaults = RestartPolicy::default();
    spec.policy = RestartPolicy {
        restart: s.restart.unwrap_or(defaults.restart),
        max_restarts: s.max_restarts.unwrap_or(defaults.max_restarts),
        window: s
            .restart_window_s
            .as_ref()
            .and_then(|w| Duration::try_from_secs_f64(w.value).ok())
            .unwrap_or(defaults.window),
        ..defaults
    };
    spec.turn_timeout = turn_timeout;
    spec.max_turns = s.max_turns;
    spec.launch.raw_bytes = s.raw_bytes;
    Ok(FleetSession {
        coding: spec.launch.manifest.claims_coding(),
        spec,
        agent: agent.clone(),
        source,
        budget_usd: s.budget_usd.as_ref().map(|b| b.value),
        paths: s.paths.clone(),
        test_command: s.test_command.clone(),
    })
}

/// The sandbox of a session under `sandbox = "workspace"`, refused (before anything
/// spawns) on a host with no backend for it. A submitted fleet's hides the host's
/// files too; its backend is the business of the host that runs it
/// (`crate::submission`: a server that validates a run for NATS workers may have none).
fn confinement(
    s: &SessionEntry,
    file: &FleetFile,
    env: &[(String, String)],
    submitted: Option<&Confinement>,
) -> Result<SandboxSpec, FleetError> {
    let mut spec = file.sandbox.clone().unwrap_or_default();
    crate::sandboxing::complete(&mut spec, env);
    if let Some(c) = submitted {
        spec.hidden.extend(c.hidden.iter().cloned());
        return Ok(spec);
    }
    match sandbox::availability().choose(spec.backend) {
        Ok(_) => Ok(spec),
        Err(e) => Err(FleetError::InvalidValue {
            at: s.at.clone(),
            reason: format!(
                "session {:?} asks for sandbox = \"workspace\" and this host cannot give it: {e} \
                 (install bubblewrap, or run on a kernel with Landlock; or set sandbox = \"none\")",
                s.name.value
            ),
        }),
    }
}

fn route(when: &[String], action: &ActionEntry) -> Route {
    let action = match action {
        ActionEntry::To(to) => RouteAction::To(to.value.clone()),
        ActionEntry::FanOut { to, split } => RouteAction::FanOut {
            to: to.value.clone(),
            split: *split,
        },
        ActionEntry::Collect { picker, mode } => RouteAction::Collect {
            picker: if picker.value == HUMAN {
                Picker::Human
            } else {
                Picker::Session(picker.value.clone())
            },
            mode: *mode,
        },
    };
    Route {
        when: when.to_vec(),
        action,
    }
}
