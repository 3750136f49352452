//! The event-kind table (core §7, coding §4.6/§6): wire name, direction, required
//! fields and vocabulary-checked fields of every CAP core event, as data.
//!
//! The decoder ([`super::decode`]) validates frames against this table and the
//! conformance tests iterate it; nothing else spells these rules.

use super::vocab::{
    CancelScope, Channel, Decision, Direction, FsEvent, PermissionMode, PermissionScope,
    PlanStatus, Priority, RiskLevel, StopReason,
};

/// Every core event kind. Ordered like [`KINDS`] (`KINDS[k as usize].id == k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `cap.session.ready` (core §7.0.0).
    SessionReady,
    /// `cap.text_chunk` (core §7.1).
    TextChunk,
    /// `cap.tool_call.start` (core §7.2).
    ToolCallStart,
    /// `cap.tool_call.delta` (core §7.2).
    ToolCallDelta,
    /// `cap.tool_call.end` (core §7.2).
    ToolCallEnd,
    /// `cap.plan` (core §7.3).
    Plan,
    /// `cap.thought` (core §7.4).
    Thought,
    /// `cap.ask_user` (core §7.5).
    AskUser,
    /// `cap.permission.request` (core §7.6).
    PermissionRequest,
    /// `cap.usage` (core §7.9).
    Usage,
    /// `cap.error` (core §7.11).
    Error,
    /// `cap.artifact` (coding §6).
    Artifact,
    /// `cap.fs.change` (coding §4.6).
    FsChange,
    /// `cap.pty.raw_bytes` (core §7.12).
    PtyRawBytes,
    /// `cap.user_input.inject` (core §7.7).
    UserInputInject,
    /// `cap.cancel` (core §7.8).
    Cancel,
    /// `cap.session.config` (core §7.10).
    SessionConfig,
    /// `cap.ask_user.answer` (core §7.5).
    AskUserAnswer,
    /// `cap.permission.response` (core §7.6).
    PermissionResponse,
}

/// A field whose value must be one of a closed vocabulary (when present).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabField {
    /// The field's key, e.g. `channel`.
    pub field: &'static str,
    /// The wire values it may take.
    pub allowed: &'static [&'static str],
}

/// Rules for the objects of an array field (e.g. `cap.plan.entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NestedSpec {
    /// The array field, e.g. `entries`.
    pub field: &'static str,
    /// Keys every element must have.
    pub required: &'static [&'static str],
    /// Keys of each element checked against a vocabulary when present.
    pub vocab: &'static [VocabField],
}

/// One row of the kind table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSpec {
    /// The kind this row describes (its index in [`KINDS`]).
    pub id: EventKind,
    /// The wire name carried in `"kind"`.
    pub kind: &'static str,
    /// Which way the kind flows.
    pub direction: Direction,
    /// Keys that must be present (any value, `null` included, unless typed).
    pub required: &'static [&'static str],
    /// Keys checked against a vocabulary when present; `null` is out of vocabulary.
    pub vocab: &'static [VocabField],
    /// Rules for the elements of an array field, if the kind has one.
    pub nested: Option<NestedSpec>,
    /// Where the kind is defined, e.g. `core §7.1` or `coding §4.6`.
    pub section: &'static str,
    /// Why `required` is what it is.
    pub note: &'static str,
}

const fn v(field: &'static str, allowed: &'static [&'static str]) -> VocabField {
    VocabField { field, allowed }
}

use Direction::{AgentToOrchestrator as A2O, OrchestratorToAgent as O2A};

/// The table: 14 agent-to-orchestrator kinds, then 5 orchestrator-to-agent kinds.
pub const KINDS: [KindSpec; 19] = [
    KindSpec {
        id: EventKind::SessionReady,
        kind: "cap.session.ready",
        direction: A2O,
        required: &[],
        vocab: &[],
        nested: None,
        section: "core §7.0.0",
        note: "session_id is OPTIONAL; version is informative",
    },
    KindSpec {
        id: EventKind::TextChunk,
        kind: "cap.text_chunk",
        direction: A2O,
        required: &["text"],
        vocab: &[v("channel", Channel::NAMES)],
        nested: None,
        section: "core §7.1",
        note: "PTY drivers have no message ids; channel absent is left unspecified",
    },
    KindSpec {
        id: EventKind::ToolCallStart,
        kind: "cap.tool_call.start",
        direction: A2O,
        required: &["call_id", "name"],
        vocab: &[],
        nested: None,
        section: "core §7.2",
        note: "input is opaque and OPTIONAL",
    },
    KindSpec {
        id: EventKind::ToolCallDelta,
        kind: "cap.tool_call.delta",
        direction: A2O,
        required: &["call_id", "output_chunk"],
        vocab: &[],
        nested: None,
        section: "core §7.2",
        note: "a delta without its chunk carries nothing",
    },
    KindSpec {
        id: EventKind::ToolCallEnd,
        kind: "cap.tool_call.end",
        direction: A2O,
        required: &["call_id"],
        vocab: &[],
        nested: None,
        section: "core §7.2",
        note: "PTY drivers see no result payload, so output/is_error/duration_ms are OPTIONAL",
    },
    KindSpec {
        id: EventKind::Plan,
        kind: "cap.plan",
        direction: A2O,
        required: &["entries"],
        vocab: &[],
        nested: Some(NestedSpec {
            field: "entries",
            required: &["id", "content", "status"],
            vocab: &[
                v("status", PlanStatus::NAMES),
                v("priority", Priority::NAMES),
            ],
        }),
        section: "core §7.3, §10.2",
        note: "full state: entries required (may be empty); priority OPTIONAL, never defaulted",
    },
    KindSpec {
        id: EventKind::Thought,
        kind: "cap.thought",
        direction: A2O,
        required: &["text"],
        vocab: &[],
        nested: None,
        section: "core §7.4",
        note: "message_id OPTIONAL as for text_chunk",
    },
    KindSpec {
        id: EventKind::AskUser,
        kind: "cap.ask_user",
        direction: A2O,
        required: &["ask_id", "prompt"],
        vocab: &[],
        nested: None,
        section: "core §7.5",
        note: "form and timeout_seconds OPTIONAL (timeout may be null)",
    },
    KindSpec {
        id: EventKind::PermissionRequest,
        kind: "cap.permission.request",
        direction: A2O,
        required: &["req_id", "tool", "risk_level"],
        vocab: &[
            v("scope", PermissionScope::NAMES),
            v("risk_level", RiskLevel::NAMES),
        ],
        nested: None,
        section: "core §7.6, §3.3",
        note: "§3.3: risk_level is never omitted; intent and scope OPTIONAL",
    },
    KindSpec {
        id: EventKind::Usage,
        kind: "cap.usage",
        direction: A2O,
        required: &[],
        vocab: &[v("stop_reason", StopReason::NAMES)],
        nested: None,
        section: "core §7.9",
        note: "progress emissions may be partial; model_id is unknown on some bindings",
    },
    KindSpec {
        id: EventKind::Error,
        kind: "cap.error",
        direction: A2O,
        required: &["code", "message"],
        vocab: &[],
        nested: None,
        section: "core §7.11, §14.2",
        note: "code is an open vocabulary (binding codes survive as ErrorKind::Other)",
    },
    KindSpec {
        id: EventKind::Artifact,
        kind: "cap.artifact",
        direction: A2O,
        required: &["artifact_id", "mime_type"],
        vocab: &[],
        nested: None,
        section: "coding §6",
        note: "uri and content are alternatives, both OPTIONAL",
    },
    KindSpec {
        id: EventKind::FsChange,
        kind: "cap.fs.change",
        direction: A2O,
        required: &["subscription_id", "path", "event"],
        vocab: &[v("event", FsEvent::NAMES)],
        nested: None,
        section: "coding §4.6",
        note: "new_path only on renamed",
    },
    KindSpec {
        id: EventKind::PtyRawBytes,
        kind: "cap.pty.raw_bytes",
        direction: A2O,
        required: &["bytes_b64"],
        vocab: &[],
        nested: None,
        section: "core §7.12",
        note: "one chunk per event",
    },
    KindSpec {
        id: EventKind::UserInputInject,
        kind: "cap.user_input.inject",
        direction: O2A,
        required: &["content"],
        vocab: &[],
        nested: None,
        section: "core §7.7",
        note: "content blocks are opaque to core",
    },
    KindSpec {
        id: EventKind::Cancel,
        kind: "cap.cancel",
        direction: O2A,
        required: &["scope"],
        vocab: &[v("scope", CancelScope::NAMES)],
        nested: None,
        section: "core §7.8",
        note: "reason OPTIONAL",
    },
    KindSpec {
        id: EventKind::SessionConfig,
        kind: "cap.session.config",
        direction: O2A,
        required: &["cwd"],
        vocab: &[v("permission_mode", PermissionMode::NAMES)],
        nested: None,
        section: "core §7.10, §3.3",
        note: "§3.3: the driver applies cwd before spawning, so cwd is required",
    },
    KindSpec {
        id: EventKind::AskUserAnswer,
        kind: "cap.ask_user.answer",
        direction: O2A,
        required: &["ask_id", "value"],
        vocab: &[],
        nested: None,
        section: "core §7.5",
        note: "value is opaque (validated against the form by the receiver)",
    },
    KindSpec {
        id: EventKind::PermissionResponse,
        kind: "cap.permission.response",
        direction: O2A,
        required: &["req_id", "decision"],
        vocab: &[v("decision", Decision::NAMES)],
        nested: None,
        section: "core §7.6",
        note: "",
    },
];

impl EventKind {
    /// This kind's row of [`KINDS`].
    pub fn spec(self) -> &'static KindSpec {
        &KINDS[self as usize]
    }

    /// The wire name, e.g. `cap.text_chunk`.
    pub fn wire(self) -> &'static str {
        self.spec().kind
    }

    /// Which way events of this kind flow.
    pub fn direction(self) -> Direction {
        self.spec().direction
    }

    /// Looks a wire name up in the table.
    pub fn from_wire(kind: &str) -> Option<Self> {
        kind_spec(kind).map(|s| s.id)
    }
}

/// The table row for a wire name, `None` for kinds outside core.
pub fn kind_spec(kind: &str) -> Option<&'static KindSpec> {
    KINDS.iter().find(|s| s.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order() {
        for (i, s) in KINDS.iter().enumerate() {
            assert_eq!(
                s.id as usize, i,
                "KINDS row {i} ({}) out of enum order",
                s.kind
            );
            assert_eq!(EventKind::from_wire(s.kind), Some(s.id));
            for f in s.vocab {
                assert!(!f.allowed.is_empty());
            }
        }
        assert_eq!(EventKind::from_wire("cap.nope"), None);
    }
}
