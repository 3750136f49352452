//! Questions put to the A2A client (spec §11.3): a permission request or an ask the
//! policy left open becomes the task's `input-required`, whose message carries the
//! question as text and as a data part marked `_meta."cap.kind"`; the client's next
//! message to the task answers it — a marked `cap.permission.response` /
//! `cap.ask_user.answer` data part, or, from a client without the CAP extension, its
//! text (read as at the terminal, [`capfleet_app::human::reply::decision`]: only a clear yes
//! grants a permission; an ask's answer is the text itself).

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::protocol::CapEvent;
use capfleet_wire::bindings::a2a::Part as WirePart;
use capfleet_wire::bindings::a2a::datapart;
use capfleet_wire::events::{Answer, OpenRequest};
use serde_json::Value;

use super::task::{Msg, Part};
use capfleet_app::human::reply::{self, Reply};

/// Who decided an answer the A2A client gave (journaled as the answer's rule).
pub(super) fn rule_of(caller: &str) -> String {
    format!("a2a:{caller}")
}

/// The `input-required` message asking `q`.
pub(super) fn question(q: &HumanQuestion, message_id: String) -> Msg {
    let (text, event) = match &q.request {
        OpenRequest::Permission {
            req_id,
            tool,
            intent,
            risk,
            ..
        } => {
            let what = intent.as_ref().map(|i| format!(" {i}")).unwrap_or_default();
            (
                format!("Allow {tool}{what}? (allow_once, allow_always or deny)"),
                CapEvent::permission_request(req_id.clone(), tool.clone(), intent.clone(), *risk),
            )
        }
        OpenRequest::Ask {
            ask_id,
            prompt,
            form,
        } => (
            prompt.clone(),
            CapEvent::ask_user(ask_id.clone(), prompt.clone(), form.clone()),
        ),
    };
    Msg {
        id: message_id,
        parts: vec![Part::Text(text), Part::Cap(datapart::encode(&event))],
    }
}

/// The answer to `request` that the client's `message` gives, by `caller`.
pub(super) fn answer(request: &OpenRequest, message: &Value, caller: &str) -> Answer {
    let parts: Vec<&Value> = message
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let marked = parts.iter().find_map(|p| match WirePart::read(p) {
        WirePart::Data(d) => datapart::decode(d).and_then(Result::ok),
        _ => None,
    });
    let text: String = parts
        .iter()
        .filter_map(|p| match WirePart::read(p) {
            WirePart::Text(t) => Some(t),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let reply = match request {
        OpenRequest::Permission { req_id, .. } => Reply::Decision(match marked {
            Some(CapEvent::PermissionResponse(r)) if r.req_id == *req_id => r.decision,
            _ => reply::decision(&text),
        }),
        OpenRequest::Ask { ask_id, form, .. } => Reply::Value(match marked {
            Some(CapEvent::AskUserAnswer(a)) if a.ask_id == *ask_id => Some(a.value),
            _ => (!text.trim().is_empty()).then(|| shaped(form.as_ref(), text.trim())),
        }),
    };
    reply::answer(request, reply, rule_of(caller))
}

/// A plain client's text as the value a form asks for: an object form (one property
/// per question, as `chat` asks them) takes a JSON object, or the text as the answer to
/// its only question; any other form the text itself.
fn shaped(form: Option<&Value>, text: &str) -> Value {
    let props = form
        .and_then(|f| f.get("properties"))
        .and_then(Value::as_object);
    if let Some(props) = props {
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
            return v;
        }
        if let (1, Some(question)) = (props.len(), props.keys().next()) {
            let mut answer = serde_json::Map::new();
            answer.insert(question.clone(), Value::String(text.to_owned()));
            return Value::Object(answer);
        }
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use capfleet_engine::protocol::{Decision, RiskLevel};
    use serde_json::json;

    fn permission() -> OpenRequest {
        OpenRequest::Permission {
            req_id: "r1".into(),
            tool: "Bash".into(),
            intent: Some(json!({"command": "ls"})),
            scope: None,
            risk: RiskLevel::High,
            why: Vec::new(),
        }
    }

    #[test]
    fn a_marked_response_decides_and_plain_text_must_say_yes() {
        let marked = json!({"parts": [{"data": {"_meta": {"cap.kind": "cap.permission.response"},
            "req_id": "r1", "decision": "allow_always"}}]});
        let Answer::Permission { decision, rule, .. } = answer(&permission(), &marked, "ci") else {
            panic!("not a permission answer")
        };
        assert_eq!((decision, rule.as_str()), (Decision::AllowAlways, "a2a:ci"));
        let other_request = json!({"parts": [{"kind": "data", "data": {"_meta": {"cap.kind": "cap.permission.response"},
            "req_id": "r2", "decision": "allow_once"}}]});
        assert!(matches!(
            answer(&permission(), &other_request, "ci"),
            Answer::Permission {
                decision: Decision::Deny,
                ..
            }
        ));
        let yes = json!({"parts": [{"kind": "text", "text": " Allow "}]});
        assert!(matches!(
            answer(&permission(), &yes, "ci"),
            Answer::Permission {
                decision: Decision::AllowOnce,
                ..
            }
        ));
        let maybe = json!({"parts": [{"text": "maybe later"}]});
        assert!(matches!(
            answer(&permission(), &maybe, "ci"),
            Answer::Permission {
                decision: Decision::Deny,
                ..
            }
        ));
    }

    #[test]
    fn an_ask_takes_the_marked_value_or_the_text() {
        let ask = OpenRequest::Ask {
            ask_id: "a1".into(),
            prompt: "Which?".into(),
            form: None,
        };
        let marked = json!({"parts": [{"data": {"_meta": {"cap.kind": "cap.ask_user.answer"},
            "ask_id": "a1", "value": "blue"}}]});
        assert!(
            matches!(answer(&ask, &marked, "x"), Answer::Ask { value: Some(v), .. } if v == "blue")
        );
        let text = json!({"parts": [{"text": "red"}]});
        assert!(
            matches!(answer(&ask, &text, "x"), Answer::Ask { value: Some(v), .. } if v == "red")
        );
        let empty = json!({"parts": []});
        assert!(matches!(
            answer(&ask, &empty, "x"),
            Answer::Ask { value: None, .. }
        ));
        let form = json!({"type": "object", "properties": {"Which colour?": {"type": "string"}}});
        let one = OpenRequest::Ask {
            ask_id: "a2".into(),
            prompt: "Which colour?".into(),
            form: Some(form),
        };
        assert!(matches!(answer(&one, &text, "x"),
            Answer::Ask { value: Some(v), .. } if v == json!({"Which colour?": "red"})));
    }
}
