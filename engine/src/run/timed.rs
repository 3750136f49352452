//! The run's timed faults (per-minute rates, `at` schedules): one task of the run
//! that sleeps until each fault of the [`Timeline`] is due and sends it to its target
//! session (which journals and applies it), or, for `self_kill`, has the router
//! journal it (synced) and then `SIGKILL`s capfleet itself. A resumed run's timeline
//! goes on after the journal's last `self_kill`, its clock starting at that moment,
//! and stops killing after `max_self_kills` in all: a run is never killed at the same
//! point forever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::Instant;
use tracing::Instrument;

use crate::chaos::schedule::Timeline;
use crate::chaos::spec::ChaosSpec;
use crate::resume::SelfKills;
use crate::router::RouterMsg;
use crate::session::SessionMsg;
use capfleet_wire::chaos::FaultKind;
use capfleet_wire::registry::Binding;

/// How long the router may take to journal and sync a `self_kill` record.
const SELF_KILL_SYNC: Duration = Duration::from_secs(5);

/// The run's sessions that are up, by name (sessions come up while the run goes).
pub(crate) type Targets = Arc<Mutex<HashMap<String, ActorRef<SessionMsg>>>>;

/// `name` is up as `actor`: its faults reach it from now on.
pub(crate) fn came_up(up: &Targets, name: &str, actor: &ActorRef<SessionMsg>) {
    up.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_owned(), actor.clone());
}

/// Drive the timed faults of `spec` over the run's sessions `names` until the
/// timeline ends (or the task is aborted with the run); a fault due for a session
/// not in `up` yet is not sent. `done`: the `self_kill`s of the run so far (resumed).
pub(crate) async fn drive(
    spec: Arc<ChaosSpec>,
    names: Vec<(String, Binding)>,
    up: Targets,
    router: ActorRef<RouterMsg>,
    done: SelfKills,
) {
    let timeline = Timeline::new(&spec, &names);
    let (timeline, base) = match done.last_seed_pos {
        Some(pos) => timeline.skip_through(pos),
        None => (timeline, Duration::ZERO),
    };
    let start = Instant::now();
    let mut kills = done.count;
    for t in timeline {
        tokio::time::sleep_until(start + t.at.saturating_sub(base)).await;
        if t.kind == FaultKind::SelfKill {
            if kills >= spec.max_self_kills {
                continue;
            }
            kills += 1;
            self_kill(&router, t.seed_pos).await;
            continue;
        }
        let Some(target) = t.target else { continue };
        let session = up
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&target)
            .cloned();
        if let Some(session) = session {
            let _gone = session.cast(SessionMsg::Chaos {
                fault: t.kind,
                seed_pos: t.seed_pos,
            });
        }
    }
}

/// Journal the `self_kill` (synced), then `SIGKILL` this process: no cleanup runs,
/// as in a crash; the keeper kills the agents' groups.
async fn self_kill(router: &ActorRef<RouterMsg>, seed_pos: u64) {
    let pid = std::process::id();
    let detail = format!("SIGKILL to capfleet (pid {pid})");
    // Its span is lost with the process unless exported before the kill: the
    // journal's record is the one that lasts.
    let span = tracing::info_span!(
        "chaos",
        otel.name = "chaos self_kill",
        cap.chaos.fault = "self_kill",
        cap.chaos.target = capfleet_wire::chaos::SELF_TARGET,
        cap.chaos.seed_pos = capfleet_wire::events::trace::int(seed_pos),
        cap.chaos.detail = %detail,
    );
    span.in_scope(|| tracing::warn!(seed_pos, "chaos: capfleet kills itself"));
    let journaled = router
        .call(
            |reply| RouterMsg::SelfKill {
                seed_pos,
                detail,
                reply,
            },
            Some(SELF_KILL_SYNC),
        )
        .instrument(span)
        .await;
    if !matches!(journaled, Ok(ractor::rpc::CallResult::Success(()))) {
        tracing::error!(seed_pos, "the self_kill was not journaled; not killing");
        return;
    }
    // SAFETY: kill(2) on our own pid; SIGKILL ends the process here.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}
