//! The ACP agent side of `capfleet acp`, on the official `agent-client-protocol`
//! crate: `initialize` (with `loadSession`), `session/new`, `session/load`,
//! `session/prompt` (a turn of the hosted session, answered with its stop reason and
//! usage in `_meta`), `session/cancel`; and permissions the policy leaves open asked
//! of the client as `session/request_permission`. Handlers that wait (a turn, a load)
//! run off the SDK's dispatch loop, so a `session/cancel` is read while a turn runs.

use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::protocol::Decision;
use capfleet_engine::session::SessionError;
use capfleet_wire::events::{Answer, OpenRequest};
use capfleet_wire::events::{RunOutcome, TurnOutcome};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::host::{Ended, HostError};
use super::hosting::Hosting;
use super::wire::{self, Backlog};
use capfleet_app::one_session::refuse;

/// Who decided a permission the client answered.
const RULE_CLIENT: &str = "acp-client";

type AcpResult = Result<(), agent_client_protocol::Error>;

fn error_of(e: &HostError) -> agent_client_protocol::Error {
    let base = if e.is_invalid_params() {
        agent_client_protocol::Error::invalid_params()
    } else {
        agent_client_protocol::Error::internal_error()
    };
    base.data(json!(e.to_string()))
}

/// Serve the connection on stdio until the client closes it.
pub(super) async fn serve(
    host: Arc<Hosting>,
    backlog: Arc<Backlog>,
    questions: mpsc::Receiver<HumanQuestion>,
) -> AcpResult {
    let (h_new, h_load, h_prompt, h_cancel) =
        (host.clone(), host.clone(), host.clone(), host.clone());
    let transport = Lines::new(
        wire::outgoing(tokio::io::stdout(), backlog),
        wire::incoming(tokio::io::stdin()),
    );
    Agent
        .v1()
        .name("capfleet")
        .on_receive_request(
            async move |init: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                let version = if init.protocol_version < ProtocolVersion::V1 {
                    init.protocol_version
                } else {
                    ProtocolVersion::V1
                };
                responder.respond(
                    InitializeResponse::new(version)
                        .agent_capabilities(AgentCapabilities::new().load_session(true))
                        .agent_info(Implementation::new("capfleet", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let host = h_new.clone();
                let cx2 = cx.clone();
                cx.spawn(async move {
                    match host.open_new(&req.cwd, &cx2).await {
                        Ok(id) => responder.respond(NewSessionResponse::new(id)),
                        Err(e) => responder.respond_with_error(error_of(&e)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let host = h_load.clone();
                let cx2 = cx.clone();
                cx.spawn(async move {
                    let id = req.session_id.to_string();
                    match host.open_loaded(&id, &req.cwd, &cx2).await {
                        Ok(()) => responder.respond(LoadSessionResponse::new()),
                        Err(e) => responder.respond_with_error(error_of(&e)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let host = h_prompt.clone();
                cx.spawn(async move {
                    let id = req.session_id.to_string();
                    match host.prompt(&id, prompt_text(&req.prompt)).await {
                        Ok(ended) => answer(ended, responder),
                        Err(e) => responder.respond_with_error(error_of(&e)),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                h_cancel.cancel(&n.session_id.to_string());
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Client>| {
            tokio::select! {
                () = permissions(host, questions, cx.clone()) => {}
                () = cx.incoming_closed() => {}
            }
            Ok(())
        })
        .await
}

/// The prompt's text: text blocks as they are, resources by their text or link.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|b| match serde_json::to_value(b).ok()? {
            v if v["type"] == "text" => v["text"].as_str().map(str::to_owned),
            v if v["type"] == "resource_link" => v["uri"].as_str().map(|u| format!("<{u}>")),
            v if v["type"] == "resource" => v["resource"]["text"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    parts.join("\n")
}

/// The turn's end as the `session/prompt` response: its stop reason, usage in
/// `_meta`; a failed turn is an error response saying why.
fn answer(ended: Ended, responder: Responder<PromptResponse>) -> AcpResult {
    let mut meta = serde_json::Map::new();
    if let Some(u) = ended.usage() {
        let usage = json!({
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens,
            "cache_creation_input_tokens": u.cache_creation_tokens,
            "cost_usd": u.cost_usd,
        });
        meta.insert("capfleet.usage".into(), usage);
    }
    let failed = |why: String| responder_error(json!(why));
    let stop = match &ended {
        Ended::Session { result, last_error } => match result {
            Ok(r) => match r.outcome {
                TurnOutcome::Completed => StopReason::EndTurn,
                TurnOutcome::Cancelled => StopReason::Cancelled,
                TurnOutcome::Failed => {
                    let why = last_error
                        .clone()
                        .unwrap_or_else(|| "the turn failed".into());
                    return responder.respond_with_error(failed(why));
                }
            },
            Err(SessionError::MaxTurns { .. }) => StopReason::MaxTurnRequests,
            Err(e) => return responder.respond_with_error(failed(e.to_string())),
        },
        Ended::Fleet(end) => {
            if !end.run_id.is_empty() {
                meta.insert("capfleet.run".into(), end.meta());
            }
            match (end.outcome, &end.error) {
                (Some(RunOutcome::Completed), _) => StopReason::EndTurn,
                (Some(RunOutcome::Interrupted), _) => StopReason::Cancelled,
                (_, why) => {
                    let why = why
                        .clone()
                        .unwrap_or_else(|| "the fleet's run failed".into());
                    return responder.respond_with_error(failed(why));
                }
            }
        }
    };
    let meta = (!meta.is_empty()).then_some(meta);
    responder.respond(PromptResponse::new(stop).meta(meta))
}

/// An internal error carrying `data` (why the turn failed).
fn responder_error(data: Value) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(data)
}

/// What the tree leaves open goes to the client: permissions as
/// `session/request_permission` (each waited for off this loop); asks, which ACP v1
/// cannot put to a client, are declined fail-safe.
async fn permissions(
    host: Arc<Hosting>,
    mut questions: mpsc::Receiver<HumanQuestion>,
    cx: ConnectionTo<Client>,
) {
    while let Some(q) = questions.recv().await {
        let Some(id) = host.session_of(&q.urn) else {
            refuse(q, "no ACP session of the client holds it");
            continue;
        };
        put_to_client(&cx, &id, q);
    }
}

/// Put `q` to the client as asked in session `id`, waited for off the caller's loop;
/// an ask is declined fail-safe (ACP v1 cannot put a question to a client).
pub(super) fn put_to_client(cx: &ConnectionTo<Client>, id: &str, q: HumanQuestion) {
    if matches!(q.request, OpenRequest::Ask { .. }) {
        refuse(q, "ACP v1 has no way to ask the client a question");
        return;
    }
    let (cx2, id) = (cx.clone(), id.to_owned());
    let spawned = cx.spawn(async move {
        ask_client(&cx2, &id, q).await;
        Ok(())
    });
    if let Err(e) = spawned {
        tracing::warn!("the connection is closing: {e}");
    }
}

async fn ask_client(cx: &ConnectionTo<Client>, id: &str, q: HumanQuestion) {
    let OpenRequest::Permission {
        req_id,
        tool,
        intent,
        ..
    } = &q.request
    else {
        return;
    };
    let request = json!({
        "sessionId": id,
        "toolCall": {
            "toolCallId": req_id,
            "title": tool,
            "status": "pending",
            "rawInput": intent.clone().unwrap_or(Value::Null),
        },
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Allow always", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
    });
    let request: RequestPermissionRequest = match serde_json::from_value(request) {
        Ok(r) => r,
        Err(e) => return refuse(q, &format!("the permission request did not encode: {e}")),
    };
    let answered: Result<RequestPermissionResponse, _> =
        cx.send_request(request).block_task().await;
    let decision = match answered.map(|r| r.outcome) {
        Ok(RequestPermissionOutcome::Selected(s)) => match s.option_id.to_string().as_str() {
            "allow_once" => Decision::AllowOnce,
            "allow_always" => Decision::AllowAlways,
            _ => Decision::Deny,
        },
        Ok(_) => Decision::Deny,
        Err(e) => {
            tracing::warn!(request = %req_id, "the client did not answer the permission: {e}; denied");
            Decision::Deny
        }
    };
    let reply = Answer::Permission {
        req_id: req_id.clone(),
        decision,
        rule: RULE_CLIENT.into(),
    };
    let _session_gone = q.session.cast(reply);
}
