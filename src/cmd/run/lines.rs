//! Line mode's text: an agent streams its answer in chunks that end anywhere, mid-word
//! included, and one printed line per chunk splits words across lines. A session's
//! chunks are held until a line ends; a held line is let go at a word boundary once
//! it reaches [`HOLD_MAX`] bytes (memory stays bounded, and a printed line fits
//! `capfleet log`'s summary width), and whole when the session's turn ends, when the
//! session has any other event to print, and when the run ends.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

/// The most text held per session before a line is let go at a word boundary.
pub(super) const HOLD_MAX: usize = 120;

/// The record of a text chunk, as it is printed.
type Record = Map<String, Value>;

#[derive(Default)]
pub(super) struct Texts {
    held: BTreeMap<Arc<str>, Held>,
}

/// A session's text not printed yet, and the record of the chunk it started in
/// (its time and turn are the printed line's).
struct Held {
    record: Record,
    text: String,
}

impl Texts {
    /// A text chunk of `urn`: the lines it completes, each as a record to print.
    pub(super) fn chunk(&mut self, urn: &Arc<str>, record: Record, text: &str) -> Vec<Record> {
        let held = self.held.entry(urn.clone()).or_insert_with(|| Held {
            record: record.clone(),
            text: String::new(),
        });
        held.text.push_str(text);
        let mut out = Vec::new();
        while let Some(end) = held.text.find('\n') {
            let line: String = held.text.drain(..=end).collect();
            out.extend(held.take(line.trim_end()));
            held.record = record.clone();
        }
        while held.text.len() >= HOLD_MAX {
            let (cut, skip) = word_cut(&held.text);
            let line: String = held.text.drain(..cut + skip).collect();
            out.extend(held.take(&line[..cut]));
            held.record = record.clone();
        }
        if held.text.is_empty() {
            self.held.remove(urn);
        }
        out
    }

    /// What `urn` holds, as a line (its turn ended, or it has another event).
    pub(super) fn release(&mut self, urn: &str) -> Option<Record> {
        self.held.remove(urn).and_then(|h| h.take(&h.text))
    }

    /// Everything held (the run is over), session by session.
    pub(super) fn release_all(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.held)
            .into_values()
            .filter_map(|h| h.take(&h.text))
            .collect()
    }
}

impl Held {
    /// The held record with `line` as its text; none for a blank line.
    fn take(&self, line: &str) -> Option<Record> {
        if line.trim().is_empty() {
            return None;
        }
        let mut record = self.record.clone();
        if let Some(Value::Object(event)) = record.get_mut("event") {
            event.insert("text".into(), Value::String(line.to_owned()));
        }
        Some(record)
    }
}

/// Where to cut `text` (at least [`HOLD_MAX`] bytes): after its last word that ends
/// within [`HOLD_MAX`] bytes, and how many bytes of the space there to drop; mid-word
/// only when the first word alone is longer.
fn word_cut(text: &str) -> (usize, usize) {
    let mut end = HOLD_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(space) = text[end..].chars().next().filter(|c| c.is_whitespace()) {
        return (end, space.len_utf8());
    }
    match text[..end]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
    {
        Some((at, space)) if at > 0 => (at, space.len_utf8()),
        _ => (end, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts_of(records: &[Record]) -> Vec<&str> {
        records
            .iter()
            .map(|r| r["event"]["text"].as_str().unwrap())
            .collect()
    }

    fn record(ts: u64) -> Record {
        serde_json::json!({"type": "cap", "ts_ms": ts, "event": {"kind": "cap.text_chunk", "text": ""}})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn chunks_are_printed_by_the_line() {
        let (mut t, urn): (Texts, Arc<str>) = (Texts::default(), "cap://f/a".into());
        assert!(t.chunk(&urn, record(1), "Plan: worker-a w").is_empty());
        let lines = t.chunk(&urn, record(2), "rites the /health handler.\nThen t");
        assert_eq!(
            texts_of(&lines),
            ["Plan: worker-a writes the /health handler."]
        );
        assert_eq!(
            lines[0]["ts_ms"], 1,
            "a line carries its first chunk's time"
        );
        let rest = t.release(&urn).unwrap();
        assert_eq!(rest["event"]["text"], "Then t");
        assert_eq!(rest["ts_ms"], 2);
        assert!(t.release(&urn).is_none() && t.release_all().is_empty());
    }

    #[test]
    fn a_long_line_is_cut_at_a_word_and_memory_stays_bounded() {
        let (mut t, urn): (Texts, Arc<str>) = (Texts::default(), "cap://f/a".into());
        let mut printed = Vec::new();
        for _ in 0..100 {
            printed.extend(t.chunk(&urn, record(1), "lorem ipsum "));
            assert!(t.held.values().all(|h| h.text.len() < HOLD_MAX));
        }
        for line in texts_of(&printed) {
            assert!(line.len() <= HOLD_MAX, "{line:?}");
            assert!(
                line.starts_with("lorem") && line.ends_with("ipsum"),
                "{line:?}"
            );
        }
        let word = "x".repeat(3 * HOLD_MAX);
        let cut = t.chunk(&urn, record(1), &word);
        assert!(texts_of(&cut).iter().all(|l| l.len() <= HOLD_MAX));
    }
}
