//! The research answerer's questions and answers: what the researcher is told (the
//! question, the asking session's recent context, the options, the risk ceiling), how
//! its reply is read (the last line starting with [`MARKER`]) and validated against
//! the options and the ceiling, and the key under which identical open questions are
//! deduplicated. Running the researcher is [`super::desk`]'s.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::protocol::{Decision, RiskLevel};
use crate::session::SessionSpec;
use capfleet_wire::events::{Answer, OpenRequest};

/// The marker of the researcher's answer line.
pub(crate) const MARKER: &str = "ANSWER:";
/// At most this many researchers at once (`[answerer] parallel`).
pub const DEFAULT_PARALLEL: usize = 4;
/// How long one research may take, start to answer (`[answerer] timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The rule recorded for an answer the researcher gave.
pub(crate) const RULE_RESEARCH: &str = "research";
/// The rule recorded when research failed and the answer is fail-safe.
pub(crate) const RULE_RESEARCH_FAIL_SAFE: &str = "research_fail_safe";
/// The rule recorded for the researcher's own requests: it asks nothing further.
pub(crate) const RULE_RESEARCHER_ASKS: &str = "researcher_asks_nothing";
/// Bytes of the researcher's reply kept in the answer's record.
pub(crate) const MAX_REPLY: usize = 4096;

/// How research answers what the policy leaves open (fleet `[answerer]`).
#[derive(Debug, Clone)]
pub struct ResearchSpec {
    /// The researcher's session: its agent, launch and binding. Each question gets a
    /// session of its own from it, in a fresh temporary workspace.
    pub template: SessionSpec,
    /// Researchers at once, at most.
    pub parallel: usize,
    /// One research, spawn to answer, at most.
    pub timeout: Duration,
    /// The highest risk a research answer may approve: an approval of a riskier
    /// request is refused (deny), whatever the researcher says.
    pub max_risk: RiskLevel,
    /// Ask the researcher before any human (`auto_answer = "research"`); else only
    /// when nobody is there to ask.
    pub first: bool,
}

/// Why a researcher's reply is not an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Invalid {
    #[error("no line starts with {MARKER}")]
    NoMarker,
    #[error("the {MARKER} line is empty")]
    Empty,
    #[error("{0:?} is not a decision (allow_once | allow_always | deny)")]
    NotADecision(String),
    #[error("it approves a {risk} risk request, above the answerer's max_risk {max}")]
    AboveMaxRisk { risk: RiskLevel, max: RiskLevel },
    #[error("{given:?} is not one of the options of {question:?} ({options})")]
    NotAnOption {
        question: String,
        given: String,
        options: String,
    },
    #[error("the form has several questions: the answer must be a JSON object ({0})")]
    NotAnObject(String),
}

/// The key identical open questions share: the request without its id.
pub(crate) fn question_key(request: &OpenRequest) -> String {
    let v = match request {
        OpenRequest::Permission {
            tool,
            intent,
            scope,
            risk,
            ..
        } => json!([
            "permission",
            tool,
            intent,
            scope.map(|s| s.as_str()),
            risk.as_str()
        ]),
        OpenRequest::Ask { prompt, form, .. } => json!(["ask", prompt, form]),
    };
    v.to_string()
}

/// The researcher's prompt: the question, the asking session's context and the
/// options, and how to answer.
pub(crate) fn prompt(request: &OpenRequest, asker: &str, context: &str, max: RiskLevel) -> String {
    let mut p = format!(
        "You answer, on behalf of the user, a question another coding agent's session \
         ({asker}) is waiting on. Nobody else can answer it. Investigate only by reading; \
         change nothing, ask nothing. End your reply with one line that starts with \
         `{MARKER}` and holds the answer alone.\n\n"
    );
    match request {
        OpenRequest::Permission {
            tool, intent, risk, ..
        } => {
            let input = intent.as_ref().map_or("{}".into(), Value::to_string);
            p.push_str(&format!(
                "The agent asks permission to run the tool `{tool}` with input {input} \
                 (risk: {risk}). Answer `{MARKER} allow_once` or `{MARKER} deny`. \
                 Approvals above risk {max} are refused whatever you answer.\n"
            ));
        }
        OpenRequest::Ask { prompt, form, .. } => {
            p.push_str(&format!("The agent asks: {prompt}\n"));
            let questions = questions(form.as_ref());
            match questions.as_slice() {
                [] => p.push_str(&format!(
                    "Answer in free text on the {MARKER} line, or `{MARKER} decline`.\n"
                )),
                [(q, options)] => p.push_str(&format!(
                    "Question {q:?}, options: {}. Answer with one option's label \
                     (or `{MARKER} decline`).\n",
                    options.join(" | ")
                )),
                many => {
                    for (q, options) in many {
                        p.push_str(&format!(
                            "Question {q:?}, options: {}\n",
                            options.join(" | ")
                        ));
                    }
                    p.push_str(&format!(
                        "Answer with a JSON object on the {MARKER} line: each question to \
                         its chosen label (or `{MARKER} decline`).\n"
                    ));
                }
            }
        }
    }
    if !context.trim().is_empty() {
        p.push_str("\nThe asking session's recent context:\n<context>\n");
        p.push_str(context);
        p.push_str("\n</context>\n");
    }
    p
}

/// The questions of an ask's form (one property each) with their option labels.
fn questions(form: Option<&Value>) -> Vec<(String, Vec<String>)> {
    let Some(props) = form
        .and_then(|f| f.get("properties"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(q, schema)| {
            let options = schema
                .get("oneOf")
                .or_else(|| schema.pointer("/items/oneOf"))
                .and_then(Value::as_array)
                .map(|o| {
                    o.iter()
                        .filter_map(|c| Some(c.get("const")?.as_str()?.to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            (q.clone(), options)
        })
        .collect()
}

/// The researcher's answer: the rest of its reply's last line starting with
/// [`MARKER`].
pub(crate) fn answer_line(reply: &str) -> Option<&str> {
    reply
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(MARKER))
        .map(str::trim)
}

/// The answer `reply` gives `request`, validated: a decision that never approves
/// above `max`, an option of the form, or free text; `None` in the answer value
/// declines the ask.
pub(crate) fn verdict(
    request: &OpenRequest,
    reply: &str,
    max: RiskLevel,
) -> Result<Answer, Invalid> {
    let line = answer_line(reply).ok_or(Invalid::NoMarker)?;
    let word = line.trim_matches(|c: char| c == '`' || c == '"' || c == '.' || c == '*');
    if word.is_empty() {
        return Err(Invalid::Empty);
    }
    match request {
        OpenRequest::Permission { req_id, risk, .. } => {
            let decision = match word.to_ascii_lowercase().as_str() {
                "deny" | "no" => Decision::Deny,
                // One request is answered, never a standing grant.
                "allow_once" | "allow_always" | "allow" | "yes" => Decision::AllowOnce,
                _ => return Err(Invalid::NotADecision(word.to_owned())),
            };
            if decision != Decision::Deny && !within(*risk, max) {
                return Err(Invalid::AboveMaxRisk { risk: *risk, max });
            }
            Ok(Answer::Permission {
                req_id: req_id.clone(),
                decision,
                rule: RULE_RESEARCH.into(),
            })
        }
        OpenRequest::Ask { ask_id, form, .. } => {
            let value = if word.eq_ignore_ascii_case("decline") {
                None
            } else {
                Some(ask_value(&questions(form.as_ref()), word)?)
            };
            Ok(Answer::Ask {
                ask_id: ask_id.clone(),
                value,
                rule: RULE_RESEARCH.into(),
            })
        }
    }
}

/// `risk` may be approved under the ceiling `max` (`high` only when `max` is `high`).
fn within(risk: RiskLevel, max: RiskLevel) -> bool {
    risk.rank() <= max.rank()
}

fn ask_value(questions: &[(String, Vec<String>)], word: &str) -> Result<Value, Invalid> {
    match questions {
        [] => Ok(Value::String(word.to_owned())),
        [(q, options)] if !word.starts_with('{') => {
            let label = option(q, options, word)?;
            Ok(json!({ q.clone(): label }))
        }
        _ => {
            let given: Map<String, Value> =
                serde_json::from_str(word).map_err(|e| Invalid::NotAnObject(e.to_string()))?;
            let mut out = Map::new();
            for (q, options) in questions {
                let pick = given.get(q).and_then(Value::as_str).unwrap_or_default();
                out.insert(q.clone(), Value::String(option(q, options, pick)?));
            }
            Ok(Value::Object(out))
        }
    }
}

/// The option `given` names (its label, case aside, or its 1-based number).
fn option(question: &str, options: &[String], given: &str) -> Result<String, Invalid> {
    if options.is_empty() {
        return Ok(given.to_owned());
    }
    let by_number = given
        .parse::<usize>()
        .ok()
        .and_then(|n| options.get(n.wrapping_sub(1)));
    by_number
        .or_else(|| options.iter().find(|o| o.eq_ignore_ascii_case(given)))
        .cloned()
        .ok_or_else(|| Invalid::NotAnOption {
            question: question.to_owned(),
            given: given.to_owned(),
            options: options.join(" | "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tail;

    fn permission(risk: RiskLevel) -> OpenRequest {
        OpenRequest::Permission {
            req_id: "p1".into(),
            tool: "Bash".into(),
            intent: Some(json!({"command": "make"})),
            scope: None,
            risk,
            why: Vec::new(),
        }
    }

    fn ask(form: Option<Value>) -> OpenRequest {
        OpenRequest::Ask {
            ask_id: "a1".into(),
            prompt: "Deploy where?".into(),
            form,
        }
    }

    fn decision(a: Result<Answer, Invalid>) -> Result<Decision, Invalid> {
        a.map(|a| match a {
            Answer::Permission { decision, .. } => decision,
            other => panic!("not a permission answer: {other:?}"),
        })
    }

    #[test]
    fn the_last_marker_line_is_the_answer() {
        let reply =
            "I think ANSWER: deny is wrong.\nANSWER: deny\nthen\n  ANSWER: allow_once  \nbye";
        assert_eq!(answer_line(reply), Some("allow_once"));
        assert_eq!(answer_line("no marker here"), None);
    }

    #[test]
    fn an_approval_above_max_risk_is_refused_whatever_it_says() {
        let p = permission(RiskLevel::Medium);
        for word in ["allow_once", "allow_always", "ALLOW", "yes"] {
            assert_eq!(
                decision(verdict(&p, &format!("ANSWER: {word}"), RiskLevel::Low)),
                Err(Invalid::AboveMaxRisk {
                    risk: RiskLevel::Medium,
                    max: RiskLevel::Low
                })
            );
        }
        let high = permission(RiskLevel::High);
        assert!(verdict(&high, "ANSWER: allow_once", RiskLevel::Medium).is_err());
        assert_eq!(
            decision(verdict(&high, "ANSWER: deny", RiskLevel::Low)),
            Ok(Decision::Deny)
        );
        // Within the ceiling an approval is once, never a standing grant.
        assert_eq!(
            decision(verdict(&p, "ANSWER: allow_always", RiskLevel::Medium)),
            Ok(Decision::AllowOnce)
        );
    }

    #[test]
    fn garbage_is_invalid() {
        let p = permission(RiskLevel::Low);
        assert_eq!(
            decision(verdict(&p, "ANSWER: maybe", RiskLevel::High)),
            Err(Invalid::NotADecision("maybe".into()))
        );
        assert_eq!(
            decision(verdict(&p, "ANSWER:", RiskLevel::High)),
            Err(Invalid::Empty)
        );
        assert_eq!(
            decision(verdict(&p, "sure, go", RiskLevel::High)),
            Err(Invalid::NoMarker)
        );
    }

    #[test]
    fn an_ask_is_answered_with_one_of_its_options() {
        let form = json!({"type": "object", "properties": {
            "Deploy where?": {"type": "string", "oneOf": [{"const": "staging"}, {"const": "prod"}]}
        }});
        let a = ask(Some(form));
        let value = |reply: &str| match verdict(&a, reply, RiskLevel::Low) {
            Ok(Answer::Ask { value, .. }) => Ok(value),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            value("ANSWER: Staging"),
            Ok(Some(json!({"Deploy where?": "staging"})))
        );
        assert_eq!(
            value("ANSWER: 2"),
            Ok(Some(json!({"Deploy where?": "prod"})))
        );
        assert_eq!(value("ANSWER: decline"), Ok(None));
        assert!(matches!(
            value("ANSWER: the moon"),
            Err(Invalid::NotAnOption { .. })
        ));
        let free = ask(None);
        assert!(matches!(
            verdict(&free, "ANSWER: in the eu region", RiskLevel::Low),
            Ok(Answer::Ask { value: Some(Value::String(s)), .. }) if s == "in the eu region"
        ));
    }

    #[test]
    fn identical_questions_share_a_key_whatever_their_ids() {
        let mut other = permission(RiskLevel::Low);
        if let OpenRequest::Permission { req_id, .. } = &mut other {
            *req_id = "p9".into();
        }
        assert_eq!(
            question_key(&permission(RiskLevel::Low)),
            question_key(&other)
        );
        assert_ne!(
            question_key(&permission(RiskLevel::Low)),
            question_key(&permission(RiskLevel::Medium))
        );
    }

    #[test]
    fn the_prompt_carries_question_context_and_options() {
        let p = prompt(
            &permission(RiskLevel::Medium),
            "cap://f/w",
            "built the parser",
            RiskLevel::Low,
        );
        assert!(p.contains("`Bash`") && p.contains("make") && p.contains("risk: medium"));
        assert!(p.contains("built the parser") && p.contains(MARKER));
        assert_eq!(tail("héllo", 4), "llo");
    }
}
