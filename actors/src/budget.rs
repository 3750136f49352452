//! The budget actor (a [`crate::tap`]): aggregates `cap.usage` across the fleet, per
//! session and in total, tokens and USD, and raises an alert — once per limit — when
//! the fleet's `budget_usd` or a session's own budget is crossed. Whoever runs the
//! fleet acts on the alert (the run stops every session: `cap_budget_exceeded`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::events::{EventBody, SessionEvent, UsageTotals};
use crate::protocol::CapEvent;
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
    /// The fleet's limit, if any.
    pub limit_usd: Option<f64>,
    /// The fleet's limit was crossed.
    pub exceeded: bool,
}

/// Limits in USD: the fleet's, and per session URN.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetLimits {
    pub total_usd: Option<f64>,
    pub per_session_usd: HashMap<Arc<str>, f64>,
}

/// A limit was crossed.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetAlert {
    Total {
        spent: f64,
        limit: f64,
    },
    Session {
        urn: Arc<str>,
        spent: f64,
        limit: f64,
    },
}

/// The budget's book-keeping.
#[derive(Debug, Default)]
pub struct BudgetBook {
    snap: BudgetSnapshot,
    limits: BudgetLimits,
    alerts: Option<mpsc::Sender<BudgetAlert>>,
    alerted: HashSet<Arc<str>>,
}

impl BudgetBook {
    /// A book that alerts on `alerts` when a limit is crossed.
    pub fn with_limits(limits: BudgetLimits, alerts: mpsc::Sender<BudgetAlert>) -> Self {
        BudgetBook {
            snap: BudgetSnapshot {
                limit_usd: limits.total_usd,
                ..BudgetSnapshot::default()
            },
            limits,
            alerts: Some(alerts),
            alerted: HashSet::new(),
        }
    }

    fn alert(&mut self, alert: BudgetAlert) {
        if let Some(tx) = &self.alerts
            && tx.try_send(alert).is_err()
        {
            // Alerts are one per limit: a full channel means the watcher is gone or stuck.
            tracing::error!("budget alert could not be delivered");
        }
    }
}

impl TapHandler for BudgetBook {
    type Snapshot = BudgetSnapshot;

    fn on_event(&mut self, event: &SessionEvent) {
        if let EventBody::Cap {
            event: CapEvent::Usage(u),
        } = &event.body
        {
            self.snap.total.add(u);
            let session = self.snap.by_session.entry(event.urn.clone()).or_default();
            session.add(u);
            let session_spent = session.cost_usd;
            if let Some(&limit) = self.limits.per_session_usd.get(&event.urn)
                && session_spent > limit
                && self.alerted.insert(event.urn.clone())
            {
                let urn = event.urn.clone();
                self.alert(BudgetAlert::Session {
                    urn,
                    spent: session_spent,
                    limit,
                });
            }
            let spent = self.snap.total.cost_usd;
            if let Some(limit) = self.limits.total_usd
                && spent > limit
                && !self.snap.exceeded
            {
                self.snap.exceeded = true;
                self.alert(BudgetAlert::Total { spent, limit });
            }
        }
    }

    fn snapshot(&self) -> BudgetSnapshot {
        self.snap.clone()
    }
}
