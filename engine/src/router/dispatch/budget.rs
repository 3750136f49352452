//! The budget's verdicts in the router: a crossing of the fleet's limit stops the run
//! (`budget_exceeded`), a session's crossing of its own stops that session (its
//! deliveries refused from then on) and the run ends `budget_exceeded` too. Each
//! crossing is recorded once (`budget_exceeded` record), whether it arrived as an
//! alert mid-turn or was read from the settled budget before a turn starts or after
//! one ends — so no turn starts past a limit and no run that crossed one ends
//! `completed`, however the crossing raced the run's end. A budget that does not answer
//! (it died) stops the run `tree_failed`.

use super::Core;
use crate::budget::{BudgetScope, Crossing};
use crate::protocol::CancelScope;
use crate::session::SessionMsg;
use crate::tap::TapMsg;
use capfleet_wire::events::{EventBody, RunOutcome};

impl Core {
    /// A router's message begins: the budget is settled again at its first need.
    pub(in crate::router) fn next_message(&mut self) {
        self.settled = false;
    }

    /// Act on every crossing the budget has seen so far (what sessions published
    /// before this call is included: the budget's snapshots are settled). Once per
    /// router message: what any turn the message takes spent was published before
    /// its end reached the router, so before the message (a message that takes a
    /// thousand ends, a resumed run's replay, reads the budget once).
    pub(in crate::router) async fn settle_budget(&mut self) {
        let Some(budget) = self.budget.clone() else {
            return;
        };
        if self.settled {
            return;
        }
        match ractor::call!(budget, TapMsg::Snapshot) {
            Ok(snap) => {
                self.settled = true;
                for c in &snap.crossings {
                    self.on_crossing(c, snap.overshoot(c)).await;
                }
            }
            // Fail closed: no turn spends without a budget that sees it.
            Err(e) => {
                let reason = format!("the budget is not answering ({e}): no turn may spend");
                self.stop(RunOutcome::TreeFailed, &reason, None).await;
            }
        }
    }

    /// Act on crossing `c` (once per limit): record it, then stop the run or the
    /// session.
    pub(in crate::router) async fn on_crossing(&mut self, c: &Crossing, overshoot_usd: f64) {
        if !self.budget_acted.insert(c.scope.clone()) {
            return;
        }
        let scope = match &c.scope {
            BudgetScope::Fleet => "fleet".to_owned(),
            BudgetScope::Session(urn) => urn.to_string(),
        };
        self.record(EventBody::BudgetExceeded {
            scope,
            limit_usd: c.limit_usd,
            spent_usd: c.spent_usd,
            overshoot_usd,
            urn: c.urn.to_string(),
            turn: c.turn,
        })
        .await;
        let reason = c.reason();
        match &c.scope {
            BudgetScope::Fleet => self.stop(RunOutcome::BudgetExceeded, &reason, None).await,
            BudgetScope::Session(urn) => {
                tracing::warn!(%urn, "session budget exceeded; stopping the session");
                self.session_over_budget = true;
                let name = urn.rsplit('/').next().unwrap_or(urn);
                if let Some(slot) = self.slots.get_mut(name) {
                    slot.over_budget = true;
                    slot.queue.clear();
                    slot.cast(SessionMsg::Cancel {
                        scope: CancelScope::Session,
                        reason,
                    });
                }
            }
        }
    }
}
