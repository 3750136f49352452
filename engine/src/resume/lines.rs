//! A journal line as a resume reads it: the fields it needs, borrowed from the line,
//! and a session's CAP event decoded only where recovery reads it ([`Event`]); the
//! lines of a batch parsed on the machine's cores.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::protocol::{CapEvent, StopReason};
use capfleet_wire::events::TextFrom;

/// One journal line, the fields a resume reads, its strings borrowed from the line
/// (copied only where they have escapes, and where recovery keeps them).
#[derive(Deserialize)]
pub(super) struct Line<'a> {
    #[serde(default)]
    pub(super) seq: Option<u64>,
    #[serde(default)]
    pub(super) last_seq: Option<u64>,
    #[serde(default, borrow)]
    pub(super) urn: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) turn: Option<u32>,
    #[serde(rename = "type", borrow)]
    pub(super) kind: Cow<'a, str>,
    /// A `turn_started`'s: where the attempt's result text starts.
    #[serde(default)]
    pub(super) text_from: Option<TextFrom>,
    /// The event's text: decoded (in [`parse`]) only where recovery reads it.
    #[serde(default, borrow)]
    pub(super) event: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) key: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) to: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) outcome: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) error: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) stop_reason: Option<StopReason>,
    #[serde(default, borrow)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) exit_code: Option<u8>,
    #[serde(default, borrow)]
    pub(super) session: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) parent: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) sha: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) seed_pos: Option<u64>,
    /// A `session` record's name and sandbox.
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) sandbox: Option<&'a RawValue>,
    /// A `resumed` record's sandboxes resolved anew (by session).
    #[serde(default, borrow)]
    pub(super) sandboxes: Option<&'a RawValue>,
}

/// A journal line read, its event decoded if it is a session's.
pub(super) struct Parsed<'a> {
    pub(super) line: Line<'a>,
    pub(super) event: Option<Event<'a>>,
}

/// A session's CAP event as recovery takes it.
pub(super) enum Event<'a> {
    /// One of a kind recovery or the replaying router reads: a resume id
    /// (`cap.session.ready`), text, a thought (its length counts against the turn's
    /// limits), usage, a plan.
    Read(Box<CapEvent>),
    /// A tool call's start: counted as [`Event::Unread`] is, and named for a
    /// re-issued prompt (its name and input as text, decoded only if named).
    Tool {
        name: &'a RawValue,
        input: Option<&'a RawValue>,
    },
    /// Any other kind (tool calls, most of a coding agent's events): counted in its
    /// turn as the live turn counted it, neither decoded nor kept.
    Unread,
}

/// Read one line: `None` if it is no record. A session's event (the only ones
/// recovery reads) is decoded here if its kind is read ([`Event`]), typed straight
/// from its text; the router's and the workspace's (artifacts with whole
/// transcripts) are left as text.
fn parse<'a>(bytes: &'a [u8], streams: &[String; 2]) -> Option<Parsed<'a>> {
    let line = serde_json::from_slice::<Line<'a>>(bytes).ok()?;
    let event = match (&line.urn, line.event) {
        (Some(urn), Some(raw)) if !streams.iter().any(|s| s == urn) && line.kind == "cap" => {
            Some(event_of(raw.get())?)
        }
        _ => None,
    };
    Some(Parsed { line, event })
}

/// A session's event from its journaled text: `None` if it is none.
fn event_of(json: &str) -> Option<Event<'_>> {
    use crate::protocol::EventKind as K;
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
        #[serde(default, borrow)]
        name: Option<&'a RawValue>,
        #[serde(default, borrow)]
        input: Option<&'a RawValue>,
    }
    let Kind { kind, name, input } = serde_json::from_str(json).ok()?;
    match K::from_wire(&kind) {
        Some(K::ToolCallStart) => Some(match name {
            Some(name) => Event::Tool { name, input },
            None => Event::Unread,
        }),
        Some(K::SessionReady | K::TextChunk | K::Thought | K::Usage | K::Plan) | None => {
            crate::protocol::decode_trusted(json)
                .ok()
                .map(|e| Event::Read(Box::new(e)))
        }
        Some(_) => Some(Event::Unread),
    }
}

/// Lines a reader thread takes at least (fewer are read on the caller's thread).
const PARALLEL_MIN: usize = 4096;

/// [`parse`] every line of a batch, spread over the machine's cores (at most 4).
pub(super) fn parse_all<'a>(lines: &[&'a [u8]], streams: &[String; 2]) -> Vec<Option<Parsed<'a>>> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let workers = cores.min(4).min(lines.len() / PARALLEL_MIN).max(1);
    if workers == 1 {
        return lines.iter().map(|l| parse(l, streams)).collect();
    }
    let per = lines.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let mut parts = lines.chunks(per);
        let first = parts.next().unwrap_or_default();
        let others: Vec<_> = parts
            .map(|part| scope.spawn(move || part.iter().map(|l| parse(l, streams)).collect()))
            .collect();
        let mut out: Vec<Option<Parsed<'a>>> = first.iter().map(|l| parse(l, streams)).collect();
        for h in others {
            // A parse that panicked (it cannot: serde errors are values) reads as no records.
            let part: Vec<Option<Parsed<'a>>> = h.join().unwrap_or_default();
            out.extend(part);
        }
        out
    })
}
