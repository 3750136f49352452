//! What a run's fleet policy leaves open — permission requests and asks — put to the
//! API's clients instead of a terminal: `GET /v1/runs/{id}/asks` lists them, `POST
//! /v1/runs/{id}/asks/{ask_id}` answers one (validated against the request; `409` once
//! it was answered or timed out). While one waits, its turn is suspended, not failed;
//! after `--ask-timeout` it is answered fail-safe (deny, or decline). The answer's rule
//! — journaled with it, in the answer's `capfleet.rule` — names who gave it:
//! `remote:<token name>`, or `ask_timeout`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use capfleet_actors::answerer::HumanQuestion;
use capfleet_actors::events::requests::{Answer, AnswerTo, OpenRequest, fail_safe_by};
use capfleet_actors::protocol::Decision;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::error::ApiError;
use super::state::now_ms;

/// The rule of an answer the timeout gave.
pub(crate) const RULE_TIMEOUT: &str = "ask_timeout";

struct Open {
    urn: Arc<str>,
    request: OpenRequest,
    to: AnswerTo,
    created_ms: u64,
    deadline_ms: u64,
}

/// A run's questions: the open ones, and how the others were closed.
#[derive(Default)]
pub(crate) struct Asks {
    open: Mutex<BTreeMap<String, Open>>,
    closed: Mutex<BTreeMap<String, &'static str>>,
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
    pub(crate) fn list(&self) -> Vec<Value> {
        let open = lock(&self.open);
        let mut all: Vec<Value> = open
            .iter()
            .map(|(id, o)| {
                let mut v = match &o.request {
                    OpenRequest::Permission {
                        tool, intent, risk, ..
                    } => json!({"kind": "permission", "tool": tool, "intent": intent, "risk": risk.as_str(),
                        "answer_with": {"decision": ["allow_once", "allow_always", "deny"]}}),
                    OpenRequest::Ask { prompt, form, .. } => json!({"kind": "ask", "prompt": prompt, "form": form,
                        "answer_with": {"answer": "a value (one of the form's options, if it has any)", "decline": true}}),
                };
                v["ask_id"] = json!(id);
                v["urn"] = json!(o.urn);
                v["created_ms"] = json!(o.created_ms);
                v["deadline_ms"] = json!(o.deadline_ms);
                v
            })
            .collect();
        all.sort_by_key(|v| v["created_ms"].as_u64());
        all
    }

    /// Answer question `id` with `body`, on behalf of `by`.
    pub(crate) fn answer(&self, id: &str, body: &Value, by: &str) -> Result<Value, ApiError> {
        let mut open = lock(&self.open);
        let Some(o) = open.get(id) else {
            return Err(match lock(&self.closed).get(id) {
                Some(how) => ApiError::AskClosed(format!("{id} was {how}")),
                None => ApiError::NoAsk(id.to_owned()),
            });
        };
        let rule = format!("remote:{by}");
        let answer = match &o.request {
            OpenRequest::Permission { req_id, .. } => {
                let d = body["decision"].as_str().unwrap_or_default();
                let decision = Decision::parse(d).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "`decision` `{d}`: one of allow_once, allow_always, deny"
                    ))
                })?;
                Answer::Permission {
                    req_id: req_id.clone(),
                    decision,
                    rule,
                }
            }
            OpenRequest::Ask { ask_id, form, .. } => {
                let value = if body["decline"] == json!(true) {
                    None
                } else {
                    let v = body.get("answer").filter(|v| !v.is_null()).ok_or_else(|| {
                        ApiError::BadRequest("`answer` (or `decline: true`) is required".into())
                    })?;
                    let options = form.as_ref().and_then(|f| f["options"].as_array());
                    if let Some(opts) = options {
                        let fits = opts
                            .iter()
                            .any(|o| o == v || o["label"] == *v || o["value"] == *v);
                        if !fits {
                            return Err(ApiError::BadRequest(format!(
                                "`answer` {v}: not one of the options {}",
                                Value::Array(opts.clone())
                            )));
                        }
                    }
                    Some(v.clone())
                };
                Answer::Ask {
                    ask_id: ask_id.clone(),
                    value,
                    rule,
                }
            }
        };
        let o = open
            .remove(id)
            .ok_or_else(|| ApiError::NoAsk(id.to_owned()))?;
        drop(open);
        lock(&self.closed).insert(id.to_owned(), "answered");
        let _session_gone = o.to.cast(answer);
        tracing::info!(ask = %id, by, "answered");
        Ok(json!({"ask_id": id, "state": "answered", "by": by}))
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
            closed.insert(id, "withdrawn (the run ended)");
        }
    }

    /// Nobody answered in time: the fail-safe answer.
    fn expire(&self, id: &str) {
        let Some(o) = lock(&self.open).remove(id) else {
            return;
        };
        lock(&self.closed).insert(id.to_owned(), "answered fail-safe at its timeout");
        let answer = fail_safe_by(&o.request, RULE_TIMEOUT);
        tracing::warn!(ask = %id, "no answer in time: answered fail-safe");
        let _session_gone = o.to.cast(answer);
    }
}

/// Take the run's questions until the run ends, each one answered fail-safe after
/// `timeout` unless a client answers first.
pub(crate) async fn take(
    asks: Arc<Asks>,
    mut questions: mpsc::Receiver<HumanQuestion>,
    timeout: Duration,
) {
    while let Some(q) = questions.recv().await {
        let id = asks.add(q, timeout);
        let asks = asks.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            asks.expire(&id);
        });
    }
}
