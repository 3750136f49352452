//! Documents people and peers write: CAP event lines, agent manifests, session
//! configs. Each one that decodes must encode back to itself.

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{SessionConfig, decode_event};

use super::{Framing, Memory, Target};

pub(super) const CAP_EVENT: Target = Target {
    name: "cap_event",
    reads: "CAP event lines (every kind of cap-protocol/v1, `_meta` and unknown fields), as a driver reads a CAP-native agent and `capfleet log` reads a journal",
    framing: Framing::JsonLines,
    seeds: &["protocol/tests/fixtures/spec/events"],
    dict: &[
        "kind",
        "cap.session.ready",
        "cap.text_chunk",
        "cap.thought_chunk",
        "cap.tool_call.started",
        "cap.tool_call.delta",
        "cap.tool_call.completed",
        "cap.plan",
        "cap.master_plan",
        "cap.ask_user",
        "cap.ask_user.answer",
        "cap.permission.request",
        "cap.permission.response",
        "cap.error",
        "cap.artifact",
        "cap.usage",
        "cap.cancel",
        "cap.fs.change",
        "cap.pty.raw_bytes",
        "cap.session.config",
        "cap.user_input.inject",
        "session_id",
        "message_id",
        "text",
        "call_id",
        "name",
        "input",
        "output_chunk",
        "status",
        "entries",
        "content",
        "priority",
        "ask_id",
        "question",
        "options",
        "value",
        "req_id",
        "tool",
        "risk",
        "decision",
        "allow_once",
        "allow_always",
        "deny",
        "code",
        "message",
        "retryable",
        "mime_type",
        "uri",
        "input_tokens",
        "output_tokens",
        "cost_usd_estimate",
        "scope",
        "turn",
        "path",
        "change",
        "bytes",
        "_meta",
        "null",
    ],
    run: cap_event,
    memory: Memory {
        fixed: 256 << 10,
        per_byte: 48,
    },
};

/// The whole input as one event (a pretty-printed one, as the spec's fixtures are),
/// then each line: decoded, or a typed error; decoded, encoded and decoded again, equal.
fn cap_event(input: &[u8]) {
    let whole = std::iter::once(input);
    for text in whole.chain(input.split(|&b| b == b'\n')) {
        let Ok(text) = std::str::from_utf8(text) else {
            continue;
        };
        if let Ok(event) = decode_event(text) {
            let encoded = serde_json::to_string(&event).expect("an event encodes");
            let again = decode_event(&encoded)
                .unwrap_or_else(|e| panic!("{encoded} does not decode back: {e}"));
            assert_eq!(again, event, "round trip of {text}");
        }
    }
}

pub(super) const MANIFEST: Target = Target {
    name: "manifest",
    reads: "agent manifests (cap-agent.toml): every section, patterns compiled as regexes, limits",
    framing: Framing::Toml,
    seeds: &["config/agents"],
    dict: &[
        "[agent]",
        "[probe]",
        "[startup]",
        "[fast_path]",
        "[pty]",
        "[parse]",
        "[capabilities]",
        "[capabilities.coding]",
        "[cost]",
        "[limits]",
        "[x-a2a]",
        "name",
        "binary",
        "profiles",
        "coding",
        "command",
        "version_pattern",
        "ready_when",
        "pattern",
        "silence_ms",
        "stream_json",
        "acp_stdio",
        "a2a_serve_at",
        "grpc",
        "cols",
        "rows",
        "idle",
        "tool_call_start",
        "ask_yes_no",
        "error_lines",
        "(?P<tool>\\w+)",
        "(",
        "\\",
        "[a-",
        "x{99999}",
        "input_per_mtok",
        "max_line_bytes",
        "true",
        "false",
        "1e9",
        "-1",
        "'",
        "\"\"\"",
        "{ pattern = \"^$\" }",
    ],
    run: manifest,
    memory: Memory {
        // Compiled patterns are bounded by the regex size limit, not the input.
        fixed: 64 << 20,
        per_byte: 256,
    },
};

/// A manifest that validates prints as TOML that validates to the same manifest.
fn manifest(input: &[u8]) {
    let Ok(src) = std::str::from_utf8(input) else {
        return;
    };
    if let Ok(v) = Manifest::parse(src, "fuzz.toml") {
        let printed = v.manifest.to_toml_string().expect("a manifest prints");
        let again = Manifest::parse(&printed, "printed.toml")
            .unwrap_or_else(|e| panic!("printed manifest does not parse: {e}\n{printed}"));
        assert_eq!(again.manifest, v.manifest, "round trip of\n{printed}");
    }
}

pub(super) const SESSION_CONFIG: Target = Target {
    name: "session_config",
    reads: "`cap.session.config` JSON (CAP_SESSION_CONFIG, a2a and speak callers): workspace, model, limits, permission mode",
    framing: Framing::Json,
    seeds: &["protocol/tests/fixtures/spec/events/7.10-session-config.json"],
    dict: &[
        "kind",
        "cap.session.config",
        "cwd",
        "model",
        "system_prompt",
        "max_turns",
        "budget_usd",
        "permission_mode",
        "none",
        "confirm",
        "interactive",
        "session_resume_id",
        "profile_config",
        "coding",
        "tools_allowed",
        "_meta",
        "null",
    ],
    run: session_config,
    memory: Memory {
        fixed: 256 << 10,
        per_byte: 48,
    },
};

fn session_config(input: &[u8]) {
    if let Ok(config) = serde_json::from_slice::<SessionConfig>(input) {
        let encoded = serde_json::to_string(&config).expect("a config encodes");
        let again: SessionConfig = serde_json::from_str(&encoded)
            .unwrap_or_else(|e| panic!("{encoded} does not decode back: {e}"));
        assert_eq!(again, config);
    }
}
