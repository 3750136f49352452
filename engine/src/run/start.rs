//! A run's sessions, started while its router already goes: one after another in
//! the fleet's order, a few at a time. The router does not wait for them all (a
//! fleet of 1,000 sessions is 1,000 agents to start): each is announced to it as it
//! is up ([`RouterMsg::SessionUp`]), and a delivery to one not up yet waits for it.
//! Starting agents is what costs (a process each, its start-up); all at once they
//! would starve the first ones, so at most [`STARTING_MAX`] are starting at a time:
//! a session counts until its state leaves `starting` (ready, or failed), for at
//! most [`STARTING_HOLD`] (an agent slow to be ready holds the others back no longer).

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

use crate::error::TreeError;
use crate::root::Spawner;
use crate::router::RouterMsg;
use crate::session::SessionSpec;
use capfleet_wire::events::{EventBody, Published, SessionState};

/// Sessions starting at once, at most.
pub(super) const STARTING_MAX: usize = 8;
/// How long a session counts as starting, at most.
pub(super) const STARTING_HOLD: Duration = Duration::from_secs(1);

/// Each session's subscribers besides the run's watchers (its transcript), made as
/// it is started.
pub(super) type Subscribers = Box<dyn FnMut(&SessionSpec) -> Vec<mpsc::Sender<Published>> + Send>;

/// Start `sessions` under the tree of `spawner`, announcing each to `router` (and
/// adding it to `up`, the chaos run's targets), until
/// all are up or `stop` turns true; then tell the router no more come up. The
/// error of the first that could not be spawned (the rest are not started).
pub(super) fn start_sessions(
    spawner: Spawner,
    router: ActorRef<RouterMsg>,
    sessions: Vec<SessionSpec>,
    mut subscribers: Subscribers,
    up: Option<super::timed::Targets>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<Result<(), TreeError>> {
    tokio::spawn(async move {
        let starting = Arc::new(Semaphore::new(STARTING_MAX));
        let mut outcome = Ok(());
        for spec in sessions {
            let permit = tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                permit = starting.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_closed) => break,
                },
            };
            let mut subs = subscribers(&spec);
            let (started_tx, started) = mpsc::channel(STARTING_EVENTS);
            subs.push(started_tx);
            let name = spec.name.clone();
            match spawner.spawn(spec, subs).await {
                Ok(actor) => {
                    if let Some(up) = &up {
                        super::timed::came_up(up, &name, &actor);
                    }
                    let _router_gone = router.cast(RouterMsg::SessionUp { name, actor });
                    tokio::spawn(release_when_started(started, permit));
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        let _router_gone = router.cast(RouterMsg::NoMoreSessions);
        outcome
    })
}

/// Events a starting session may publish before the watch reads them.
const STARTING_EVENTS: usize = 8;

/// Hold `permit` until the session's state leaves `starting` (or it is gone), at
/// most [`STARTING_HOLD`]. Dropping `events` then unsubscribes the watch.
async fn release_when_started(mut events: mpsc::Receiver<Published>, permit: OwnedSemaphorePermit) {
    let started = async {
        while let Some(e) = events.recv().await {
            if let EventBody::State { to, .. } = &e.body
                && *to != SessionState::Starting
            {
                return;
            }
        }
    };
    let _held_until_then = tokio::time::timeout(STARTING_HOLD, started).await;
    drop(permit);
}
