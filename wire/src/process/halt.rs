//! How urgently this process's agents are being ended: what a stop signal changes
//! in every agent's end at once.
//!
//! An agent ended deliberately is told first (its input closed, `session/close`) and
//! given time to exit by itself, then its group gets `SIGTERM`, a grace, `SIGKILL`
//! ([`super::ProcessGroup::kill`]). Each driver does this in its own actor, so a
//! hundred agents end in parallel; but a driver is busy while it waits, and a signal
//! must reach the waits already under way. So the urgency is one value for the whole
//! process (signals are process-wide too), read by every wait:
//!
//! - [`Urgency::Normal`]: the waits above, in full.
//! - [`Urgency::Halt`] (`SIGTERM`, `SIGHUP`): no agent is waited for after being told;
//!   its group is killed at once (`SIGTERM`, the grace, `SIGKILL`).
//! - [`Urgency::Force`] (a second signal): the grace is cut short: `SIGKILL` now.
//!
//! The urgency only rises; it is the application's answer to a signal, for the rest
//! of the process's life.

use std::sync::LazyLock;

use tokio::sync::watch;

/// How urgently agents are being ended (ordered: each level implies the ones before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Urgency {
    #[default]
    Normal,
    /// Kill every agent's group without waiting for it to exit by itself.
    Halt,
    /// `SIGKILL` every agent's group now, whatever grace was left.
    Force,
}

static URGENCY: LazyLock<watch::Sender<Urgency>> =
    LazyLock::new(|| watch::Sender::new(Urgency::Normal));

/// Raise the urgency to `to` (never lowers it).
pub fn escalate(to: Urgency) {
    URGENCY.send_if_modified(|now| {
        let raised = to > *now;
        if raised {
            *now = to;
        }
        raised
    });
}

/// The urgency now.
pub(crate) fn current() -> Urgency {
    *URGENCY.borrow()
}

/// Resolves once the urgency is at least `level` (at once if it already is).
pub(crate) async fn reached(level: Urgency) {
    let mut rx = URGENCY.subscribe();
    // The sender is a static: it is never dropped, so `wait_for` only ends on the level.
    let _level = rx.wait_for(|now| *now >= level).await;
}
