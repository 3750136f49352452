//! The terminal the live board draws on: stdout through console's `Term`, each row
//! ended by a line feed. indicatif pads a row with spaces to the last column and
//! lets the terminal wrap into the next line; a terminal that reflows its lines on a
//! resize (tmux, VTE, kitty, iTerm2, ...) then takes the rows for one long wrapped
//! line, joins them when it widens, and the redraw erases lines above the board. A
//! row here is never wider than the terminal (indicatif cuts it), so it never wraps.
//! When the terminal narrows, such a terminal breaks rows wider than the new width
//! into more lines: the board says how many ([`Screen::reflowed`]), and the next
//! redraw starts that much higher and clears what is below.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use console::Term;
use indicatif::TermLike;

#[derive(Debug, Clone)]
pub(super) struct Screen(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    term: Term,
    /// A row was written: the next text goes on the next line.
    newline_due: AtomicBool,
    /// Lines the terminal's reflow added above the cursor since the last draw.
    reflowed: AtomicUsize,
}

impl Screen {
    pub(super) fn stdout() -> Self {
        Screen(Arc::new(Inner {
            term: Term::buffered_stdout(),
            newline_due: AtomicBool::new(false),
            reflowed: AtomicUsize::new(0),
        }))
    }

    /// The terminal narrowed: the rows drawn now take `lines` more lines.
    pub(super) fn reflowed(&self, lines: usize) {
        self.0.reflowed.store(lines, Ordering::Relaxed);
    }

    /// The cursor moves: a row's line feed is no longer due (the cursor stays on
    /// the board's last line between draws, where indicatif expects it).
    fn moved(&self) {
        self.0.newline_due.store(false, Ordering::Relaxed);
    }
}

impl TermLike for Screen {
    fn width(&self) -> u16 {
        self.0.term.size().1
    }

    fn height(&self) -> u16 {
        self.0.term.size().0
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.moved();
        let extra = self.0.reflowed.swap(0, Ordering::Relaxed);
        self.0.term.move_cursor_up(n + extra)?;
        if extra > 0 {
            self.0.term.write_str("\r\x1b[J")?;
        }
        Ok(())
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.moved();
        self.0.term.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.moved();
        self.0.term.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.moved();
        self.0.term.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.moved();
        self.0.term.write_line(s)
    }

    /// indicatif writes a row, then spaces to the last column: the spaces become
    /// "erase to the end of the line", and the line feed comes before the next row.
    fn write_str(&self, s: &str) -> io::Result<()> {
        if s.bytes().all(|b| b == b' ') {
            self.0.newline_due.store(true, Ordering::Relaxed);
            return self.0.term.write_str("\x1b[K");
        }
        if self.0.newline_due.swap(false, Ordering::Relaxed) {
            self.0.term.write_str("\r\n")?;
        }
        self.0.term.write_str(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        self.moved();
        self.0.term.clear_line()
    }

    fn flush(&self) -> io::Result<()> {
        self.0.term.flush()
    }
}
