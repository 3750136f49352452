//! One turn's bookkeeping and its result.
//!
//! A turn keeps its events for the caller of `ask`, bounded: past
//! [`MAX_TURN_EVENTS`] events, or [`MAX_TURN_EVENT_TEXT`] bytes of text and thoughts
//! inside the kept events (or [`MAX_TURN_TEXT`] bytes of joined text) it counts what
//! it drops. The complete stream always reaches subscribers and the journal.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::tools_run::ToolsRun;
use crate::protocol::{CapEvent, Channel, StopReason};
use capfleet_wire::events::{TextFrom, TurnOutcome, UsageTotals};

/// Events kept in a [`TurnResult`] at most.
pub(crate) const MAX_TURN_EVENTS: usize = 10_000;
/// Bytes of joined assistant text kept in a [`TurnResult`] at most.
pub(crate) const MAX_TURN_TEXT: usize = 1 << 20;
/// Bytes of text and thoughts carried by the events kept in a [`TurnResult`] at most.
/// The event count alone does not bound memory: 10 000 flood chunks of 16 KiB each
/// would pin 160 MiB until the turn ends.
pub(crate) const MAX_TURN_EVENT_TEXT: usize = 2 * MAX_TURN_TEXT;

/// What `ask` returns: the turn's events, how it ended, its usage and its text.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    pub turn: u32,
    pub outcome: TurnOutcome,
    pub stop_reason: StopReason,
    /// The turn's CAP events in order (at most [`MAX_TURN_EVENTS`]).
    pub events: Vec<CapEvent>,
    pub events_dropped: u64,
    /// The assistant text of the turn, joined (at most [`MAX_TURN_TEXT`] bytes).
    pub text: String,
    pub text_truncated: bool,
    /// Usage reported during the turn.
    pub usage: UsageTotals,
    /// Agent restarts during the turn.
    pub restarts: u32,
    #[serde(with = "duration_ms")]
    pub duration: Duration,
}

/// A running turn.
#[derive(Debug)]
pub(crate) struct Turn {
    pub id: u32,
    pub prompt: String,
    pub started: Instant,
    pub attempts: u32,
    pub restarts: u32,
    pub cancel_requested: bool,
    /// The current attempt has been sent to a driver.
    pub sent: bool,
    /// The last `cap.error` code of the current attempt.
    pub attempt_error: Option<String>,
    /// The current attempt was cut by the orchestrator (a chaos fault): its failure
    /// is not the turn's.
    pub attempt_cut: bool,
    /// How the attempts failed, in a row (poison turns).
    pub failures: capfleet_wire::supervision::AttemptLog,
    events: Vec<CapEvent>,
    /// Events counted as kept: those in `events`, and those of a replay no one reads
    /// again ([`Turn::count_unread`]).
    kept: usize,
    events_dropped: u64,
    /// Text and thought bytes inside `events`.
    events_text: usize,
    text: String,
    text_truncated: bool,
    usage: UsageTotals,
    /// Its text was carried from a resumed run's cut turn and not yet sent.
    carried: bool,
    /// The tool calls its attempts started (and a resumed run's cut turn's): named in
    /// a re-issued prompt.
    tools: ToolsRun,
}

impl Turn {
    pub(crate) fn new(id: u32, prompt: String) -> Self {
        Turn {
            id,
            prompt,
            started: Instant::now(),
            attempts: 0,
            restarts: 0,
            cancel_requested: false,
            sent: false,
            attempt_error: None,
            attempt_cut: false,
            failures: Default::default(),
            events: Vec::new(),
            kept: 0,
            events_dropped: 0,
            events_text: 0,
            text: String::new(),
            text_truncated: false,
            usage: UsageTotals::default(),
            carried: false,
            tools: ToolsRun::default(),
        }
    }

    pub(crate) fn record(&mut self, event: &CapEvent) {
        if self.count(event) {
            self.events.push(event.clone());
        }
    }

    /// [`Turn::record`] of an event the caller hands over (a resumed run's, read
    /// back from its journal): kept without a copy.
    pub(crate) fn record_owned(&mut self, event: CapEvent) {
        if self.count(&event) {
            self.events.push(event);
        }
    }

    /// Take `event`'s text and usage; whether the event itself is kept (else it is
    /// counted as dropped).
    fn count(&mut self, event: &CapEvent) -> bool {
        match event {
            CapEvent::TextChunk(t) if t.channel.is_none_or(|c| c == Channel::Assistant) => {
                self.push_text(&t.text)
            }
            CapEvent::Usage(u) => self.usage.add(u),
            CapEvent::ToolCallStart(t) => self.tools.note(&t.name, t.input.get()),
            _ => {}
        }
        let text = match event {
            CapEvent::TextChunk(t) => t.text.len(),
            CapEvent::Thought(t) => t.text.len(),
            _ => 0,
        };
        self.admit(text)
    }

    /// An event of a resumed run's turn, read back from its journal, that nothing
    /// reads again (no text, no usage: a tool call, say; the router reads a replayed
    /// turn's text and plans): counted against the limits as [`Turn::record`] counts
    /// it, so that what is kept after it is what the live turn kept, but not kept.
    pub(crate) fn count_unread(&mut self) {
        self.admit(0);
    }

    /// Whether an event carrying `text` bytes of text fits in the limits (counted as
    /// kept), else it is counted as dropped.
    fn admit(&mut self, text: usize) -> bool {
        if self.kept < MAX_TURN_EVENTS && self.events_text + text <= MAX_TURN_EVENT_TEXT {
            self.kept += 1;
            self.events_text += text;
            true
        } else {
            self.events_dropped += 1;
            false
        }
    }

    fn push_text(&mut self, text: &str) {
        let room = MAX_TURN_TEXT.saturating_sub(self.text.len());
        if text.len() <= room {
            self.text.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&text[..cut]);
            self.text_truncated = true;
        }
    }

    /// Take `text` as this turn's partial output (a resumed run's interrupted turn).
    pub(crate) fn carry(&mut self, text: &str) {
        self.push_text(text);
        self.carried = true;
    }

    /// A resumed run's interrupted turn: the tool calls it had started (and its
    /// partial output, [`Turn::carry`]).
    pub(crate) fn carry_tools(&mut self, tools: ToolsRun) {
        self.tools = tools;
        self.carried = true;
    }

    /// The tool calls started so far (and carried).
    pub(crate) fn tools(&self) -> &ToolsRun {
        &self.tools
    }

    /// A tool call read back from the journal by a resume: named while there is room
    /// (`title` gives its name and input, decoded only then), else counted.
    pub(crate) fn tool_read_back(
        &mut self,
        title: impl FnOnce() -> (String, Option<serde_json::Value>),
    ) {
        if self.tools.has_room() {
            let (name, input) = title();
            self.tools.note(&name, input.as_ref());
        } else {
            self.tools.count();
        }
    }

    /// Where the attempt about to be sent starts its text: the text so far kept when
    /// `in_prompt` (it goes out inside the prompt), else dropped ([`Turn::restart_text`]);
    /// `None` for a fresh turn's first attempt.
    pub(crate) fn text_from(&mut self, in_prompt: bool) -> Option<TextFrom> {
        let first = self.attempts == 0;
        let carried = std::mem::take(&mut self.carried);
        if first && !carried {
            return None;
        }
        if !in_prompt {
            self.restart_text();
            return Some(TextFrom::Dropped);
        }
        Some(if first {
            TextFrom::Carried(self.text.clone())
        } else {
            TextFrom::Kept
        })
    }

    /// Drop the assistant text so far, and the text chunks that carried it: the agent
    /// answers again from the start.
    pub(crate) fn restart_text(&mut self) {
        let before = self.events.len();
        let mut freed = 0;
        self.events.retain(|e| match e {
            CapEvent::TextChunk(t) if t.channel.is_none_or(|c| c == Channel::Assistant) => {
                freed += t.text.len();
                false
            }
            _ => true,
        });
        self.kept -= before - self.events.len();
        self.events_text -= freed;
        self.text.clear();
        self.text_truncated = false;
    }

    /// The assistant text so far (kept across a restart, spec §10.6).
    pub(crate) fn partial_text(&self) -> &str {
        &self.text
    }

    pub(crate) fn usage(&self) -> &UsageTotals {
        &self.usage
    }

    pub(crate) fn finish(self, outcome: TurnOutcome, stop_reason: StopReason) -> TurnResult {
        TurnResult {
            turn: self.id,
            outcome,
            stop_reason,
            events: self.events,
            events_dropped: self.events_dropped,
            text: self.text,
            text_truncated: self.text_truncated,
            usage: self.usage,
            restarts: self.restarts,
            duration: self.started.elapsed(),
        }
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_bounded_on_a_char_boundary() {
        let mut t = Turn::new(1, "p".into());
        let big = "é".repeat(MAX_TURN_TEXT); // 2 bytes each
        t.record(&CapEvent::text("m", big));
        t.record(&CapEvent::text("m", "more"));
        let r = t.finish(TurnOutcome::Completed, StopReason::EndTurn);
        assert!(r.text_truncated);
        assert_eq!(r.text.len(), MAX_TURN_TEXT);
    }

    #[test]
    fn events_are_bounded_and_counted() {
        let mut t = Turn::new(1, "p".into());
        for i in 0..MAX_TURN_EVENTS + 5 {
            t.record(&CapEvent::thought("m", format!("{i}")));
        }
        let r = t.finish(TurnOutcome::Completed, StopReason::EndTurn);
        assert_eq!(r.events.len(), MAX_TURN_EVENTS);
        assert_eq!(r.events_dropped, 5);
    }

    #[test]
    fn kept_events_are_bounded_in_bytes() {
        let mut t = Turn::new(1, "p".into());
        let chunk = "x".repeat(16 << 10);
        let n = 1000; // 16 MiB of text in 1000 events, far below MAX_TURN_EVENTS
        for _ in 0..n {
            t.record(&CapEvent::text("m", chunk.clone()));
        }
        t.record(&CapEvent::thought("m", "small"));
        let r = t.finish(TurnOutcome::Completed, StopReason::EndTurn);
        let kept: usize = r
            .events
            .iter()
            .map(|e| match e {
                CapEvent::TextChunk(t) => t.text.len(),
                _ => 0,
            })
            .sum();
        assert!(kept <= MAX_TURN_EVENT_TEXT, "{kept}");
        assert_eq!(r.events.len() as u64 + r.events_dropped, n + 1);
        assert!(r.events_dropped > 0);
    }

    #[test]
    fn a_resent_turn_keeps_its_text_only_when_it_went_out_in_the_prompt() {
        let mut t = Turn::new(1, "p".into());
        assert_eq!(t.text_from(false), None, "a fresh turn's first attempt");
        t.attempts = 1;
        t.record(&CapEvent::text("m", "@cap://b hello"));
        t.record(&CapEvent::thought("m", "hm"));
        assert_eq!(t.text_from(true), Some(TextFrom::Kept));
        assert_eq!(t.partial_text(), "@cap://b hello");
        // The agent answers again from the start: the cut attempt's text is gone.
        assert_eq!(t.text_from(false), Some(TextFrom::Dropped));
        t.record(&CapEvent::text("m", "@cap://b hello"));
        let r = t.finish(TurnOutcome::Completed, StopReason::EndTurn);
        assert_eq!(r.text, "@cap://b hello");
        assert_eq!(r.events.len(), 2, "the thought stays, one text chunk");

        // A resumed run's cut turn: its carried text, journaled with the prompt.
        let mut t = Turn::new(2, "p".into());
        t.carry("partial ");
        assert_eq!(
            t.text_from(true),
            Some(TextFrom::Carried("partial ".into()))
        );
        let mut t = Turn::new(2, "p".into());
        t.carry("partial ");
        assert_eq!(t.text_from(false), Some(TextFrom::Dropped));
        assert_eq!(t.partial_text(), "");
    }
}
