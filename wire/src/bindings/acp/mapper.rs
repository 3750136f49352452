//! `session/update` -> CAP events (Appendix C.3).
//!
//! `agent_message_chunk` -> `cap.text_chunk`, `agent_thought_chunk` -> `cap.thought`,
//! `tool_call` -> `cap.tool_call.start` (+ `end` when it arrives finished; each `diff`
//! content, once per call and file, also a coding `diff` `cap.artifact`),
//! `tool_call_update` -> `cap.tool_call.delta` with new content, `cap.tool_call.end`
//! once completed/failed (preceded by a `start` when the agent never sent the
//! `tool_call`: Gemini CLI announces a gated call only in its permission request), `plan` -> `cap.plan`, `usage_update` kept for the turn's one `cap.usage`
//! ([`super::usage`]). A kind
//! this build does not know (or cannot parse) is kept verbatim in the `_meta` of a
//! system-channel `cap.text_chunk` with empty text, and counted.

use agent_client_protocol::v1::schema::{
    ContentBlock, PlanEntryPriority, PlanEntryStatus, SessionNotification, SessionUpdate,
    ToolCallContent, ToolCallStatus,
};
use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::usage::TurnUsage;
use crate::protocol::{CapEvent, Channel, HasMeta, PlanEntry, PlanStatus, Priority, StopReason};

/// The `_meta` key carrying an unmapped update verbatim.
pub(crate) const META_UNMAPPED: &str = "acp.session_update";

/// Maps the `session/update` notifications of one ACP session.
#[derive(Debug, Default)]
pub struct AcpMapper {
    /// Updates kept verbatim because their kind is not mapped.
    pub unmapped: u64,
    /// Updates of kinds with no CAP event (mode, commands, ...), dropped.
    pub ignored: u64,
    /// A message id for chunks the agent sends without one, per turn.
    turn: u64,
    /// Tool calls started this turn (at most [`MAX_TRACKED_CALLS`]).
    started: HashSet<String>,
    /// Diffs already turned into artifacts this turn: (call, path, new text length).
    diffs: HashSet<(String, std::path::PathBuf, usize)>,
    /// The usage reports, folded per turn.
    usage: TurnUsage,
}

/// Tool call ids remembered per turn; past it, updates of unseen ids get no `start`.
const MAX_TRACKED_CALLS: usize = 4096;

fn text_of(block: &ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Text(t) => Some(t.text.clone()),
        _ => None,
    }
}

fn content_text(content: &[ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => text_of(&c.content),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

fn plan_status(s: &PlanEntryStatus) -> PlanStatus {
    match s {
        PlanEntryStatus::InProgress => PlanStatus::InProgress,
        PlanEntryStatus::Completed => PlanStatus::Completed,
        _ => PlanStatus::Pending,
    }
}

fn priority(p: &PlanEntryPriority) -> Priority {
    match p {
        PlanEntryPriority::High => Priority::High,
        PlanEntryPriority::Low => Priority::Low,
        _ => Priority::Medium,
    }
}

impl AcpMapper {
    pub fn new() -> Self {
        AcpMapper::default()
    }

    /// A new turn starts (chunks without a message id are grouped per turn).
    pub fn next_turn(&mut self) {
        self.turn += 1;
        self.started.clear();
        self.diffs.clear();
    }

    /// The turn's one `cap.usage` (its `usage_update`s and the response's tokens),
    /// if it reported any.
    pub fn end_turn(
        &mut self,
        tokens: Option<&agent_client_protocol::v1::schema::Usage>,
        stop: StopReason,
    ) -> Option<CapEvent> {
        self.usage.end_turn(tokens, stop)
    }

    /// Remember a started call; true if it was not known yet.
    fn start(&mut self, id: &str) -> bool {
        self.started.len() < MAX_TRACKED_CALLS && self.started.insert(id.to_owned())
    }

    fn message_id(&self, id: Option<String>) -> String {
        id.unwrap_or_else(|| format!("acp-turn-{}", self.turn))
    }

    /// The CAP events of one `session/update` notification's params.
    pub fn on_update(&mut self, params: &Value) -> Vec<CapEvent> {
        let Ok(n) = serde_json::from_value::<SessionNotification>(params.clone()) else {
            return vec![self.unmapped(params)];
        };
        match n.update {
            SessionUpdate::AgentMessageChunk(c) => text_of(&c.content)
                .map(|t| CapEvent::text(self.message_id(c.message_id.map(|m| m.to_string())), t))
                .into_iter()
                .collect(),
            SessionUpdate::AgentThoughtChunk(c) => text_of(&c.content)
                .map(|t| CapEvent::thought(self.message_id(c.message_id.map(|m| m.to_string())), t))
                .into_iter()
                .collect(),
            SessionUpdate::ToolCall(tc) => {
                let id = tc.tool_call_id.to_string();
                let name = tc.name.clone().unwrap_or_else(|| tc.title.clone());
                let input = tc
                    .raw_input
                    .clone()
                    .unwrap_or_else(|| json!({ "title": tc.title }));
                self.start(&id);
                let mut out = vec![CapEvent::tool_start(&id, name, input)];
                out.extend(self.diffs_of(&id, &tc.content));
                out.extend(end_of(&id, &tc.status, tc.raw_output.clone(), &tc.content));
                out
            }
            SessionUpdate::ToolCallUpdate(u) => {
                let id = u.tool_call_id.to_string();
                let content = u.fields.content.clone().unwrap_or_default();
                let mut out = Vec::new();
                if self.start(&id) {
                    let f = &u.fields;
                    let name = f.title.clone().unwrap_or_else(|| "tool".to_owned());
                    let input = f
                        .raw_input
                        .clone()
                        .unwrap_or_else(|| json!({ "title": name }));
                    out.push(CapEvent::tool_start(&id, name, input));
                }
                out.extend(self.diffs_of(&id, &content));
                out.extend(match &u.fields.status {
                    Some(s @ (ToolCallStatus::Completed | ToolCallStatus::Failed)) => {
                        end_of(&id, s, u.fields.raw_output.clone(), &content)
                    }
                    _ => {
                        let text = content_text(&content);
                        if text.is_empty() {
                            vec![]
                        } else {
                            vec![CapEvent::tool_delta(id, text)]
                        }
                    }
                });
                out
            }
            SessionUpdate::Plan(p) => {
                let entries = p
                    .entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let mut pe = PlanEntry::new(
                            format!("{}", i + 1),
                            &e.content,
                            plan_status(&e.status),
                        );
                        pe.priority = Some(priority(&e.priority));
                        pe
                    })
                    .collect();
                vec![CapEvent::plan(entries)]
            }
            SessionUpdate::UsageUpdate(u) => {
                self.usage.update(&u);
                vec![]
            }
            SessionUpdate::UserMessageChunk(_)
            | SessionUpdate::AvailableCommandsUpdate(_)
            | SessionUpdate::CurrentModeUpdate(_)
            | SessionUpdate::ConfigOptionUpdate(_)
            | SessionUpdate::SessionInfoUpdate(_) => {
                self.ignored += 1;
                vec![]
            }
            _ => vec![self.unmapped(params)],
        }
    }

    /// A `diff` artifact per `diff` content not seen yet in this call.
    fn diffs_of(&mut self, id: &str, content: &[ToolCallContent]) -> Vec<CapEvent> {
        let mut out = Vec::new();
        for (n, c) in content.iter().enumerate() {
            if let ToolCallContent::Diff(d) = c {
                let key = (id.to_owned(), d.path.clone(), d.new_text.len());
                if self.diffs.len() < MAX_TRACKED_CALLS && self.diffs.insert(key) {
                    out.push(super::diff::diff_artifact(id, n, d));
                }
            }
        }
        out
    }

    fn unmapped(&mut self, params: &Value) -> CapEvent {
        self.unmapped += 1;
        let update = params
            .get("update")
            .cloned()
            .unwrap_or_else(|| params.clone());
        let mut ev = CapEvent::text_on(Channel::System, format!("acp-turn-{}", self.turn), "");
        let mut m = Map::new();
        m.insert(META_UNMAPPED.into(), update);
        *ev.meta_mut() = Some(m);
        ev
    }
}

/// `cap.tool_call.end` when the status is final.
fn end_of(
    id: &str,
    status: &ToolCallStatus,
    raw: Option<Value>,
    content: &[ToolCallContent],
) -> Vec<CapEvent> {
    let failed = matches!(status, ToolCallStatus::Failed);
    if !failed && !matches!(status, ToolCallStatus::Completed) {
        return vec![];
    }
    let text = content_text(content);
    let output = raw.or_else(|| (!text.is_empty()).then(|| Value::String(text)));
    vec![CapEvent::tool_end(id, output, failed, None)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(u: Value) -> Value {
        json!({ "sessionId": "s1", "update": u })
    }

    #[test]
    fn c3_mapping_and_unknowns() {
        let mut m = AcpMapper::new();
        let t = m.on_update(&upd(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})));
        assert_eq!(t, vec![CapEvent::text("acp-turn-0", "hi")]);
        let th = m.on_update(&upd(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}})));
        assert!(matches!(&th[0], CapEvent::Thought(x) if x.text == "hm"));
        let s = m.on_update(&upd(json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read a", "kind": "read", "status": "pending"})));
        assert!(matches!(&s[..], [CapEvent::ToolCallStart(x)] if x.call_id == "c1"));
        let d = m.on_update(&upd(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
            "content": [{"type": "content", "content": {"type": "text", "text": "part"}}]}),
        ));
        assert!(matches!(&d[..], [CapEvent::ToolCallDelta(x)] if x.output_chunk == "part"));
        let e = m.on_update(&upd(json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "rawOutput": {"ok": 1}})));
        assert!(matches!(&e[..], [CapEvent::ToolCallEnd(x)] if x.call_id == "c1"));
        let p = m.on_update(&upd(json!({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]})));
        assert!(matches!(&p[..], [CapEvent::Plan(x)] if x.entries.len() == 1));
        let u = m.on_update(&upd(
            json!({"sessionUpdate": "usage_update", "used": 10, "size": 100}),
        ));
        assert!(u.is_empty(), "kept for the turn's end");
        let end = m.end_turn(None, StopReason::EndTurn);
        assert!(matches!(&end, Some(CapEvent::Usage(_))), "{end:?}");
        let odd = json!({"sessionUpdate": "hologram", "x": [1, 2]});
        let k = m.on_update(&upd(odd.clone()));
        assert_eq!(k[0].meta().and_then(|mm| mm.get(META_UNMAPPED)), Some(&odd));
        assert_eq!(m.unmapped, 1);
        assert!(
            m.on_update(&json!("garbage")).len() == 1,
            "never panics on junk"
        );
        assert_eq!(m.unmapped, 2);
    }

    #[test]
    fn diff_content_becomes_one_diff_artifact() {
        let mut m = AcpMapper::new();
        let diff =
            json!([{"type": "diff", "path": "/w/a.txt", "oldText": "x\n", "newText": "y\n"}]);
        let ev = m.on_update(&upd(
            json!({"sessionUpdate": "tool_call", "toolCallId": "e1",
            "title": "Edit a.txt", "kind": "edit", "status": "pending", "content": diff.clone()}),
        ));
        let kinds: Vec<_> = ev.iter().map(CapEvent::kind).collect();
        assert_eq!(kinds, ["cap.tool_call.start", "cap.artifact"]);
        let CapEvent::Artifact(a) = &ev[1] else {
            panic!()
        };
        assert_eq!(a.mime_type, crate::protocol::coding::MIME_DIFF);
        assert!(
            a.content
                .get()
                .unwrap()
                .as_str()
                .unwrap()
                .contains("-x\n+y\n")
        );
        let again = m.on_update(&upd(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "e1",
            "status": "completed", "content": diff}),
        ));
        let kinds: Vec<_> = again.iter().map(CapEvent::kind).collect();
        assert_eq!(
            kinds,
            ["cap.tool_call.end"],
            "the same diff is not announced twice"
        );
    }

    #[test]
    fn an_update_of_an_unannounced_call_starts_it_first() {
        let mut m = AcpMapper::new();
        let done = json!({"sessionUpdate": "tool_call_update", "toolCallId": "w1",
                          "status": "completed", "title": "Writing to o.txt"});
        let ev = m.on_update(&upd(done.clone()));
        let kinds: Vec<_> = ev.iter().map(CapEvent::kind).collect();
        assert_eq!(kinds, ["cap.tool_call.start", "cap.tool_call.end"]);
        assert!(matches!(&ev[0], CapEvent::ToolCallStart(t) if t.name == "Writing to o.txt"));
        let again = m.on_update(&upd(done));
        assert_eq!(again.len(), 1, "started once");
    }
}
