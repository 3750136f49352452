//! The notices, built from what the run says: a question put to a human (the
//! answerer's human channel), a `budget_exceeded` record on the bus, the run's end.

use capfleet_engine::answerer::HumanQuestion;
use capfleet_wire::events::OpenRequest;
use capfleet_wire::events::{EventBody, SessionEvent};
use serde_json::json;

use super::{Kind, Notice};

/// A session waits: `q` was put to a human; `answer` is where to answer it, if
/// anywhere (the server's ask route).
pub fn waiting(q: &HumanQuestion, run: &str, fleet: &str, answer: Option<&str>) -> Notice {
    let what = match &q.request {
        OpenRequest::Permission {
            req_id, tool, risk, ..
        } => {
            json!({"kind": "permission", "request_id": req_id, "tool": tool, "risk": risk.as_str()})
        }
        OpenRequest::Ask { ask_id, prompt, .. } => {
            json!({"kind": "ask", "request_id": ask_id, "prompt": prompt})
        }
    };
    let mut fields = json!({ "session": &*q.urn, "waiting_for": what });
    if let Some(a) = answer {
        fields["answer"] = json!(a);
    }
    Notice::new(Kind::Waiting, run, fleet, fields)
}

/// A budget crossed, if `e` says one was.
pub fn of_event(e: &SessionEvent, run: &str, fleet: &str) -> Option<Notice> {
    let EventBody::BudgetExceeded {
        scope,
        limit_usd,
        spent_usd,
        overshoot_usd,
        urn,
        turn,
    } = &e.body
    else {
        return None;
    };
    Some(Notice::new(
        Kind::BudgetExceeded,
        run,
        fleet,
        json!({
            "scope": scope,
            "limit_usd": limit_usd,
            "spent_usd": spent_usd,
            "overshoot_usd": overshoot_usd,
            "session": urn,
            "turn": turn,
        }),
    ))
}

/// The run ended with `outcome` (`completed`, `session_failed`, …) and `exit_code`.
pub fn run_ended(run: &str, fleet: &str, outcome: Option<&str>, exit_code: u8) -> Notice {
    Notice::new(
        Kind::RunEnded,
        run,
        fleet,
        json!({ "outcome": outcome, "exit_code": exit_code }),
    )
}
