//! `--fullscreen`: the TUI drawn as a full-screen agent draws itself. Every frame
//! clears the screen (`ESC[H ESC[2J`) and draws each row by cursor position, never a
//! line feed: the transcript's last lines at the top, then the status row (the
//! spinner while a turn runs), the input box between two rules with the terminal's
//! cursor in it (visible, after the typed text), and the hint row last: `  ? for
//! shortcuts` (dim) while the agent waits for a prompt, empty while it works.
//! Only `oversize` steps still write their bytes as they are (a wire test's line).

use std::collections::VecDeque;
use std::fmt::Write as _;

/// Transcript lines kept (far more than a screen shows).
const HISTORY: usize = 1000;
/// Rows under the transcript: status, rule, input, rule, hint.
const CHROME_ROWS: usize = 5;
/// The hint row while idle.
const HINT: &str = "\x1b[2m  ? for shortcuts\x1b[0m";
const INPUT_MARK: &str = "\x1b[1;36m❯\x1b[0m ";

/// What the screen shows, redrawn whole by [`FullScreen::frame`].
#[derive(Debug)]
pub(super) struct FullScreen {
    rows: usize,
    cols: usize,
    /// Completed transcript lines (styled).
    history: VecDeque<String>,
    /// The transcript line being streamed.
    open: String,
    /// The spinner's frame on the status row, while shown.
    spinner: Option<&'static str>,
    /// A turn runs: no idle hint.
    busy: bool,
}

impl FullScreen {
    pub(super) fn new(size: Option<(u16, u16)>) -> FullScreen {
        let mut screen = FullScreen {
            rows: 24,
            cols: 80,
            history: VecDeque::new(),
            open: String::new(),
            spinner: None,
            busy: true,
        };
        if let Some((rows, cols)) = size {
            screen.resize(rows, cols);
        }
        screen
    }

    pub(super) fn resize(&mut self, rows: u16, cols: u16) {
        self.rows = usize::from(rows).max(CHROME_ROWS + 1);
        self.cols = usize::from(cols).max(8);
    }

    /// A turn starts (`true`) or the agent waits for a prompt (`false`, no spinner).
    pub(super) fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
        if !busy {
            self.spinner = None;
        }
    }

    pub(super) fn spin(&mut self, frame: &'static str) {
        self.spinner = Some(frame);
    }

    /// Streamed transcript text.
    pub(super) fn text(&mut self, text: &str) {
        let mut pieces = text.split('\n');
        if let Some(first) = pieces.next() {
            self.open.push_str(first);
        }
        for piece in pieces {
            let done = std::mem::replace(&mut self.open, piece.to_owned());
            self.push(done);
        }
    }

    /// Ends the line being streamed, if any.
    pub(super) fn close_line(&mut self) {
        if !self.open.is_empty() {
            let done = std::mem::take(&mut self.open);
            self.push(done);
        }
    }

    /// One complete transcript line.
    pub(super) fn line(&mut self, text: &str) {
        self.close_line();
        self.push(text.to_owned());
    }

    /// Input entered in the box moves to the transcript, behind the input mark.
    pub(super) fn entered(&mut self, input: &str) {
        self.close_line();
        for (i, piece) in input.split('\n').enumerate() {
            let lead = if i == 0 { INPUT_MARK } else { "  " };
            self.push(format!("{lead}{piece}"));
        }
    }

    fn push(&mut self, line: String) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(line);
    }

    /// The whole frame, with `input` in the box and the cursor after it.
    pub(super) fn frame(&self, input: &str) -> String {
        let (rows, cols) = (self.rows, self.cols);
        let area = rows - CHROME_ROWS;
        let mut shown: VecDeque<String> = VecDeque::with_capacity(area);
        let open = (!self.open.is_empty()).then_some(&self.open);
        for line in open.into_iter().chain(self.history.iter().rev()) {
            for row in wrap(line, cols).into_iter().rev() {
                shown.push_front(row);
            }
            if shown.len() >= area {
                break;
            }
        }
        while shown.len() > area {
            shown.pop_front();
        }
        let input: String = input.rsplit('\n').next().unwrap_or_default().to_owned();
        let room = cols - 3;
        let skip = input.chars().count().saturating_sub(room);
        let input: String = input.chars().skip(skip).collect();
        let rule = format!("\x1b[2m{}\x1b[0m", "─".repeat(cols));
        let status = self.spinner.map_or(String::new(), |frame| {
            format!("\x1b[33m{frame}\x1b[0m \x1b[2mWorking… (esc to interrupt)\x1b[0m")
        });
        let hint = if self.busy { "" } else { HINT };
        let mut out = String::from("\x1b[H\x1b[2J");
        let bottom = [status, rule.clone(), format!("{INPUT_MARK}{input}"), rule];
        let rows_drawn = shown.iter().map(String::as_str).enumerate();
        let chrome = bottom.iter().map(String::as_str).chain([hint]);
        for (i, row) in rows_drawn.chain((area..).zip(chrome)) {
            let _ = write!(out, "\x1b[{};1H{row}\x1b[0m", i + 1);
        }
        let _ = write!(out, "\x1b[{};{}H", rows - 2, 3 + input.chars().count());
        out
    }
}

/// `line`'s rows at `cols` columns; escape sequences take no room and every row but
/// the last ends its styles.
fn wrap(line: &str, cols: usize) -> Vec<String> {
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut width = 0;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            row.push(c);
            if chars.next_if_eq(&'[').is_some() {
                row.push('[');
                for next in chars.by_ref() {
                    row.push(next);
                    if ('\x40'..='\x7e').contains(&next) {
                        break;
                    }
                }
            }
            continue;
        }
        if c.is_control() {
            continue;
        }
        if width == cols {
            row.push_str("\x1b[0m");
            rows.push(std::mem::take(&mut row));
            width = 0;
        }
        row.push(c);
        width += 1;
    }
    rows.push(row);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_and_styles_take_no_room() {
        let rows = wrap("\x1b[1mabcdef\x1b[0mgh", 4);
        assert_eq!(rows, ["\x1b[1mabcd\x1b[0m", "ef\x1b[0mgh"]);
        assert_eq!(wrap("", 4), [""]);
    }

    #[test]
    fn a_frame_draws_every_row_by_position_and_puts_the_cursor_in_the_box() {
        let mut s = FullScreen::new(Some((8, 20)));
        s.line("one");
        s.text("two\nthr");
        s.spin("⠋");
        let frame = s.frame("hi");
        assert!(frame.starts_with("\x1b[H\x1b[2J"), "{frame:?}");
        assert!(!frame.contains('\n'), "{frame:?}");
        for drawn in [
            "\x1b[1;1Hone\x1b[0m",
            "\x1b[2;1Htwo\x1b[0m",
            "\x1b[3;1Hthr\x1b[0m",
            "\x1b[4;1H\x1b[33m⠋",
            "\x1b[6;1H\x1b[1;36m❯\x1b[0m hi",
        ] {
            assert!(frame.contains(drawn), "{drawn:?} in {frame:?}");
        }
        assert!(frame.ends_with("\x1b[6;5H"), "{frame:?}");
        assert!(!frame.contains("for shortcuts"), "busy: {frame:?}");
        s.set_busy(false);
        let frame = s.frame("");
        assert!(
            frame.contains("\x1b[8;1H\x1b[2m  ? for shortcuts"),
            "{frame:?}"
        );
        assert!(!frame.contains('⠋'), "{frame:?}");
    }
}
