//! ACP `elicitation/create` (agent -> client): a form becomes a `cap.ask_user`
//! carrying the requested JSON Schema. Answered, it is `accept` with the answer as
//! the content (each value in the type its property asks for: a terminal gives
//! text); declined (by the human, or fail-safe with nobody to ask), `decline`;
//! withdrawn (the turn cancelled, the agent or session gone, or the agent's own
//! `$/cancel_request`), `cancel`. A URL
//! elicitation is declined (capfleet opens no browsers), as is any mode it does
//! not know.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_client_protocol::RequestCancellation;
use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAcceptAction,
    ElicitationAction, ElicitationContentValue, ElicitationMode,
};
use serde_json::{Value, json};

use super::acp_host::SessionHost;
use crate::rpc::Host;
use crate::rpc::host::Reply;

pub(super) const METHOD: &str = "elicitation/create";

/// Serve one elicitation.
pub(super) async fn elicit(
    host: &Arc<SessionHost>,
    params: Value,
    responder: Responder<Value>,
    cancel: &RequestCancellation,
) -> Result<(), agent_client_protocol::Error> {
    let req: CreateElicitationRequest = match serde_json::from_value(params) {
        Ok(r) => r,
        Err(e) => {
            return responder.respond_with_error(
                agent_client_protocol::Error::invalid_params().data(json!(e.to_string())),
            );
        }
    };
    let action = match &req.mode {
        ElicitationMode::Form(form) => {
            let schema = serde_json::to_value(&form.requested_schema).unwrap_or(Value::Null);
            let reply = tokio::select! {
                r = host.ask(req.message.clone(), Some(schema.clone())) => r,
                () = cancel.cancelled() => Reply::Withdrawn,
            };
            action_for(reply, &schema)
        }
        ElicitationMode::Url(u) => {
            tracing::info!(url = %u.url, "URL elicitation declined");
            ElicitationAction::Decline
        }
        _ => ElicitationAction::Decline,
    };
    let resp = serde_json::to_value(CreateElicitationResponse::new(action))
        .map_err(|e| agent_client_protocol::Error::internal_error().data(json!(e.to_string())))?;
    responder.respond(resp)
}

fn action_for(reply: Reply, schema: &Value) -> ElicitationAction {
    match reply {
        Reply::Answered(answer) => match content(answer, schema) {
            Some(c) => ElicitationAction::Accept(ElicitationAcceptAction::new().content(c)),
            None => {
                tracing::warn!("elicitation answer does not fit the requested schema; declined");
                ElicitationAction::Decline
            }
        },
        Reply::Declined => ElicitationAction::Decline,
        Reply::Withdrawn => ElicitationAction::Cancel,
    }
}

/// The answer as ACP content: an object whose values take the type their property
/// asks for. `None`: it cannot fit the schema.
fn content(answer: Value, schema: &Value) -> Option<BTreeMap<String, ElicitationContentValue>> {
    let Value::Object(fields) = answer else {
        return None;
    };
    fields
        .into_iter()
        .map(|(name, v)| {
            let ty = schema["properties"][&name]["type"].as_str();
            coerce(v, ty).map(|v| (name, v))
        })
        .collect()
}

fn coerce(v: Value, ty: Option<&str>) -> Option<ElicitationContentValue> {
    use ElicitationContentValue as C;
    match (ty, v) {
        (Some("integer"), Value::String(s)) => s.trim().parse().ok().map(C::Integer),
        (Some("number"), Value::String(s)) => s.trim().parse().ok().map(C::Number),
        (Some("boolean"), Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" => Some(C::Boolean(true)),
            "false" | "no" | "n" => Some(C::Boolean(false)),
            _ => None,
        },
        (Some("array"), Value::String(s)) => Some(C::StringArray(vec![s])),
        (_, v) => serde_json::from_value(v).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(reply: Reply, schema: &Value) -> Value {
        let resp = CreateElicitationResponse::new(action_for(reply, schema));
        serde_json::to_value(resp).expect("serializes")
    }

    #[test]
    fn answers_map_onto_accept_decline_cancel() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"},
            "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}}}});
        let typed = json!({"name": "Ada", "age": "36", "ok": "yes", "tags": "x"});
        assert_eq!(
            wire(Reply::Answered(typed), &schema),
            json!({"action": "accept",
                   "content": {"name": "Ada", "age": 36, "ok": true, "tags": ["x"]}})
        );
        assert_eq!(wire(Reply::Declined, &schema), json!({"action": "decline"}));
        assert_eq!(wire(Reply::Withdrawn, &schema), json!({"action": "cancel"}));
    }

    #[test]
    fn an_answer_that_cannot_fit_the_schema_is_declined() {
        let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}}});
        for bad in [
            json!({"age": "old"}),
            json!("free text"),
            json!({"age": {"y": 1}}),
        ] {
            assert_eq!(
                wire(Reply::Answered(bad.clone()), &schema),
                json!({"action": "decline"}),
                "{bad}"
            );
        }
    }
}
