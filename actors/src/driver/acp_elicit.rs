//! ACP `elicitation/create` (agent -> client): a form becomes a `cap.ask_user`
//! carrying the requested JSON Schema, answered `accept` with the human's object
//! (or `decline`); a URL elicitation is declined (capfleet opens no browsers), as
//! is any mode it does not know.

use std::sync::Arc;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{CreateElicitationRequest, ElicitationMode};
use serde_json::{Value, json};

use super::acp_host::SessionHost;
use crate::rpc::Host;

pub const METHOD: &str = "elicitation/create";

/// Serve one elicitation; the answer is ACP's `CreateElicitationResponse` shape.
pub async fn elicit(
    host: &Arc<SessionHost>,
    params: Value,
    responder: Responder<Value>,
) -> Result<(), agent_client_protocol::Error> {
    let req: CreateElicitationRequest = match serde_json::from_value(params) {
        Ok(r) => r,
        Err(e) => {
            return responder.respond_with_error(
                agent_client_protocol::Error::invalid_params().data(json!(e.to_string())),
            );
        }
    };
    let answer = match &req.mode {
        ElicitationMode::Form(form) => {
            let schema = serde_json::to_value(&form.requested_schema).unwrap_or(Value::Null);
            host.ask(req.message.clone(), Some(schema)).await
        }
        ElicitationMode::Url(u) => {
            tracing::info!(url = %u.url, "URL elicitation declined");
            None
        }
        _ => None,
    };
    responder.respond(response(answer))
}

fn response(answer: Option<Value>) -> Value {
    match answer {
        Some(Value::Object(content)) => json!({ "action": "accept", "content": content }),
        _ => json!({ "action": "decline" }),
    }
}
