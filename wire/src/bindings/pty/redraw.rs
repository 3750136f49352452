//! Lines a TUI draws without line feeds. Full-screen and Ink-style UIs move the
//! cursor up and overwrite rows in place, so no line feed ever completes their text.
//! Once output goes quiet, the screen's logical lines (wrapped rows joined; not the
//! cursor's, still being edited) that are new since the turn began count as complete.
//! Lines already seen (completed by a line feed, or on screen at the submit) are
//! remembered in a bounded window larger than any screen, so none is taken twice;
//! the rows left on screen of a line dropped as oversize are never a line.

use std::collections::VecDeque;

/// Lines remembered: several screens' worth.
const WINDOW: usize = 1024;

/// The per-turn memory of lines already taken.
#[derive(Debug, Default)]
pub struct RowScan {
    recent: VecDeque<String>,
    /// What the screen showed of the last line dropped as oversize: its rows still on
    /// screen (a suffix of it, as more scroll away) are not a line.
    cut: String,
}

impl RowScan {
    /// A turn begins on this screen: what it shows is not the turn's output.
    pub fn seed<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) {
        self.recent.clear();
        for l in lines {
            self.note(l);
        }
    }

    /// A line was taken (completed by a line feed).
    pub fn note(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(line.to_owned());
    }

    /// A line was dropped as oversize; `shown` is what the screen showed of it.
    pub fn note_cut(&mut self, shown: String) {
        self.cut = shown;
    }

    /// Whether `line` was taken already.
    pub fn seen(&self, line: &str) -> bool {
        let line = line.trim();
        self.recent.iter().any(|r| r == line)
    }

    /// The screen's complete lines (`(line, holds the cursor)`) not taken yet, in
    /// screen order; they are remembered as taken.
    pub fn fresh(&mut self, lines: &[(String, bool)]) -> Vec<String> {
        let mut out = Vec::new();
        for (line, at_cursor) in lines {
            let t = line.trim();
            let cut = !self.cut.is_empty() && self.cut.trim_end().ends_with(t);
            if *at_cursor || t.is_empty() || cut || self.recent.iter().any(|r| r == t) {
                continue;
            }
            self.note(t);
            out.push(line.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[(&str, bool)]) -> Vec<(String, bool)> {
        v.iter().map(|(l, c)| ((*l).to_owned(), *c)).collect()
    }

    #[test]
    fn only_new_complete_lines_are_taken_once() {
        let mut s = RowScan::default();
        s.seed(["banner", "❯"]);
        s.note("streamed line");
        let screen = rows(&[
            ("banner", false),
            ("streamed line", false),
            ("● drawn in place", false),
            ("", false),
            ("❯", true),
        ]);
        assert_eq!(s.fresh(&screen), ["● drawn in place"]);
        assert!(s.fresh(&screen).is_empty());
    }
}
