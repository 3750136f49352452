//! The answerer actor: every open `cap.ask_user` and `cap.permission.request` of every
//! session comes here. A human, when one is attached, decides; with nobody to ask the
//! answer is fail-safe (deny the permission, decline the ask), and the rule that
//! decided travels with the answer into the event stream. (Policy lists and
//! `max_risk` arrive with fleets; a research agent later still.)

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::protocol::{Decision, PermissionScope, RiskLevel};
use crate::session::SessionMsg;

/// The rule name recorded when nobody could be asked.
pub const RULE_NO_HUMAN: &str = "no_human_fail_safe";
/// The rule name recorded for a human's answer.
pub const RULE_HUMAN: &str = "human";

/// A request waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenRequest {
    Permission {
        req_id: String,
        tool: String,
        intent: Option<Value>,
        scope: Option<PermissionScope>,
        risk: RiskLevel,
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

/// A question for the human, with the session to answer.
#[derive(Debug)]
pub struct HumanQuestion {
    pub urn: Arc<str>,
    pub session: ActorRef<SessionMsg>,
    pub request: OpenRequest,
}

/// Messages of the answerer.
pub enum AnswererMsg {
    Decide {
        urn: Arc<str>,
        session: ActorRef<SessionMsg>,
        request: OpenRequest,
    },
}

pub struct Answerer;

/// Start arguments: where human questions go, if a human is attached.
pub struct AnswererArgs {
    pub human: Option<mpsc::Sender<HumanQuestion>>,
}

impl Actor for Answerer {
    type Msg = AnswererMsg;
    type State = AnswererArgs;
    type Arguments = AnswererArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<AnswererMsg>,
        args: AnswererArgs,
    ) -> Result<AnswererArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<AnswererMsg>,
        msg: AnswererMsg,
        st: &mut AnswererArgs,
    ) -> Result<(), ActorProcessingErr> {
        let AnswererMsg::Decide {
            urn,
            session,
            request,
        } = msg;
        if let Some(human) = &st.human {
            let q = HumanQuestion {
                urn,
                session: session.clone(),
                request: request.clone(),
            };
            if human.send(q).await.is_ok() {
                return Ok(());
            }
            // The human went away: from now on nobody can be asked.
            st.human = None;
        }
        let _session_gone = session.cast(fail_safe(&request));
        Ok(())
    }
}

/// The fail-safe answer: deny, or decline.
pub fn fail_safe(request: &OpenRequest) -> SessionMsg {
    match request {
        OpenRequest::Permission { req_id, .. } => SessionMsg::Permission {
            req_id: req_id.clone(),
            decision: Decision::Deny,
            rule: RULE_NO_HUMAN.into(),
        },
        OpenRequest::Ask { ask_id, .. } => SessionMsg::Answer {
            ask_id: ask_id.clone(),
            value: None,
            rule: RULE_NO_HUMAN.into(),
        },
    }
}
