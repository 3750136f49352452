//! Master plans (spec §10.2): a `cap.plan` whose entries carry
//! `_meta.cap.assigned_to` (a session) and `_meta.cap.depends_on` (entry ids) is
//! validated, then dispatched in dependency order, each entry's status following
//! the turns of the session it is assigned to.

use std::collections::{HashMap, HashSet};

use super::mentions::target_of;
use crate::protocol::{HasMeta, PlanEntry, PlanStatus};

/// One dispatchable entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlanTask {
    pub id: String,
    pub content: String,
    /// The session name it is assigned to.
    pub assigned_to: String,
    pub depends_on: Vec<String>,
    pub status: PlanStatus,
}

/// Why a master plan was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("plan entry `{entry}` is assigned to `{to}`, which is not a session of this fleet")]
    UnknownAssignee { entry: String, to: String },
    #[error("plan entry `{entry}` depends on `{dep}`, which is not an entry of the plan")]
    UnknownDependency { entry: String, dep: String },
    #[error("plan entry id `{0}` appears twice")]
    DuplicateId(String),
    #[error("plan entries depend on each other in a cycle: {0}")]
    Cycle(String),
    #[error("plan entry `{0}` is not assigned to any session (_meta.cap.assigned_to)")]
    Unassigned(String),
}

/// A validated master plan and its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MasterPlan {
    pub tasks: Vec<PlanTask>,
    /// Per task: handed to its session (its turn may still wait in the session's
    /// queue; it is `in_progress` only once that turn starts).
    dispatched: Vec<bool>,
}

impl MasterPlan {
    /// `None` when no entry is assigned (an agent's own local plan, not a master plan).
    pub(crate) fn from_entries(
        entries: &[PlanEntry],
        sessions: &HashSet<String>,
    ) -> Result<Option<Self>, PlanError> {
        if entries.iter().all(|e| e.assigned_to().is_none()) {
            return Ok(None);
        }
        let mut ids = HashSet::new();
        for e in entries {
            if !ids.insert(e.id.as_str()) {
                return Err(PlanError::DuplicateId(e.id.clone()));
            }
        }
        let mut tasks = Vec::with_capacity(entries.len());
        for e in entries {
            let to = e
                .assigned_to()
                .map(target_of)
                .ok_or_else(|| PlanError::Unassigned(e.id.clone()))?;
            if !sessions.contains(to) {
                return Err(PlanError::UnknownAssignee {
                    entry: e.id.clone(),
                    to: to.to_owned(),
                });
            }
            let depends_on: Vec<String> = e.depends_on().into_iter().map(str::to_owned).collect();
            if let Some(dep) = depends_on.iter().find(|d| !ids.contains(d.as_str())) {
                return Err(PlanError::UnknownDependency {
                    entry: e.id.clone(),
                    dep: dep.clone(),
                });
            }
            tasks.push(PlanTask {
                id: e.id.clone(),
                content: e.content.clone(),
                assigned_to: to.to_owned(),
                depends_on,
                status: match e.status {
                    PlanStatus::Completed => PlanStatus::Completed,
                    _ => PlanStatus::Pending,
                },
            });
        }
        let dispatched = vec![false; tasks.len()];
        let plan = MasterPlan { tasks, dispatched };
        plan.check_acyclic()?;
        Ok(Some(plan))
    }

    fn check_acyclic(&self) -> Result<(), PlanError> {
        let index: HashMap<&str, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        // Kahn's algorithm: whatever never reaches in-degree 0 is on a cycle.
        let mut indegree: Vec<usize> = self.tasks.iter().map(|t| t.depends_on.len()).collect();
        let mut ready: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| indegree[i] == 0)
            .collect();
        let mut seen = 0;
        while let Some(i) = ready.pop() {
            seen += 1;
            for (j, t) in self.tasks.iter().enumerate() {
                if t.depends_on
                    .iter()
                    .any(|d| index.get(d.as_str()) == Some(&i))
                {
                    indegree[j] -= 1;
                    if indegree[j] == 0 {
                        ready.push(j);
                    }
                }
            }
        }
        if seen == self.tasks.len() {
            Ok(())
        } else {
            let on_cycle: Vec<&str> = (0..self.tasks.len())
                .filter(|&i| indegree[i] > 0)
                .map(|i| self.tasks[i].id.as_str())
                .collect();
            Err(PlanError::Cycle(on_cycle.join(", ")))
        }
    }

    fn completed(&self, id: &str) -> bool {
        self.tasks
            .iter()
            .any(|t| t.id == id && t.status == PlanStatus::Completed)
    }

    /// Pending entries whose dependencies have all completed, in plan order.
    pub(crate) fn ready(&self) -> Vec<usize> {
        (0..self.tasks.len())
            .filter(|&i| {
                let t = &self.tasks[i];
                t.status == PlanStatus::Pending && t.depends_on.iter().all(|d| self.completed(d))
            })
            .collect()
    }

    /// The ready entries not handed out yet, in plan order; they count as handed out
    /// from now on.
    pub(crate) fn dispatch_ready(&mut self) -> Vec<usize> {
        let fresh: Vec<usize> = self
            .ready()
            .into_iter()
            .filter(|&i| !self.dispatched[i])
            .collect();
        for &i in &fresh {
            self.dispatched[i] = true;
        }
        fresh
    }

    /// `session` has an entry still to do (pending, or in progress).
    pub(crate) fn has_open(&self, session: &str) -> bool {
        self.tasks.iter().any(|t| {
            t.assigned_to == session
                && matches!(t.status, PlanStatus::Pending | PlanStatus::InProgress)
        })
    }

    pub(crate) fn set_status(&mut self, index: usize, status: PlanStatus) {
        if let Some(t) = self.tasks.get_mut(index) {
            t.status = status;
        }
    }

    /// Nothing left to run or waiting on a dependency that can still complete.
    #[cfg(test)]
    pub(crate) fn is_settled(&self) -> bool {
        self.ready().is_empty()
            && !self
                .tasks
                .iter()
                .any(|t| t.status == PlanStatus::InProgress)
    }

    /// The plan as `cap.plan` entries (for the `plan_doc` and the journal).
    pub(crate) fn entries(&self) -> Vec<PlanEntry> {
        self.tasks
            .iter()
            .map(|t| {
                let mut e = PlanEntry::new(t.id.clone(), t.content.clone(), t.status);
                e.set_meta(
                    crate::protocol::meta::CAP_ASSIGNED_TO,
                    serde_json::Value::String(t.assigned_to.clone()),
                );
                if !t.depends_on.is_empty() {
                    e.set_meta(
                        crate::protocol::meta::CAP_DEPENDS_ON,
                        serde_json::json!(t.depends_on),
                    );
                }
                e
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(id: &str, to: &str, deps: &[&str]) -> PlanEntry {
        let mut e = PlanEntry::new(id, format!("do {id}"), PlanStatus::Pending);
        e.set_meta("cap.assigned_to", json!(format!("cap://demo/{to}")));
        if !deps.is_empty() {
            e.set_meta("cap.depends_on", json!(deps));
        }
        e
    }

    fn sessions() -> HashSet<String> {
        ["a", "b"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dispatches_in_dependency_order() {
        let mut p = MasterPlan::from_entries(
            &[
                entry("t1", "a", &[]),
                entry("t2", "b", &["t1"]),
                entry("t3", "a", &["t1", "t2"]),
            ],
            &sessions(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.ready(), vec![0]);
        assert_eq!(p.dispatch_ready(), vec![0]);
        assert!(p.dispatch_ready().is_empty(), "handed out once");
        assert!(p.has_open("a") && p.has_open("b"));
        p.set_status(0, PlanStatus::InProgress);
        assert!(p.ready().is_empty() && !p.is_settled());
        p.set_status(0, PlanStatus::Completed);
        assert_eq!(p.ready(), vec![1]);
        p.set_status(1, PlanStatus::Completed);
        assert_eq!(p.ready(), vec![2]);
        p.set_status(2, PlanStatus::Completed);
        assert!(p.is_settled());
        assert!(!p.has_open("a") && !p.has_open("b"));
    }

    #[test]
    fn rejects_bad_plans() {
        let s = sessions();
        assert_eq!(
            MasterPlan::from_entries(&[entry("t1", "z", &[])], &s),
            Err(PlanError::UnknownAssignee {
                entry: "t1".into(),
                to: "z".into()
            })
        );
        assert_eq!(
            MasterPlan::from_entries(&[entry("t1", "a", &["t9"])], &s),
            Err(PlanError::UnknownDependency {
                entry: "t1".into(),
                dep: "t9".into()
            })
        );
        assert!(matches!(
            MasterPlan::from_entries(&[entry("t1", "a", &["t2"]), entry("t2", "b", &["t1"])], &s),
            Err(PlanError::Cycle(_))
        ));
        let local = [PlanEntry::new("p1", "mine", PlanStatus::Pending)];
        assert_eq!(MasterPlan::from_entries(&local, &s), Ok(None));
    }
}
