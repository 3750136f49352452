//! A session's open requests and their answers, across floors: the session hands a
//! [`Decide`] to whoever decides (the answerer) through a [`Decider`], and gets the
//! [`Answer`] back through an [`AnswerTo`]. Both are narrow handles (ractor's
//! `DerivedActorRef`): the session never names the answerer's actor, and the answerer
//! (or a human) can send a session nothing but answers.

use std::sync::Arc;

use ractor::DerivedActorRef;
use serde_json::Value;

use crate::protocol::{Decision, PermissionScope, RiskLevel};

/// `_meta` key of an answer the research answerer gave: its note (the research
/// session, its answer line and reply, why it failed, its cost).
pub const META_RESEARCH: &str = "capfleet.research";

/// The rule name recorded when nobody could be asked.
pub const RULE_NO_HUMAN: &str = "no_human_fail_safe";

/// A request waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenRequest {
    Permission {
        req_id: String,
        tool: String,
        intent: Option<Value>,
        scope: Option<PermissionScope>,
        risk: RiskLevel,
        /// Why the risk is what it is (`_meta."capfleet.risk".why`): the content's
        /// findings; empty when it raised nothing.
        why: Vec<String>,
    },
    Ask {
        ask_id: String,
        prompt: String,
        form: Option<Value>,
    },
}

impl OpenRequest {
    pub fn id(&self) -> &str {
        match self {
            OpenRequest::Permission { req_id, .. } => req_id,
            OpenRequest::Ask { ask_id, .. } => ask_id,
        }
    }
}

/// The answer to an open request; `rule` says who decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Answer an open permission request.
    Permission {
        req_id: String,
        decision: Decision,
        rule: String,
    },
    /// Answer an open ask; `None` declines it.
    Ask {
        ask_id: String,
        value: Option<Value>,
        rule: String,
    },
    /// An answer the research answerer gave (or, failing, its fail-safe), with its
    /// note: the research session, the answer line, the reason it failed, the cost.
    /// The note goes into the answer event's `_meta` (`capfleet.research`).
    Researched { answer: Box<Answer>, note: Value },
}

/// The session that asked, seen as a taker of answers only.
pub type AnswerTo = DerivedActorRef<Answer>;

/// A request for a decision, from a session.
#[derive(Debug)]
pub struct Decide {
    /// The session's URN.
    pub urn: Arc<str>,
    /// Where the answer goes.
    pub session: AnswerTo,
    pub request: OpenRequest,
    /// The request's span in the session's turn: the decision is made under it.
    pub span: tracing::Span,
    /// The asking session's recent context: its turn's prompt and output so far, at
    /// most [`MAX_CONTEXT`] bytes (what a researcher is told).
    pub context: String,
}

/// Bytes of a session's recent context a [`Decide`] carries at most.
pub const MAX_CONTEXT: usize = 8192;

/// Whoever decides a session's requests, seen from the session.
pub type Decider = DerivedActorRef<Decide>;

/// The fail-safe answer: deny, or decline.
pub fn fail_safe(request: &OpenRequest) -> Answer {
    fail_safe_by(request, RULE_NO_HUMAN)
}

/// The fail-safe answer, with the rule that gave it.
pub fn fail_safe_by(request: &OpenRequest, rule: &str) -> Answer {
    match request {
        OpenRequest::Permission { req_id, .. } => Answer::Permission {
            req_id: req_id.clone(),
            decision: Decision::Deny,
            rule: rule.into(),
        },
        OpenRequest::Ask { ask_id, .. } => Answer::Ask {
            ask_id: ask_id.clone(),
            value: None,
            rule: rule.into(),
        },
    }
}
