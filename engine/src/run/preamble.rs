//! What a run settles before its task goes out, and journals first: each session's
//! sandbox, resolved once before anything of the run spawns (a session that asked
//! for one and cannot have it refuses the run: it never starts unconfined), and a
//! resumed run's sessions kept in the sandbox their journal holds; then the
//! `session` records (each with its sandbox) and the `worktree` records.

use std::collections::BTreeMap;

use capfleet_wire::events::EventBody;
use capfleet_wire::process::sandbox::Sandbox;

use super::WorkspacePhase;
use crate::error::TreeError;
use crate::resume::Sandboxes;
use crate::session::SessionSpec;

/// A resumed run's sessions go on in the sandbox their `session` records journaled,
/// whatever the fleet says now (a server's forced sandbox is not in the fleet file;
/// a fleet edited since cannot lower it). A session journaled without one keeps the
/// fleet's choice.
///
/// The journaled paths are the journaling host's. A session that works where it was
/// journaled working (the same workspace, reused) keeps them all. One that works
/// elsewhere now — a NATS worker's takeover of a dead worker's run, its workspaces
/// provisioned afresh here — keeps what the sandbox was (confined, its network, its
/// backend) with this host's paths, resolved from the fleet's spec: the dead
/// worker's workspace, temporary directory and run directory are not this run's, and
/// are neither made writable nor created here. Their names come back: what they run
/// in is journaled in the `resumed` record ([`anew`]).
pub(super) fn keep_journaled(sessions: &mut [SessionSpec], journaled: &Sandboxes) -> Vec<String> {
    let mut moved = Vec::new();
    for s in sessions {
        let Some(sandbox) = journaled.get(&s.name) else {
            continue;
        };
        let here = std::fs::canonicalize(&s.launch.config.cwd).ok();
        if here.as_deref() == Some(sandbox.workspace.as_path()) {
            s.launch.sandbox = Some(sandbox.as_spec());
            continue;
        }
        let mut spec = s.launch.sandbox.take().unwrap_or_default();
        spec.network = sandbox.network;
        spec.backend = sandbox.as_spec().backend;
        s.launch.sandbox = Some(spec);
        moved.push(s.name.clone());
    }
    moved
}

/// The sandboxes of the sessions `moved` (resolved anew for this host), by name.
pub(super) fn anew(moved: &[String], sandboxes: &Sandboxes) -> BTreeMap<String, Sandbox> {
    moved
        .iter()
        .filter_map(|name| sandboxes.get(name).map(|sb| (name.clone(), sb.clone())))
        .collect()
}

/// Each confined session's sandbox, resolved for its workspace and tried once for
/// its program (the missing state paths made, the backend's arguments or ruleset
/// built): the first that cannot be had is the run's error, before anything spawns.
pub(super) fn sandboxes(sessions: &[SessionSpec]) -> Result<Sandboxes, TreeError> {
    let mut out = Sandboxes::new();
    for s in sessions {
        let refused = |reason: String| TreeError::Sandbox {
            urn: s.urn().to_owned(),
            reason,
        };
        let Some(sandbox) = s
            .launch
            .resolved_sandbox()
            .map_err(|e| refused(e.to_string()))?
        else {
            continue;
        };
        let tried = sandbox.confine(&s.launch.program());
        tried.map_err(|e| refused(e.to_string()))?;
        out.insert(s.name.clone(), sandbox);
    }
    Ok(out)
}

/// What the journal holds of the run before its task goes out: each session as it is
/// started (with its sandbox), each workspace as it was provisioned.
pub(super) fn records(
    sessions: &[SessionSpec],
    phase: Option<&WorkspacePhase>,
    sandboxes: &Sandboxes,
) -> Vec<EventBody> {
    let started = sessions.iter().map(|s| EventBody::Session {
        name: s.name.clone(),
        agent: s.launch.manifest.agent.name.clone(),
        binding: s.binding.as_str().to_owned(),
        cwd: Some(s.launch.config.cwd.clone()).filter(|c| !c.is_empty()),
        sandbox: sandboxes.get(&s.name).cloned().map(Box::new),
    });
    let workspaces = phase
        .into_iter()
        .flat_map(|p| &p.workspaces)
        .map(|w| EventBody::Worktree {
            session: w.session.clone(),
            path: w.path.display().to_string(),
            branch: w.branch().map(str::to_owned),
            base: w.base().map(str::to_owned),
        });
    started.chain(workspaces).collect()
}
