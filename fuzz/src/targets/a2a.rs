//! What an A2A peer sends: its agent card, and each response's server-sent events
//! (eventsource-stream's parser, then the frame mapper of either spelling).

use capfleet_wire::bindings::a2a::{Card, FrameMapper};
use capfleet_wire::bindings::sse::lines;
use capfleet_wire::process::DEFAULT_MAX_LINE;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;

use super::{Framing, Memory, Target};

/// The artifact cap here: small, so that cut artifacts are common.
const MAX_ARTIFACT: usize = 4096;
/// The event bound: the driver's by default (the manifest's line bound), so that a
/// long event trickled in small reads costs here what it would cost the engine.
const MAX_EVENT: usize = DEFAULT_MAX_LINE;

const WORDS: &[&str] = &[
    "jsonrpc",
    "id",
    "result",
    "error",
    "code",
    "message",
    "task",
    "statusUpdate",
    "artifactUpdate",
    "kind",
    "status-update",
    "artifact-update",
    "status",
    "state",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
    "TASK_STATE_CANCELED",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "canceled",
    "failed",
    "final",
    "taskId",
    "contextId",
    "messageId",
    "role",
    "ROLE_AGENT",
    "agent",
    "parts",
    "text",
    "data",
    "_meta",
    "cap.kind",
    "cap.usage",
    "cap.permission.request",
    "cap.ask_user",
    "cap.tool_call.started",
    "artifact",
    "artifactId",
    "name",
    "append",
    "lastChunk",
    "mediaType",
    "metadata",
    "mimeType",
    "coderAgent",
    "tool-call-confirmation",
    "request",
    "callId",
];

pub(super) const SSE: Target = Target {
    name: "a2a_sse",
    reads: "an A2A peer's streamed responses: SSE framing (data, event, id, retry, comments, CR/LF variants), JSON-RPC results and errors of the 1.0 and 0.3 spellings, CAP data parts, artifacts in chunks",
    framing: Framing::Sse,
    seeds: &["fuzz/seeds/a2a_sse"],
    dict: WORDS,
    run: sse,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 48,
    },
};

/// The bytes in chunks of 1 to 64 (the first byte picks) through the engine's SSE line
/// cutter (`bindings::sse::lines`, at most [`MAX_EVENT`] bytes an event) and parser, each
/// event's data to both mappers (with and without the CAP extension).
fn sse(input: &[u8]) {
    let chunk = 1 + input.first().map_or(0, |b| usize::from(*b) % 64);
    let pieces: Vec<Result<&[u8], std::convert::Infallible>> =
        input.chunks(chunk).map(Ok).collect();
    let mut events = lines(futures::stream::iter(pieces), MAX_EVENT).eventsource();
    let mut cap = FrameMapper::new(false, MAX_ARTIFACT);
    let mut plain = FrameMapper::new(true, MAX_ARTIFACT);
    let mut out = Vec::new();
    futures::executor::block_on(async {
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let Ok(frame) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            cap.on_frame(&frame, &mut out);
            plain.on_frame(&frame, &mut out);
            out.clear();
        }
    });
}

pub(super) const CARD: Target = Target {
    name: "a2a_card",
    reads: "an A2A peer's agent card (1.0 `supportedInterfaces`, 0.3 `url` / `preferredTransport`), its extensions and security schemes",
    framing: Framing::Json,
    seeds: &["fuzz/seeds/a2a_card"],
    dict: &[
        "name",
        "description",
        "version",
        "capabilities",
        "streaming",
        "extensions",
        "uri",
        "required",
        "cap-protocol/v1",
        "supportedInterfaces",
        "url",
        "protocolBinding",
        "protocolVersion",
        "JSONRPC",
        "GRPC",
        "HTTP+JSON",
        "1.0",
        "0.3.0",
        "preferredTransport",
        "additionalInterfaces",
        "transport",
        "securitySchemes",
        "httpAuthSecurityScheme",
        "apiKeySecurityScheme",
        "scheme",
        "Bearer",
        "bearer",
        "type",
        "http",
        "apiKey",
        "in",
        "header",
        "security",
        "securityRequirements",
        "skills",
        "id",
        "tags",
    ],
    run: card,
    memory: Memory {
        fixed: 256 << 10,
        per_byte: 32,
    },
};

fn card(input: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<Value>(input) {
        drop(Card::parse(
            "http://127.0.0.1:7000/.well-known/agent-card.json",
            &v,
        ));
    }
}
