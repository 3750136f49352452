//! Line mode's text: an agent streams its answer in chunks that end anywhere, mid-word
//! included, and one printed line per chunk splits words across lines. A session's
//! chunks are held until a line ends; a held line is let go at a word boundary once
//! it reaches [`HOLD_MAX`] bytes (memory stays bounded, and a printed line fits
//! `capfleet log`'s summary width), and whole when the session's turn ends, when the
//! session has any other event to print, and when the run ends.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The most text held per session before a line is let go at a word boundary.
pub(super) const HOLD_MAX: usize = 120;

/// Held text of each session; `F` is the chunk a line started in (its time and turn
/// are the printed line's) — the event itself, so that only a printed line is
/// rendered, not every chunk of it (a long answer is hundreds of thousands).
pub(super) struct Texts<F> {
    held: BTreeMap<Arc<str>, Held<F>>,
}

impl<F> Default for Texts<F> {
    fn default() -> Self {
        Texts {
            held: BTreeMap::new(),
        }
    }
}

/// A session's text not printed yet, and the chunk it started in.
struct Held<F> {
    first: F,
    text: String,
}

/// A line to print: the chunk it started in, and its text.
pub(super) type Line<F> = (F, String);

impl<F: Clone> Texts<F> {
    /// A text chunk `at` of `urn`: the lines it completes.
    pub(super) fn chunk(&mut self, urn: &Arc<str>, at: &F, text: &str) -> Vec<Line<F>> {
        let held = self.held.entry(urn.clone()).or_insert_with(|| Held {
            first: at.clone(),
            text: String::new(),
        });
        held.text.push_str(text);
        let mut out = Vec::new();
        while let Some(end) = held.text.find('\n') {
            let line: String = held.text.drain(..=end).collect();
            out.extend(held.take(line.trim_end()));
            held.first = at.clone();
        }
        while held.text.len() >= HOLD_MAX {
            let (cut, skip) = word_cut(&held.text);
            let line: String = held.text.drain(..cut + skip).collect();
            out.extend(held.take(&line[..cut]));
            held.first = at.clone();
        }
        if held.text.is_empty() {
            self.held.remove(urn);
        }
        out
    }

    /// What `urn` holds, as a line (its turn ended, or it has another event).
    pub(super) fn release(&mut self, urn: &str) -> Option<Line<F>> {
        self.held.remove(urn).and_then(|h| h.take(&h.text))
    }

    /// Everything held (the run is over), session by session.
    pub(super) fn release_all(&mut self) -> Vec<Line<F>> {
        std::mem::take(&mut self.held)
            .into_values()
            .filter_map(|h| h.take(&h.text))
            .collect()
    }
}

impl<F: Clone> Held<F> {
    /// `line` as a line of the held chunk; none for a blank line.
    fn take(&self, line: &str) -> Option<Line<F>> {
        (!line.trim().is_empty()).then(|| (self.first.clone(), line.to_owned()))
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

    fn texts_of(lines: &[Line<u64>]) -> Vec<&str> {
        lines.iter().map(|(_, text)| text.as_str()).collect()
    }

    #[test]
    fn chunks_are_printed_by_the_line() {
        let (mut t, urn): (Texts<u64>, Arc<str>) = (Texts::default(), "cap://f/a".into());
        assert!(t.chunk(&urn, &1, "Plan: worker-a w").is_empty());
        let lines = t.chunk(&urn, &2, "rites the /health handler.\nThen t");
        assert_eq!(
            texts_of(&lines),
            ["Plan: worker-a writes the /health handler."]
        );
        assert_eq!(lines[0].0, 1, "a line carries its first chunk's time");
        let rest = t.release(&urn).unwrap();
        assert_eq!(rest, (2, "Then t".to_owned()));
        assert!(t.release(&urn).is_none() && t.release_all().is_empty());
    }

    #[test]
    fn a_long_line_is_cut_at_a_word_and_memory_stays_bounded() {
        let (mut t, urn): (Texts<u64>, Arc<str>) = (Texts::default(), "cap://f/a".into());
        let mut printed = Vec::new();
        for _ in 0..100 {
            printed.extend(t.chunk(&urn, &1, "lorem ipsum "));
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
        let cut = t.chunk(&urn, &1, &word);
        assert!(texts_of(&cut).iter().all(|l| l.len() <= HOLD_MAX));
    }
}
