//! `ListTasks` (A2A §3.1.4): the tasks an exposed agent or fleet remembers, the most
//! recently updated first, filtered by `contextId`, `status` and
//! `statusTimestampAfter`, a page of `pageSize` (1 to 100, default 50) at a time.
//! The page token is a cursor — the update time and id of the page's last task — so
//! a task updated between two pages moves to the front and is not seen twice.
//! Each task as `GetTask` answers it (`historyLength` the same), its artifacts only
//! with `includeArtifacts: true`.

use std::sync::Arc;

use capfleet_wire::bindings::a2a::{Spelling, TaskState};
use serde_json::{Value, json};

use super::envelope;
use super::rpc::RpcError;
use super::task::Task;

/// Tasks per page by default, and at most.
const PAGE: usize = 50;
const PAGE_MAX: usize = 100;

/// What a `ListTasks` request asks for.
struct Query {
    context: Option<String>,
    status: Option<TaskState>,
    after_ms: Option<u64>,
    page: usize,
    /// Only tasks ordered after this (update time, id).
    cursor: Option<(u64, String)>,
    history: Option<usize>,
    artifacts: bool,
}

fn query(params: &Value) -> Result<Query, RpcError> {
    let bad = |m: &str| RpcError::invalid_params(m.to_owned());
    let string = |k: &str| -> Result<Option<&str>, RpcError> {
        match params.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(bad(&format!("{k} is a string"))),
        }
    };
    let status = match string("status")? {
        None | Some("TASK_STATE_UNSPECIFIED") => None,
        Some(s) => match TaskState::parse(s) {
            TaskState::Unknown => return Err(bad(&format!("status `{s}` is no task state"))),
            state => Some(state),
        },
    };
    let after_ms = string("statusTimestampAfter")?
        .map(|t| {
            let ts: jiff::Timestamp = t.parse().map_err(|_| {
                bad("statusTimestampAfter is an ISO 8601 time (2026-12-07T10:00:00Z)")
            })?;
            u64::try_from(ts.as_millisecond())
                .map_err(|_| bad("statusTimestampAfter is before 1970"))
        })
        .transpose()?;
    let page = match params.get("pageSize") {
        None | Some(Value::Null) => PAGE,
        Some(n) => match n.as_i64() {
            Some(n @ 1..=100) => usize::try_from(n).unwrap_or(PAGE_MAX),
            _ => return Err(bad("pageSize is from 1 to 100")),
        },
    };
    let cursor = string("pageToken")?
        .map(|t| {
            t.split_once(':')
                .and_then(|(ms, id)| Some((ms.parse::<u64>().ok()?, id.to_owned())))
                .filter(|(_, id)| !id.is_empty())
                .ok_or_else(|| bad("pageToken is not one a ListTasks answer gave"))
        })
        .transpose()?;
    let artifacts = match params.get("includeArtifacts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("includeArtifacts is a boolean")),
    };
    Ok(Query {
        context: string("contextId")?.map(str::to_owned),
        status,
        after_ms,
        page,
        cursor,
        history: envelope::history_length(params)?,
        artifacts,
    })
}

/// The answer to `ListTasks` over `tasks`, in `spelling`, for a client of the CAP
/// extension (`cap`) or not.
pub(super) fn list(
    tasks: Vec<Arc<Task>>,
    params: &Value,
    spelling: Spelling,
    cap: bool,
) -> Result<Value, RpcError> {
    let q = query(params)?;
    let mut matching: Vec<(u64, Arc<Task>)> = tasks
        .into_iter()
        .filter(|t| q.context.as_ref().is_none_or(|c| *c == t.context))
        .filter(|t| q.status.is_none_or(|s| t.state() == s))
        .map(|t| (t.updated_ms(), t))
        .filter(|(ms, _)| q.after_ms.is_none_or(|a| *ms >= a))
        .collect();
    // The most recently updated first; the id breaks ties, so the order is total.
    matching.sort_by(|(a, ta), (b, tb)| b.cmp(a).then_with(|| tb.id.cmp(&ta.id)));
    let total = matching.len();
    let start = match &q.cursor {
        None => 0,
        Some((ms, id)) => matching
            .iter()
            .position(|(m, t)| (*m, &t.id) < (*ms, id))
            .unwrap_or(total),
    };
    let page: Vec<&(u64, Arc<Task>)> = matching[start..].iter().take(q.page).collect();
    let next = match page.last() {
        Some((ms, t)) if start + page.len() < total => format!("{ms}:{}", t.id),
        _ => String::new(),
    };
    let rendered: Vec<Value> = page
        .iter()
        .map(|(_, t)| {
            let mut obj = t.snapshot().render(&t.frames(spelling), cap, q.history);
            if let Some(o) = obj.as_object_mut() {
                if !q.artifacts {
                    o.remove("artifacts");
                } else if !o.contains_key("artifacts") {
                    o.insert("artifacts".into(), json!([]));
                }
            }
            obj
        })
        .collect();
    Ok(json!({
        "tasks": rendered,
        "nextPageToken": next,
        "pageSize": page.len(),
        "totalSize": total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::task::Update;

    fn task(id: &str, context: &str, state: TaskState) -> Arc<Task> {
        let t = Task::new(id.into(), context.into(), None);
        t.publish(Update::Status {
            state,
            message: None,
        });
        std::thread::sleep(std::time::Duration::from_millis(2));
        t
    }

    #[test]
    fn pages_follow_the_cursor_newest_first_and_filters_hold() {
        let all: Vec<Arc<Task>> = (0..5)
            .map(|i| {
                let state = if i % 2 == 0 {
                    TaskState::Completed
                } else {
                    TaskState::Working
                };
                task(&format!("t{i}"), if i < 3 { "a" } else { "b" }, state)
            })
            .collect();
        let ids = |v: &Value| -> Vec<String> {
            v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned())
                .collect()
        };
        let first = list(all.clone(), &json!({"pageSize": 2}), Spelling::V1, false).unwrap();
        assert_eq!(ids(&first), ["t4", "t3"]);
        assert_eq!(
            (first["totalSize"].as_u64(), first["pageSize"].as_u64()),
            (Some(5), Some(2))
        );
        let token = first["nextPageToken"].as_str().unwrap();
        let second = list(
            all.clone(),
            &json!({"pageSize": 2, "pageToken": token}),
            Spelling::V1,
            false,
        )
        .unwrap();
        assert_eq!(ids(&second), ["t2", "t1"]);
        let token = second["nextPageToken"].as_str().unwrap();
        let last = list(
            all.clone(),
            &json!({"pageSize": 2, "pageToken": token}),
            Spelling::V1,
            false,
        )
        .unwrap();
        assert_eq!(
            (ids(&last), last["nextPageToken"].as_str()),
            (vec!["t0".to_owned()], Some(""))
        );
        let filtered = list(
            all.clone(),
            &json!({"contextId": "a", "status": "TASK_STATE_COMPLETED"}),
            Spelling::V1,
            false,
        )
        .unwrap();
        assert_eq!(ids(&filtered), ["t2", "t0"]);
        let none = list(
            all.clone(),
            &json!({"contextId": "zzz"}),
            Spelling::V1,
            false,
        )
        .unwrap();
        assert_eq!(
            none,
            json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
        );
        let later = list(
            all.clone(),
            &json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
            Spelling::V1,
            false,
        )
        .unwrap();
        assert_eq!(later["totalSize"], 0);
        for bad in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": -1}),
            json!({"pageToken": "invalid-token-xyz"}),
            json!({"status": "INVALID_STATUS"}),
            json!({"statusTimestampAfter": "-1"}),
            json!({"historyLength": -1}),
        ] {
            assert_eq!(
                list(all.clone(), &bad, Spelling::V1, false)
                    .unwrap_err()
                    .code,
                -32602,
                "{bad}"
            );
        }
    }
}
