//! The TUI's input line editor: turns raw terminal bytes into submitted
//! lines, handling backspace, bracketed paste (`ESC[200~` … `ESC[201~`,
//! newlines inside a paste stay in the line) and cursor-position reports.

/// Longest line kept; further bytes are dropped.
const LINE_MAX: usize = 1024 * 1024;
/// Longest escape sequence parsed; longer ones are dropped.
const ESC_MAX: usize = 32;

/// What the typed bytes mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Key {
    /// Enter outside a paste: the line typed so far.
    Submit(String),
    /// A cursor-position report `ESC[row;colR`.
    CursorReport(u16, u16),
    /// A literal Ctrl-C byte (only seen when the terminal sends no SIGINT).
    Interrupt,
    /// Ctrl-D on an empty line.
    Eof,
}

#[derive(Debug, Default)]
pub(super) struct LineEditor {
    line: Vec<u8>,
    esc: Option<Vec<u8>>,
    paste: bool,
    last_cr: bool,
}

impl LineEditor {
    /// Feeds input bytes; appends what to echo and the keys recognised.
    pub(super) fn feed(&mut self, bytes: &[u8], echo: &mut Vec<u8>, keys: &mut Vec<Key>) {
        for &b in bytes {
            let after_cr = std::mem::replace(&mut self.last_cr, b == b'\r');
            if let Some(seq) = self.esc.as_mut() {
                seq.push(b);
                let done = match seq.as_slice() {
                    [b'['] => false,
                    [b'[', .., last] => (0x40..=0x7e).contains(last) || seq.len() > ESC_MAX,
                    _ => true,
                };
                if done && let Some(seq) = self.esc.take() {
                    self.escape(&seq, keys);
                }
                continue;
            }
            match b {
                0x1b => self.esc = Some(Vec::new()),
                b'\n' if after_cr => {}
                b'\r' | b'\n' if self.paste => {
                    self.push(b'\n');
                    echo.extend_from_slice(b"\r\n");
                }
                b'\r' | b'\n' => keys.push(Key::Submit(self.take())),
                // The guards edit the line; a refused edit echoes nothing.
                0x7f | 0x08 if self.backspace() => echo.extend_from_slice(b"\x08 \x08"),
                0x03 => keys.push(Key::Interrupt),
                0x04 if self.line.is_empty() => keys.push(Key::Eof),
                b'\t' | 0x20.. if self.push(b) => echo.push(b),
                _ => {}
            }
        }
    }

    /// The partial line typed so far.
    pub(super) fn pending(&self) -> String {
        String::from_utf8_lossy(&self.line).into_owned()
    }

    /// Drops the partial line (Ctrl-C at the prompt).
    pub(super) fn clear(&mut self) {
        self.line.clear();
        self.paste = false;
    }

    fn take(&mut self) -> String {
        let line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        line
    }

    fn push(&mut self, b: u8) -> bool {
        if self.line.len() >= LINE_MAX {
            return false;
        }
        self.line.push(b);
        true
    }

    /// Removes the last whole UTF-8 character.
    fn backspace(&mut self) -> bool {
        let Some(mut pos) = self.line.len().checked_sub(1) else {
            return false;
        };
        while pos > 0 && (self.line[pos] & 0xc0) == 0x80 {
            pos -= 1;
        }
        self.line.truncate(pos);
        true
    }

    fn escape(&mut self, seq: &[u8], keys: &mut Vec<Key>) {
        match seq {
            b"[200~" => self.paste = true,
            b"[201~" => self.paste = false,
            [b'[', body @ .., b'R'] => {
                let text = String::from_utf8_lossy(body);
                if let Some((row, col)) = text.split_once(';')
                    && let (Ok(row), Ok(col)) = (row.parse(), col.parse())
                {
                    keys.push(Key::CursorReport(row, col));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> (Vec<Key>, LineEditor) {
        let mut editor = LineEditor::default();
        let (mut echo, mut keys) = (Vec::new(), Vec::new());
        editor.feed(input, &mut echo, &mut keys);
        (keys, editor)
    }

    #[test]
    fn paste_keeps_newlines_in_one_line() {
        let (keys, _) = run(b"\x1b[200~one\rtwo\x1b[201~\r");
        assert_eq!(keys, vec![Key::Submit("one\ntwo".into())]);
    }

    #[test]
    fn backspace_crlf_and_cursor_report() {
        let (keys, editor) = run("héx\x7f\x7f\r\nab\x1b[12;40R".as_bytes());
        assert_eq!(
            keys,
            vec![Key::Submit("h".into()), Key::CursorReport(12, 40)]
        );
        assert_eq!(editor.pending(), "ab");
    }
}
