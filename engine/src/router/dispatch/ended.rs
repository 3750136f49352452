//! A turn that did not complete, as the router takes it. Most are failures (the run
//! goes on, or stops under `on_error = "abort"`; a plan entry's is blocked), but some
//! are the run's own doing and no failure: a race candidate the router cancelled
//! after another won, a session its own budget stopped, and a route's text refused
//! by a session past its `max_turns` — the exit a route cycle must have (fleet
//! validation asks for it): the cycle ended.

use super::{Core, Origin};
use crate::protocol::PlanStatus;
use crate::session::{SessionError, TurnResult};
use capfleet_wire::events::{RunOutcome, TurnOutcome};

impl Core {
    /// The turn `session` ran for `origin` ended without completing (`result`);
    /// `lost_race`: the router cancelled it, another candidate having won.
    pub(super) async fn not_completed(
        &mut self,
        session: &str,
        origin: Origin,
        result: Result<TurnResult, SessionError>,
        lost_race: bool,
    ) {
        let over_budget = self.slots.get(session).is_some_and(|s| s.over_budget);
        match result {
            Ok(r) if r.outcome == TurnOutcome::Cancelled && lost_race => {
                tracing::debug!(%session, "race candidate cancelled after another won");
            }
            // Its own budget stopped it: recorded as such, no failure.
            Ok(_) | Err(_) if over_budget => {
                tracing::debug!(%session, "session stopped by its budget");
            }
            Ok(r) => {
                self.failed_turn(session, origin, format!("turn ended {:?}", r.outcome))
                    .await
            }
            Err(SessionError::MaxTurns { max }) if matches!(origin, Origin::Route) => {
                tracing::debug!(%session, max, "route cycle ended at max_turns");
            }
            Err(e) => {
                if let Some(slot) = self.slots.get_mut(session) {
                    slot.failed = matches!(e, SessionError::Failed { .. } | SessionError::Closed);
                }
                self.failed_turn(session, origin, e.to_string()).await;
            }
        }
    }

    async fn failed_turn(&mut self, session: &str, origin: Origin, reason: String) {
        tracing::warn!(%session, %reason, "turn did not complete");
        self.any_failed = true;
        if let Origin::Plan(i) = origin {
            self.set_plan(i, PlanStatus::Blocked).await;
        }
        if self.abort_on_error && self.stopped.is_none() {
            self.stop(RunOutcome::SessionFailed, "on_error = abort", None)
                .await;
        }
    }
}
