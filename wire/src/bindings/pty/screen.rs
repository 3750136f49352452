//! The agent's terminal: a vt100 screen with scrollback, the replies a real terminal
//! gives to queries (so TUIs that ask do not stall), and the logical lines the agent
//! completes (text up to a line feed, wrapped rows joined).
//!
//! Outside vt100 nothing grows with a line: only its byte count is kept. A line whose
//! bytes exceed the line cap and whose rows no longer fit on the screen (its start
//! scrolled away, so the text is no longer whole) is [`Fed::Oversize`], not a line.

use std::fmt::Write as _;
use std::num::NonZeroU16;

use regex::Regex;

/// Cells of scrollback kept: rows = this / columns (2,000 rows at 120 columns).
///
/// Spec A5 asks for 10,000 lines "for replay and audit"; capfleet takes every line as
/// it completes (the journal is the replay and the audit) and never reads the screen's
/// own scrollback, whose cells cost ~60 bytes each in vt100: 10,000 rows of 200
/// columns would be ~120 MB per session once a long answer has scrolled through.
pub(crate) const SCROLLBACK_CELLS: usize = 240_000;
/// Replies owed to the agent are capped: a query flood cannot grow memory.
const MAX_PENDING_REPLIES: usize = 4096;

/// Answers the queries vt100 leaves unhandled: cursor position (`CSI 6 n`), status
/// (`CSI 5 n`), primary and secondary device attributes (`CSI c`, `CSI > c`).
#[derive(Debug, Default)]
pub(crate) struct Replies {
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

/// What a line feed completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// A logical line, rendered, trailing blanks trimmed.
    Line(String),
    /// A line of this many bytes, over the cap and cut by the screen: dropped; what
    /// the screen still showed of it.
    Oversize(u64, String),
}

/// The rendered terminal.
pub struct Screen {
    parser: vt100::Parser<Replies>,
    max_line: u64,
    /// Bytes fed since the last line feed.
    line_bytes: u64,
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
    /// A `rows` x `cols` terminal whose lines may have `max_line` bytes.
    pub fn new(rows: u16, cols: u16, max_line: usize) -> Self {
        let cols = nz(cols, 80);
        Screen {
            parser: vt100::Parser::new_with_callbacks(
                nz(rows, 24),
                cols,
                SCROLLBACK_CELLS / usize::from(cols.get()),
                Replies::default(),
            ),
            max_line: u64::try_from(max_line).unwrap_or(u64::MAX),
            line_bytes: 0,
        }
    }

    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser.set_size(nz(rows, 24), nz(cols, 80));
    }

    /// Feed output; every logical line completed by a line feed is appended to
    /// `lines`.
    pub fn feed(&mut self, bytes: &[u8], lines: &mut Vec<Fed>) {
        let mut rest = bytes;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.parser.process(&rest[..i]);
            self.line_bytes += i as u64;
            lines.push(match self.oversize() {
                Some(len) => Fed::Oversize(len, self.cursor_line()),
                None => Fed::Line(self.cursor_line()),
            });
            self.line_bytes = 0;
            self.parser.process(b"\n");
            rest = &rest[i + 1..];
        }
        self.line_bytes += rest.len() as u64;
        self.parser.process(rest);
    }

    /// The unfinished line's length when it is over the cap and cut by the screen (at
    /// the end of output: the caller reports it).
    pub fn oversize(&self) -> Option<u64> {
        let (rows, _) = self.parser.screen().size();
        let (row, _) = self.parser.screen().cursor_position();
        let fills_screen = self.cursor_line_start() == 0 && row + 1 >= rows.get();
        (self.line_bytes > self.max_line && fills_screen).then_some(self.line_bytes)
    }

    /// Replies owed to the agent (terminal query answers), emptied.
    pub fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.parser.callbacks_mut().pending)
    }

    /// The first row of the logical line under the cursor.
    fn cursor_line_start(&self) -> u16 {
        let screen = self.parser.screen();
        let (mut start, _) = screen.cursor_position();
        while start > 0 && screen.row_wrapped(start - 1) {
            start -= 1;
        }
        start
    }

    /// Whether the terminal's cursor is hidden (`CSI ? 25 l`): a TUI drawing its own
    /// cursor leaves the real one wherever its last draw ended.
    pub fn cursor_hidden(&self) -> bool {
        self.parser.screen().hide_cursor()
    }

    /// The logical line under the cursor (wrapped rows above it joined).
    pub fn cursor_line(&self) -> String {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        let cols = cols.get();
        let (row, _) = screen.cursor_position();
        let start = self.cursor_line_start();
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
        self.last_nonempty_row().map(|(_, r)| r).unwrap_or_default()
    }

    /// The last non-empty rendered row and its index.
    fn last_nonempty_row(&self) -> Option<(usize, String)> {
        let (_, cols) = self.parser.screen().size();
        let rows: Vec<String> = self.parser.screen().rows(0, cols.get()).collect();
        rows.into_iter()
            .enumerate()
            .rev()
            .map(|(i, r)| (i, r.trim_end().to_owned()))
            .find(|(_, r)| !r.is_empty())
    }

    /// Whether the last non-empty row lies below the cursor's logical line: a status
    /// or hint row a TUI draws under its input box, not a row the cursor has left.
    pub fn last_row_below_cursor(&self) -> bool {
        let screen = self.parser.screen();
        let (rows, _) = screen.size();
        let (mut end, _) = screen.cursor_position();
        while end + 1 < rows.get() && screen.row_wrapped(end) {
            end += 1;
        }
        self.last_nonempty_row()
            .is_some_and(|(i, _)| i > usize::from(end))
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
        out.into_iter().map(line).collect()
    }

    fn line(fed: Fed) -> String {
        match fed {
            Fed::Line(l) => l,
            Fed::Oversize(len, _) => panic!("oversize line of {len} bytes"),
        }
    }

    #[test]
    fn spinner_redraws_leave_only_the_final_line() {
        let mut s = Screen::new(10, 40, 1 << 20);
        let got = lines(
            &mut s,
            b"\x1b[33m\xe2\xa0\x8b\x1b[0m Working\xe2\x80\xa6\r\x1b[KHello\r\nWorld\r\n",
        );
        assert_eq!(got, ["Hello", "World"]);
    }

    #[test]
    fn wrapped_rows_join_into_one_line() {
        let mut s = Screen::new(5, 10, 1 << 20);
        let got = lines(&mut s, b"abcdefghijKLM\r\n");
        assert_eq!(got, ["abcdefghijKLM"]);
    }

    #[test]
    fn queries_are_answered() {
        let mut s = Screen::new(10, 40, 1 << 20);
        lines(&mut s, b"ab\x1b[6n\x1b[c");
        assert_eq!(s.take_replies(), b"\x1b[1;3R\x1b[?1;2c");
        assert!(s.take_replies().is_empty());
    }

    #[test]
    fn last_nonempty_line_and_partial_line() {
        let mut s = Screen::new(10, 40, 1 << 20);
        lines(&mut s, b"text\r\n\xe2\x9d\xaf ");
        assert_eq!(s.last_nonempty_line(), "❯");
        assert_eq!(s.cursor_line(), "❯");
    }

    #[test]
    fn a_hint_row_under_the_input_box_is_below_the_cursor() {
        let mut s = Screen::new(10, 40, 1 << 20);
        // Drawn by position: answer, input box, hint; the cursor back in the box.
        lines(
            &mut s,
            "\x1b[H\x1b[2J\x1b[1;1Hanswer\x1b[8;1H\u{276f} \x1b[10;1H  ? for shortcuts\x1b[8;3H"
                .as_bytes(),
        );
        assert_eq!(s.cursor_line(), "\u{276f}");
        assert_eq!(s.last_nonempty_line(), "  ? for shortcuts");
        assert!(s.last_row_below_cursor());
        // Text streamed inline: its last row is the one the cursor left.
        let mut s = Screen::new(10, 40, 1 << 20);
        lines(&mut s, b"text\r\n\xe2\x9d\xaf\r\n");
        assert_eq!(s.last_nonempty_line(), "\u{276f}");
        assert!(!s.last_row_below_cursor());
    }

    #[test]
    fn scrollback_survives_a_flood() {
        let mut s = Screen::new(5, 20, 1 << 20);
        let mut out = Vec::new();
        for i in 0..20_000 {
            s.feed(format!("line {i}\r\n").as_bytes(), &mut out);
        }
        assert_eq!(out.len(), 20_000);
        assert_eq!(out.pop().map(line).as_deref(), Some("line 19999"));
    }

    #[test]
    fn a_line_over_the_cap_is_oversize_only_when_the_screen_cut_it() {
        let mut s = Screen::new(5, 20, 64);
        // 100 bytes of a spinner redrawn in place: long, but whole on screen.
        let spinner = b"\r\x1b[K-\r\x1b[K\\".repeat(10);
        let mut out = Vec::new();
        s.feed(&spinner, &mut out);
        s.feed(b"\r\n", &mut out);
        assert_eq!(out, [Fed::Line("\\".into())]);
        // 300 bytes of text: 15 rows wrapped on a 5-row screen.
        out.clear();
        s.feed(&[b'x'; 300], &mut out);
        assert_eq!(s.oversize(), Some(300));
        s.feed(b"\r\nok\r\n", &mut out);
        assert!(
            matches!(&out[0], Fed::Oversize(301, shown) if shown.len() == 100),
            "{out:?}"
        );
        assert_eq!(out[1], Fed::Line("ok".into()));
        assert_eq!(s.oversize(), None);
    }
}
