//! The master plan, as the router keeps it: adopted from the first plan a turn
//! carries (checked against the fleet's sessions), each entry's status journaled as it
//! moves, and the entries whose dependencies are done handed to their sessions.

use std::collections::HashSet;

use super::super::plan::MasterPlan;
use super::{Core, Delivery, Origin};
use crate::protocol::{CapEvent, PlanEntry, PlanStatus};
use crate::session::TurnResult;
use capfleet_wire::events::{EventBody, RouteVia};

impl Core {
    /// The adopted master plan, statuses as they stand.
    pub(crate) fn master_plan(&self) -> Option<Vec<PlanEntry>> {
        self.plan.as_ref().map(MasterPlan::entries)
    }

    pub(super) async fn adopt_plan(&mut self, r: &TurnResult) {
        if self.plan.is_some() {
            return;
        }
        let Some(entries) = r.events.iter().rev().find_map(|e| match e {
            CapEvent::Plan(p) => Some(p.entries.clone()),
            _ => None,
        }) else {
            return;
        };
        let names: HashSet<String> = self.slots.keys().cloned().collect();
        match MasterPlan::from_entries(&entries, &names) {
            Ok(Some(plan)) => {
                for t in &plan.tasks {
                    let body = EventBody::PlanEntry {
                        id: t.id.clone(),
                        assigned_to: t.assigned_to.clone(),
                        status: t.status,
                    };
                    self.record(body).await;
                }
                self.plan = Some(plan);
                self.plan_arrived = self.arrivals;
            }
            Ok(None) => {}
            Err(e) => {
                self.any_failed = true;
                self.record(EventBody::RouteFailed {
                    route: None,
                    reason: format!("master plan rejected: {e}"),
                })
                .await;
            }
        }
    }

    pub(super) async fn set_plan(&mut self, i: usize, status: PlanStatus) {
        let Some(plan) = self.plan.as_mut() else {
            return;
        };
        plan.set_status(i, status);
        if let Some(t) = plan.tasks.get(i) {
            let body = EventBody::PlanEntry {
                id: t.id.clone(),
                assigned_to: t.assigned_to.clone(),
                status,
            };
            self.record(body).await;
        }
    }

    pub(super) async fn dispatch_plan(&mut self) {
        let Some(plan) = self.plan.as_mut() else {
            return;
        };
        for i in plan.dispatch_ready() {
            let Some(t) = self.plan.as_ref().and_then(|p| p.tasks.get(i)).cloned() else {
                continue;
            };
            let d = Delivery {
                from: vec!["plan".into()],
                text: t.content,
                via: RouteVia::Plan,
                origin: Origin::Plan(i),
                key: None,
            };
            self.deliver(&t.assigned_to, d).await;
        }
    }
}
