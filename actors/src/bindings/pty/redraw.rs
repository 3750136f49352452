//! Lines a TUI draws without line feeds. Full-screen and Ink-style UIs move the
//! cursor up and overwrite rows in place, so no line feed ever completes their text.
//! Once output goes quiet, the screen's logical lines (wrapped rows joined; not the
//! cursor's, still being edited) that are new since the turn began count as complete.
//! Lines already seen (completed by a line feed, or on screen at the submit) are
//! remembered in a bounded window larger than any screen, so none is taken twice.

use std::collections::VecDeque;

/// Lines remembered: several screens' worth.
const WINDOW: usize = 1024;

/// The per-turn memory of lines already taken.
#[derive(Debug, Default)]
pub struct RowScan {
    recent: VecDeque<String>,
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

    /// The screen's complete lines (`(line, holds the cursor)`) not taken yet, in
    /// screen order; they are remembered as taken.
    pub fn fresh(&mut self, lines: &[(String, bool)]) -> Vec<String> {
        let mut out = Vec::new();
        for (line, at_cursor) in lines {
            let t = line.trim();
            if *at_cursor || t.is_empty() || self.recent.iter().any(|r| r == t) {
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
