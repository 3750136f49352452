//! What a run's fleet policy leaves open — permission requests and asks — put to the
//! API's clients instead of a terminal: `GET /v1/runs/{id}/asks` lists them, `POST
//! /v1/runs/{id}/asks/{ask_id}` answers one (validated against the request: a
//! permission's decision one of those offered, an ask's answer of the shape its form
//! asks ([`super::answers`]); else `422` saying what it takes, and it stays open;
//! `409` once it was answered or timed out). While one waits, its turn is suspended, not failed;
//! after `--ask-timeout` it is answered fail-safe (deny, or decline). The answer's rule
//! — journaled with it, in the answer's `capfleet.rule` — names who gave it:
//! `remote:<token name>`, or `ask_timeout`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::protocol::Decision;
use capfleet_wire::events::{Answer, AnswerTo, OpenRequest, fail_safe_by};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use utoipa::ToSchema;

use super::error::ApiError;
use capfleet_app::notify::{Notifier, notices};
use capfleet_wire::clock::now_ms;

/// The rule of an answer the timeout gave.
pub(crate) const RULE_TIMEOUT: &str = "ask_timeout";

struct Open {
    urn: Arc<str>,
    request: OpenRequest,
    to: AnswerTo,
    created_ms: u64,
    deadline_ms: u64,
}

/// What an open question is.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AskKind {
    /// A tool waits for leave: answer with `decision`.
    Permission,
    /// The agent asks: answer with `answer`, or `decline: true`.
    Ask,
}

/// An open question of a run (`GET /v1/runs/{id}/asks`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AskView {
    /// `<session>.<request id>`: what `POST /v1/runs/{id}/asks/{ask_id}` names.
    pub ask_id: String,
    pub kind: AskKind,
    /// The asking session's URN.
    pub urn: String,
    pub created_ms: u64,
    /// When it is answered fail-safe (deny, or decline) unless answered before.
    pub deadline_ms: u64,
    /// A permission's tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What the tool would do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent: Option<Value>,
    /// A permission's risk (`low`, `medium`, `high`, `critical`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
    /// Why that risk: what the request's content raised it for (empty when the
    /// agent's own label stood).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
    /// An ask's question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// An ask's form (its `options`, if any, are the answers taken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form: Option<Value>,
}

/// The open questions of a run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AskList {
    pub asks: Vec<AskView>,
}

/// An open question of one of the server's runs (`GET /v1/asks`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunAsk {
    /// The run's id.
    pub run: String,
    /// The run's fleet.
    pub fleet: String,
    #[serde(flatten)]
    pub ask: AskView,
}

/// The open questions of every run of the server, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AllAsks {
    pub asks: Vec<RunAsk>,
}

/// How a question was closed.
#[derive(Debug, Clone)]
enum Closed {
    /// A client answered: its token's name.
    Answered(String),
    TimedOut,
    Withdrawn,
}

impl Closed {
    fn describe(&self) -> String {
        match self {
            Closed::Answered(by) => format!("answered by {by}"),
            Closed::TimedOut => "answered fail-safe at its timeout".into(),
            Closed::Withdrawn => "withdrawn (the run ended)".into(),
        }
    }
}

/// A permission's answer.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DecisionParam {
    AllowOnce,
    AllowAlways,
    Deny,
}

/// The decisions a permission request offers (CAP §7.6).
const DECISIONS: [&str; 3] = ["allow_once", "allow_always", "deny"];

/// An answer to an open question: `decision` for a permission, `answer` or `decline`
/// for an ask.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerRequest {
    /// A permission's decision (one of those offered; another is `422`).
    #[serde(default)]
    #[schema(value_type = Option<DecisionParam>)]
    pub decision: Option<String>,
    /// The value the ask's form asks for (its `oneOf` consts; for a form of several
    /// questions an object question -> answer); free text when it has no form.
    #[serde(default)]
    pub answer: Option<Value>,
    #[serde(default)]
    pub decline: bool,
}

/// What became of an answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Answered {
    pub ask_id: String,
    /// `answered`.
    pub state: String,
    /// The answering token's name (journaled as the rule `remote:<name>`).
    pub by: String,
}

/// A run's questions: the open ones, and how the others were closed.
#[derive(Default)]
pub(crate) struct Asks {
    open: Mutex<BTreeMap<String, Open>>,
    closed: Mutex<BTreeMap<String, Closed>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A question's id in the API: its session's name and the request's id (two
/// sessions may use the same request ids).
fn key(urn: &str, id: &str) -> String {
    format!("{}.{id}", urn.rsplit('/').next().unwrap_or(urn))
}

impl Asks {
    /// The open questions, oldest first.
    pub(crate) fn list(&self) -> Vec<AskView> {
        let open = lock(&self.open);
        let mut all: Vec<AskView> = open
            .iter()
            .map(|(id, o)| {
                let mut v = AskView {
                    ask_id: id.clone(),
                    kind: AskKind::Ask,
                    urn: o.urn.to_string(),
                    created_ms: o.created_ms,
                    deadline_ms: o.deadline_ms,
                    tool: None,
                    intent: None,
                    risk: None,
                    why: Vec::new(),
                    prompt: None,
                    form: None,
                };
                match &o.request {
                    OpenRequest::Permission {
                        tool,
                        intent,
                        risk,
                        why,
                        ..
                    } => {
                        v.kind = AskKind::Permission;
                        v.tool = Some(tool.clone());
                        v.intent.clone_from(intent);
                        v.risk = Some(risk.as_str().to_owned());
                        v.why.clone_from(why);
                    }
                    OpenRequest::Ask { prompt, form, .. } => {
                        v.prompt = Some(prompt.clone());
                        v.form.clone_from(form);
                    }
                }
                v
            })
            .collect();
        all.sort_by_key(|v| v.created_ms);
        all
    }

    /// Answer question `id` with `body`, on behalf of `by`.
    pub(crate) fn answer(
        &self,
        id: &str,
        body: &AnswerRequest,
        by: &str,
    ) -> Result<Answered, ApiError> {
        let mut open = lock(&self.open);
        let Some(o) = open.get(id) else {
            return Err(match lock(&self.closed).get(id) {
                Some(how) => ApiError::AskClosed {
                    what: format!("{id} was {}", how.describe()),
                    answered_by: match how {
                        Closed::Answered(by) => Some(by.clone()),
                        Closed::TimedOut | Closed::Withdrawn => None,
                    },
                },
                None => ApiError::NoAsk(id.to_owned()),
            });
        };
        let rule = format!("remote:{by}");
        let answer = match &o.request {
            OpenRequest::Permission { req_id, .. } => Answer::Permission {
                req_id: req_id.clone(),
                decision: decision(body)?,
                rule,
            },
            OpenRequest::Ask { ask_id, form, .. } => Answer::Ask {
                ask_id: ask_id.clone(),
                value: ask_value(body, form.as_ref())?,
                rule,
            },
        };
        let o = open
            .remove(id)
            .ok_or_else(|| ApiError::NoAsk(id.to_owned()))?;
        drop(open);
        lock(&self.closed).insert(id.to_owned(), Closed::Answered(by.to_owned()));
        let _session_gone = o.to.cast(answer);
        tracing::info!(ask = %id, by, "answered");
        Ok(Answered {
            ask_id: id.to_owned(),
            state: "answered".into(),
            by: by.to_owned(),
        })
    }

    fn add(&self, q: HumanQuestion, timeout: Duration) -> String {
        let id = key(&q.urn, q.request.id());
        let created_ms = now_ms();
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        lock(&self.open).insert(
            id.clone(),
            Open {
                urn: q.urn,
                request: q.request,
                to: q.session,
                created_ms,
                deadline_ms: created_ms.saturating_add(timeout_ms),
            },
        );
        id
    }

    /// The run has ended: what was still open is withdrawn.
    pub(crate) fn withdraw_all(&self) {
        let open = std::mem::take(&mut *lock(&self.open));
        let mut closed = lock(&self.closed);
        for id in open.into_keys() {
            closed.insert(id, Closed::Withdrawn);
        }
    }

    /// Nobody answered in time: the fail-safe answer.
    fn expire(&self, id: &str) {
        let Some(o) = lock(&self.open).remove(id) else {
            return;
        };
        lock(&self.closed).insert(id.to_owned(), Closed::TimedOut);
        let answer = fail_safe_by(&o.request, RULE_TIMEOUT);
        tracing::warn!(ask = %id, "no answer in time: answered fail-safe");
        let _session_gone = o.to.cast(answer);
    }
}

/// A permission's answer: a decision among those offered.
fn decision(body: &AnswerRequest) -> Result<Decision, ApiError> {
    let misfit = |message: String| ApiError::InvalidAnswer {
        message,
        expected: json!({"decision": {"enum": DECISIONS}}),
    };
    if body.answer.is_some() || body.decline {
        return Err(misfit(
            "a permission request takes a `decision`, not an `answer` or `decline`".into(),
        ));
    }
    let Some(said) = &body.decision else {
        return Err(misfit(format!(
            "`decision` is required: one of {}",
            DECISIONS.join(", ")
        )));
    };
    match serde_json::from_value(Value::String(said.clone())) {
        Ok(DecisionParam::AllowOnce) => Ok(Decision::AllowOnce),
        Ok(DecisionParam::AllowAlways) => Ok(Decision::AllowAlways),
        Ok(DecisionParam::Deny) => Ok(Decision::Deny),
        Err(_) => Err(misfit(format!(
            "`decision` `{said}` is not offered: one of {}",
            DECISIONS.join(", ")
        ))),
    }
}

/// An ask's answer: declined, or a value its form takes.
fn ask_value(body: &AnswerRequest, form: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let expected = || json!({"answer": form.cloned().unwrap_or_else(|| json!({"type": ["string", "number", "boolean"]})), "decline": true});
    let misfit = |message: String| ApiError::InvalidAnswer {
        message,
        expected: expected(),
    };
    if body.decision.is_some() {
        return Err(misfit(
            "an ask takes an `answer` (or `decline: true`), not a `decision`".into(),
        ));
    }
    if body.decline {
        return Ok(None);
    }
    let value = body
        .answer
        .as_ref()
        .filter(|v| !v.is_null())
        .ok_or_else(|| {
            misfit(match form {
                Some(f) => format!(
                    "`answer` (or `decline: true`) is required: {}",
                    super::answers::describe(f)
                ),
                None => "`answer` (or `decline: true`) is required: free text".into(),
            })
        })?;
    super::answers::check(form, value).map_err(misfit)?;
    Ok(Some(value.clone()))
}

/// Where a question put to the clients is notified.
pub(crate) struct Notify {
    pub notifier: Notifier,
    pub run: String,
    pub fleet: String,
}

/// Take the run's questions until the run ends, each one notified, and answered
/// fail-safe after `timeout` unless a client answers first.
pub(crate) async fn take(
    asks: Arc<Asks>,
    mut questions: mpsc::Receiver<HumanQuestion>,
    timeout: Duration,
    to: Notify,
) {
    while let Some(q) = questions.recv().await {
        let ask = key(&q.urn, q.request.id());
        let answer = format!("/v1/runs/{}/asks/{ask}", to.run);
        to.notifier
            .send(&notices::waiting(&q, &to.run, &to.fleet, Some(&answer)));
        let id = asks.add(q, timeout);
        let asks = asks.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            asks.expire(&id);
        });
    }
}
