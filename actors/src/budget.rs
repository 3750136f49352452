//! The budget actor (a [`crate::tap`]): aggregates `cap.usage` across the fleet, per
//! session and in total, tokens and USD. (Enforcing `budget_usd` — cancelling every
//! session past the cap and refusing turns with `cap_budget_exceeded` — arrives with
//! fleets, on this aggregate.)

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::CapEvent;
use crate::session::{EventBody, SessionEvent, UsageTotals};
use crate::tap::{Tap, TapHandler, TapMsg};

/// The budget actor.
pub type Budget = Tap<BudgetBook>;
/// Its messages.
pub type BudgetMsg = TapMsg<BudgetSnapshot>;

/// Usage by session and in total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetSnapshot {
    pub total: UsageTotals,
    pub by_session: BTreeMap<Arc<str>, UsageTotals>,
}

/// The budget's book-keeping.
#[derive(Debug, Default)]
pub struct BudgetBook {
    snap: BudgetSnapshot,
}

impl TapHandler for BudgetBook {
    type Snapshot = BudgetSnapshot;

    fn on_event(&mut self, event: &SessionEvent) {
        if let EventBody::Cap {
            event: CapEvent::Usage(u),
        } = &event.body
        {
            self.snap.total.add(u);
            self.snap
                .by_session
                .entry(event.urn.clone())
                .or_default()
                .add(u);
        }
    }

    fn snapshot(&self) -> BudgetSnapshot {
        self.snap.clone()
    }
}
