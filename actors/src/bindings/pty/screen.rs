//! The agent's terminal: a vt100 screen with scrollback, the replies a real terminal
//! gives to queries (so TUIs that ask do not stall), and the logical lines the agent
//! completes (text up to a line feed, wrapped rows joined).

use std::fmt::Write as _;
use std::num::NonZeroU16;

use regex::Regex;

/// Rows of scrollback kept (spec A5: at least 10,000).
pub const SCROLLBACK: usize = 10_000;
/// Replies owed to the agent are capped: a query flood cannot grow memory.
const MAX_PENDING_REPLIES: usize = 4096;

/// Answers the queries vt100 leaves unhandled: cursor position (`CSI 6 n`), status
/// (`CSI 5 n`), primary and secondary device attributes (`CSI c`, `CSI > c`).
#[derive(Debug, Default)]
pub struct Replies {
    pending: Vec<u8>,
}

impl vt100::Callbacks for Replies {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        if self.pending.len() >= MAX_PENDING_REPLIES {
            return;
        }
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            (None | Some(b'?'), 'n', 6) => {
                let (row, col) = screen.cursor_position();
                let q = if i1.is_some() { "?" } else { "" };
                let _ = write!(
                    Buf(&mut self.pending),
                    "\x1b[{q}{};{}R",
                    u32::from(row) + 1,
                    u32::from(col) + 1
                );
            }
            (None, 'n', 5) => self.pending.extend_from_slice(b"\x1b[0n"),
            (None, 'c', 0) => self.pending.extend_from_slice(b"\x1b[?1;2c"),
            (Some(b'>'), 'c', 0) => self.pending.extend_from_slice(b"\x1b[>0;10;1c"),
            _ => {}
        }
    }
}

struct Buf<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Buf<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The rendered terminal.
pub struct Screen {
    parser: vt100::Parser<Replies>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.parser.screen().size();
        write!(f, "Screen({rows}x{cols})")
    }
}

fn nz(n: u16, default: u16) -> NonZeroU16 {
    NonZeroU16::new(n)
        .or(NonZeroU16::new(default))
        .unwrap_or(NonZeroU16::MIN)
}

impl Screen {
    pub fn new(rows: u16, cols: u16) -> Self {
        Screen {
            parser: vt100::Parser::new_with_callbacks(
                nz(rows, 24),
                nz(cols, 80),
                SCROLLBACK,
                Replies::default(),
            ),
        }
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser.set_size(nz(rows, 24), nz(cols, 80));
    }

    /// Feed output; every logical line completed by a line feed is appended to
    /// `lines` (rendered, trailing blanks trimmed).
    pub fn feed(&mut self, bytes: &[u8], lines: &mut Vec<String>) {
        let mut rest = bytes;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.parser.process(&rest[..i]);
            lines.push(self.cursor_line());
            self.parser.process(b"\n");
            rest = &rest[i + 1..];
        }
        self.parser.process(rest);
    }

    /// Replies owed to the agent (terminal query answers), emptied.
    pub fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.parser.callbacks_mut().pending)
    }

    /// The logical line under the cursor (wrapped rows above it joined).
    pub fn cursor_line(&self) -> String {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        let cols = cols.get();
        let (row, _) = screen.cursor_position();
        let mut start = row;
        while start > 0 && screen.row_wrapped(start - 1) {
            start -= 1;
        }
        // `contents_between` renders only the rows asked for when they span more than
        // one: start at the end of the row above (an empty span) for a single row.
        let mut line = match (start, row) {
            (0, 0) => screen.rows(0, cols).next().unwrap_or_default(),
            (s, r) if s < r => screen.contents_between(s, 0, r, cols),
            (_, r) => screen.contents_between(r - 1, cols, r, cols),
        };
        if line.starts_with('\n') {
            line.remove(0);
        }
        line.truncate(line.trim_end().len());
        line
    }

    /// The last non-empty rendered row of the visible screen.
    pub fn last_nonempty_line(&self) -> String {
        let (_, cols) = self.parser.screen().size();
        let rows: Vec<String> = self.parser.screen().rows(0, cols.get()).collect();
        rows.into_iter()
            .rev()
            .map(|r| r.trim_end().to_owned())
            .find(|r| !r.is_empty())
            .unwrap_or_default()
    }

    /// The visible screen as logical lines (wrapped rows joined), each with whether
    /// it holds the cursor.
    pub fn logical_lines(&self) -> Vec<(String, bool)> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        let (cursor, _) = screen.cursor_position();
        let mut out: Vec<(String, bool)> = Vec::new();
        let mut joining = false;
        for (i, row) in (0u16..).zip(screen.rows(0, cols.get())) {
            match out.last_mut() {
                Some((line, at)) if joining => {
                    line.push_str(&row);
                    *at |= i == cursor;
                }
                _ => out.push((row, i == cursor)),
            }
            joining = screen.row_wrapped(i);
        }
        for (line, _) in &mut out {
            line.truncate(line.trim_end().len());
        }
        out
    }

    /// Whether `re` matches anywhere on the visible screen.
    pub fn shows(&self, re: &Regex) -> bool {
        re.is_match(&self.parser.screen().contents())
    }

    /// The whole visible screen as text.
    pub fn contents(&self) -> String {
        self.parser.screen().contents()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &mut Screen, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        s.feed(bytes, &mut out);
        out
    }

    #[test]
    fn spinner_redraws_leave_only_the_final_line() {
        let mut s = Screen::new(10, 40);
        let got = lines(
            &mut s,
            b"\x1b[33m\xe2\xa0\x8b\x1b[0m Working\xe2\x80\xa6\r\x1b[KHello\r\nWorld\r\n",
        );
        assert_eq!(got, ["Hello", "World"]);
    }

    #[test]
    fn wrapped_rows_join_into_one_line() {
        let mut s = Screen::new(5, 10);
        let got = lines(&mut s, b"abcdefghijKLM\r\n");
        assert_eq!(got, ["abcdefghijKLM"]);
    }

    #[test]
    fn queries_are_answered() {
        let mut s = Screen::new(10, 40);
        lines(&mut s, b"ab\x1b[6n\x1b[c");
        assert_eq!(s.take_replies(), b"\x1b[1;3R\x1b[?1;2c");
        assert!(s.take_replies().is_empty());
    }

    #[test]
    fn last_nonempty_line_and_partial_line() {
        let mut s = Screen::new(10, 40);
        lines(&mut s, b"text\r\n\xe2\x9d\xaf ");
        assert_eq!(s.last_nonempty_line(), "❯");
        assert_eq!(s.cursor_line(), "❯");
    }

    #[test]
    fn scrollback_survives_a_flood() {
        let mut s = Screen::new(5, 20);
        let mut out = Vec::new();
        for i in 0..20_000 {
            s.feed(format!("line {i}\r\n").as_bytes(), &mut out);
        }
        assert_eq!(out.len(), 20_000);
        assert_eq!(out[19_999], "line 19999");
    }
}
