//! A person's reply to an open request, read the same way wherever it is typed: at
//! the terminal ([`super::Input`]) or as the text of an A2A client without the CAP
//! extension (`serve`'s A2A face).

use capfleet_engine::protocol::Decision;
use capfleet_wire::events::{Answer, OpenRequest};
use serde_json::Value;

/// What a person replied: a permission's decision, or an ask's value (`None`
/// declines it).
pub enum Reply {
    Decision(Decision),
    Value(Option<Value>),
}

/// Typed text as a decision: only a clear yes allows (`y`, `yes`, `allow`,
/// `allow_once`; `a`, `always`, `allow_always` for always), anything else denies.
pub fn decision(text: &str) -> Decision {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "allow" | "allow_once" => Decision::AllowOnce,
        "a" | "always" | "allow_always" => Decision::AllowAlways,
        _ => Decision::Deny,
    }
}

/// The answer to `request` that `reply` gives, decided by `rule`. A reply of the
/// other kind than the request asks (a value to a permission, a decision to an ask)
/// refuses it: the permission is denied, the ask declined.
pub fn answer(request: &OpenRequest, reply: Reply, rule: String) -> Answer {
    match request {
        OpenRequest::Permission { req_id, .. } => Answer::Permission {
            req_id: req_id.clone(),
            decision: match reply {
                Reply::Decision(d) => d,
                Reply::Value(_) => Decision::Deny,
            },
            rule,
        },
        OpenRequest::Ask { ask_id, .. } => Answer::Ask {
            ask_id: ask_id.clone(),
            value: match reply {
                Reply::Value(v) => v,
                Reply::Decision(_) => None,
            },
            rule,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capfleet_engine::protocol::RiskLevel;
    use serde_json::json;

    #[test]
    fn only_a_clear_yes_allows() {
        for yes in ["y", " Yes ", "allow", "ALLOW_ONCE"] {
            assert_eq!(decision(yes), Decision::AllowOnce, "{yes:?}");
        }
        for always in ["a", "always", "allow_always"] {
            assert_eq!(decision(always), Decision::AllowAlways, "{always:?}");
        }
        for no in ["", "n", "no", "maybe", "yes please"] {
            assert_eq!(decision(no), Decision::Deny, "{no:?}");
        }
    }

    #[test]
    fn a_reply_of_the_other_kind_refuses() {
        let permission = OpenRequest::Permission {
            req_id: "r1".into(),
            tool: "Bash".into(),
            intent: None,
            scope: None,
            risk: RiskLevel::Low,
            why: Vec::new(),
        };
        let ask = OpenRequest::Ask {
            ask_id: "a1".into(),
            prompt: "Which?".into(),
            form: None,
        };
        let value = || Reply::Value(Some(json!("blue")));
        assert_eq!(
            answer(&permission, value(), "t".into()),
            Answer::Permission {
                req_id: "r1".into(),
                decision: Decision::Deny,
                rule: "t".into()
            }
        );
        assert_eq!(
            answer(&ask, value(), "t".into()),
            Answer::Ask {
                ask_id: "a1".into(),
                value: Some(json!("blue")),
                rule: "t".into()
            }
        );
        assert_eq!(
            answer(&ask, Reply::Decision(Decision::AllowOnce), "t".into()),
            Answer::Ask {
                ask_id: "a1".into(),
                value: None,
                rule: "t".into()
            }
        );
    }
}
