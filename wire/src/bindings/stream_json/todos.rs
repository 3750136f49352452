//! Claude's plans are `TodoWrite` tool calls (`{"todos":[{"content","status",
//! "activeForm"}]}`): each one also becomes a full-state `cap.plan` (spec §7.3), so
//! plans from stream-json agents reach the router like any other. Entries without an
//! `id` get `t1`, `t2`, … in order; `priority` and `_meta` pass through when valid.

use serde_json::Value;

use crate::protocol::{CapEvent, PlanEntry, PlanStatus, Priority};

/// The tool whose calls carry the agent's plan.
pub(crate) const TODO_TOOL: &str = "TodoWrite";

/// The `cap.plan` of a `TodoWrite` input; `None` when it holds no todo list.
pub(crate) fn plan_of(input: &Value) -> Option<CapEvent> {
    let todos = input.get("todos")?.as_array()?;
    let entries = todos
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let content = t.get("content")?.as_str()?;
            let status = t
                .get("status")
                .and_then(Value::as_str)
                .and_then(PlanStatus::parse)
                .unwrap_or(PlanStatus::Pending);
            let id = t
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("t{}", i + 1), str::to_owned);
            let mut entry = PlanEntry::new(id, content, status);
            entry.priority = t
                .get("priority")
                .and_then(Value::as_str)
                .and_then(Priority::parse);
            if let Some(Value::Object(meta)) = t.get("_meta") {
                entry.meta = Some(meta.clone());
            }
            Some(entry)
        })
        .collect();
    Some(CapEvent::plan(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_todos_become_a_plan() {
        let input = json!({"todos": [
            {"content": "Read the router", "status": "completed", "activeForm": "Reading"},
            {"content": "Add /health", "status": "in_progress", "activeForm": "Adding", "priority": "high"},
            {"id": "x", "content": "Test", "status": "weird", "_meta": {"cap.assigned_to": "cap://f/b"}},
        ]});
        let CapEvent::Plan(p) = plan_of(&input).unwrap() else {
            panic!("a plan")
        };
        assert_eq!(p.entries.len(), 3);
        assert_eq!(
            (p.entries[0].id.as_str(), p.entries[0].status),
            ("t1", PlanStatus::Completed)
        );
        assert_eq!(p.entries[1].priority, Some(Priority::High));
        assert_eq!(p.entries[2].id, "x");
        assert_eq!(p.entries[2].status, PlanStatus::Pending);
        assert!(p.entries[2].meta.is_some());
        assert!(plan_of(&json!({"command": "ls"})).is_none());
    }
}
