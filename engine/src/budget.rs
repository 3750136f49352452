//! The budget actor (a [`crate::tap`]): aggregates `cap.usage` across the fleet, per
//! session and in total, tokens and USD, and records a [`Crossing`] — once per limit —
//! when the fleet's `budget_usd` or a session's own budget is crossed: which session's
//! usage of which turn crossed it, at what spend. Each crossing is sent as an alert
//! (whoever runs the fleet stops the run or the session at once, mid-turn) and kept in
//! the snapshot, which is settled ([`crate::tap`]): the router reads it before any turn
//! starts and before the run ends, so a crossing decides the run whichever turn made it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::protocol::CapEvent;
use crate::tap::{Tap, TapHandler, TapMsg};
use capfleet_wire::events::{EventBody, SessionEvent, UsageTotals};

/// The budget actor.
pub(crate) type Budget = Tap<BudgetBook>;
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
    /// Every limit crossed, in the order they were.
    pub crossings: Vec<Crossing>,
}

impl BudgetSnapshot {
    /// The fleet's crossing, if its limit was crossed.
    pub fn fleet_crossing(&self) -> Option<&Crossing> {
        self.crossings
            .iter()
            .find(|c| c.scope == BudgetScope::Fleet)
    }

    /// Session `urn`'s crossing of its own limit, if it did.
    pub fn session_crossing(&self, urn: &str) -> Option<&Crossing> {
        self.crossings
            .iter()
            .find(|c| matches!(&c.scope, BudgetScope::Session(u) if &**u == urn))
    }

    /// Spent so far against `c`'s limit: the fleet's total or the session's.
    pub fn spent_against(&self, c: &Crossing) -> f64 {
        match &c.scope {
            BudgetScope::Fleet => self.total.cost_usd,
            BudgetScope::Session(urn) => self.by_session.get(urn).map_or(0.0, |u| u.cost_usd),
        }
    }

    /// Spent beyond `c`'s limit (0 when none).
    pub fn overshoot(&self, c: &Crossing) -> f64 {
        (self.spent_against(c) - c.limit_usd).max(0.0)
    }
}

/// Limits in USD: the fleet's, and per session URN.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetLimits {
    pub total_usd: Option<f64>,
    pub per_session_usd: HashMap<Arc<str>, f64>,
}

/// Whose limit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BudgetScope {
    /// The fleet's `budget_usd`.
    Fleet,
    /// A session's own budget (its URN).
    Session(Arc<str>),
}

/// A limit was crossed: by the usage session `urn` reported in `turn` (the turn in
/// flight), which brought the spend against the limit to `spent_usd`.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    pub scope: BudgetScope,
    pub limit_usd: f64,
    pub spent_usd: f64,
    pub urn: Arc<str>,
    pub turn: Option<u32>,
}

impl Crossing {
    /// `cap_budget_exceeded: $S spent, budget $L (session s, turn N)`.
    pub fn reason(&self) -> String {
        let whose = match &self.scope {
            BudgetScope::Fleet => "budget",
            BudgetScope::Session(_) => "session budget",
        };
        let turn = self
            .turn
            .map_or_else(String::new, |t| format!(", turn {t}"));
        format!(
            "cap_budget_exceeded: ${:.4} spent, {whose} ${:.4} (crossed by {}{turn})",
            self.spent_usd, self.limit_usd, self.urn
        )
    }
}

/// The budget's book-keeping.
#[derive(Debug, Default)]
pub struct BudgetBook {
    snap: BudgetSnapshot,
    limits: BudgetLimits,
    alerts: Option<mpsc::Sender<Crossing>>,
}

impl BudgetBook {
    /// A book that alerts on `alerts` when a limit is crossed.
    pub(crate) fn with_limits(limits: BudgetLimits, alerts: mpsc::Sender<Crossing>) -> Self {
        BudgetBook {
            snap: BudgetSnapshot {
                limit_usd: limits.total_usd,
                ..BudgetSnapshot::default()
            },
            limits,
            alerts: Some(alerts),
        }
    }

    fn cross(&mut self, crossing: Crossing) {
        self.snap.crossings.push(crossing.clone());
        if let Some(tx) = &self.alerts
            && tx.try_send(crossing).is_err()
        {
            // The snapshot keeps the crossing: the router still acts on it.
            tracing::warn!("budget alert could not be delivered at once");
        }
    }
}

impl TapHandler for BudgetBook {
    type Snapshot = BudgetSnapshot;

    fn on_event(&mut self, event: &SessionEvent) {
        let EventBody::Cap {
            event: CapEvent::Usage(u),
        } = &event.body
        else {
            return;
        };
        self.snap.total.add(u);
        let session = self.snap.by_session.entry(event.urn.clone()).or_default();
        session.add(u);
        let session_spent = session.cost_usd;
        let crossing = |scope, limit_usd, spent_usd| Crossing {
            scope,
            limit_usd,
            spent_usd,
            urn: event.urn.clone(),
            turn: event.turn,
        };
        if let Some(&limit) = self.limits.per_session_usd.get(&event.urn)
            && session_spent > limit
            && self.snap.session_crossing(&event.urn).is_none()
        {
            let scope = BudgetScope::Session(event.urn.clone());
            self.cross(crossing(scope, limit, session_spent));
        }
        let spent = self.snap.total.cost_usd;
        if let Some(limit) = self.limits.total_usd
            && spent > limit
            && !self.snap.exceeded
        {
            self.snap.exceeded = true;
            self.cross(crossing(BudgetScope::Fleet, limit, spent));
        }
    }

    fn snapshot(&self) -> BudgetSnapshot {
        self.snap.clone()
    }
}
