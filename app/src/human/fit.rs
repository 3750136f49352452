//! What a person reads fits their terminal: one [`Fit`] per stream (stdout, stderr)
//! knows how wide its lines may be and shows paths short; every printer of the CLI
//! (the run's header and summary, the live board, warnings, `runs`, `log`) writes
//! through it, and [`super::table`] lays columns out with it.
//!
//! The width: a stream that is a terminal has its terminal's (read again each time a
//! `Fit` is made, so a resize counts); a stream that is not a terminal has the
//! `COLUMNS` variable's, if set (`watch capfleet runs`), and otherwise none: the
//! lines are printed as they always were, whole, with absolute paths — what a script
//! or a file gets. With a width, a path under the working directory is shown
//! relative to it, one under `$HOME` with `~`, and a line too long is broken between
//! words, its next lines indented; a word longer than a whole line (a URL, a JSON
//! value without spaces) breaks after a `/` or `,` where it has one, and at the width
//! where it has none — never cut, nothing dropped.

use std::path::{Path, PathBuf};

use console::{Term, measure_text_width};

/// How a stream's lines fit its reader's terminal.
#[derive(Debug, Clone, Default)]
pub struct Fit {
    /// Columns a line may take; `None`: no limit (not a terminal, no `COLUMNS`).
    width: Option<usize>,
    cwd: Option<PathBuf>,
    home: Option<PathBuf>,
}

/// A word longer than a whole line starts on the line it comes to when at least
/// this many columns are left there (it is broken anyway).
const START_MIN: usize = 12;

/// Where a word may break when it is longer than a whole line: after these.
const BREAK_AFTER: [char; 5] = ['/', ',', ';', '&', '?'];

impl Fit {
    /// For what capfleet prints on stdout.
    pub fn stdout() -> Fit {
        Fit::of(&Term::stdout())
    }

    /// For what capfleet prints on stderr.
    pub fn stderr() -> Fit {
        Fit::of(&Term::stderr())
    }

    fn of(term: &Term) -> Fit {
        Fit::new(term_width(term))
    }

    /// Lines of at most `width` columns (none: no limit), paths relative to the
    /// current directory.
    fn new(width: Option<usize>) -> Fit {
        Fit {
            width,
            cwd: std::env::current_dir().ok(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
        }
    }

    /// Lines of `width` columns, for text that shows no path (the live board).
    pub fn columns(width: usize) -> Fit {
        Fit {
            width: Some(width),
            ..Fit::default()
        }
    }

    /// The width of stderr's terminal (or `COLUMNS`), for text that shows no path:
    /// read on each call, without looking up the working directory.
    pub(crate) fn stderr_columns() -> Fit {
        Fit {
            width: term_width(&Term::stderr()),
            ..Fit::default()
        }
    }

    /// The same for stdout.
    pub(crate) fn stdout_columns() -> Fit {
        Fit {
            width: term_width(&Term::stdout()),
            ..Fit::default()
        }
    }

    /// The columns a line may take, if limited.
    pub(crate) fn width(&self) -> Option<usize> {
        self.width
    }

    /// `path` as shown: relative to the working directory when under it, with `~`
    /// when under the home directory, as it is otherwise (and always without a width).
    pub fn path(&self, path: &Path) -> String {
        if self.width.is_none() {
            return path.display().to_string();
        }
        let under = |base: &Option<PathBuf>| {
            let base = base.as_deref()?;
            path.strip_prefix(base)
                .ok()
                .map(Path::to_path_buf)
                .or_else(|| {
                    // A path git or the OS resolved (a symlinked directory on the way).
                    let real = path.canonicalize().ok()?;
                    real.strip_prefix(base.canonicalize().ok()?)
                        .ok()
                        .map(Path::to_path_buf)
                })
        };
        if let Some(rel) = under(&self.cwd) {
            if rel.as_os_str().is_empty() {
                return ".".to_owned();
            }
            return rel.display().to_string();
        }
        match under(&self.home) {
            Some(rel) if rel.as_os_str().is_empty() => "~".to_owned(),
            Some(rel) => format!("~/{}", rel.display()),
            None => path.display().to_string(),
        }
    }

    /// `line` broken between words into lines that fit, the next ones indented by
    /// `indent` columns; joined with line feeds, as one string to print (each of its
    /// own lines fit alone). Unchanged when it fits or there is no width.
    pub fn wrap(&self, line: &str, indent: usize) -> String {
        line.split('\n')
            .map(|l| self.lines(l, 0, indent).join("\n"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `text` printed after `head` (a row's fixed columns): its first line goes on
    /// after `head`, the next ones are indented to where `text` starts when at least
    /// [`HANG_MIN`] columns remain there, and by `indent` otherwise.
    pub(crate) fn hang(&self, head: &str, text: &str, indent: usize) -> String {
        let used = measure_text_width(head);
        let indent = match self.width {
            Some(w) if w.saturating_sub(used) >= HANG_MIN => used,
            _ => indent,
        };
        let mut lines = self.lines(text, used, indent);
        if let Some(first) = lines.first_mut() {
            first.insert_str(0, head);
        }
        lines.join("\n")
    }

    /// `items` (a row's cells moved off its line) on lines starting with `indent`
    /// spaces, two spaces apart, a line broken between items only (an item longer
    /// than a line is broken between its words). None for no items.
    pub(crate) fn pack(&self, items: &[String], indent: usize) -> Vec<String> {
        const SEP: &str = "  ";
        let pad = " ".repeat(indent);
        let mut lines: Vec<String> = Vec::new();
        let mut line = String::new();
        for item in items {
            let w = measure_text_width(item);
            let fits = |line: &str| {
                self.width
                    .is_none_or(|width| measure_text_width(line) + SEP.len() + w <= width)
            };
            if line.is_empty() {
                line = format!("{pad}{item}");
            } else if fits(&line) {
                line.push_str(SEP);
                line.push_str(item);
            } else {
                lines.push(std::mem::replace(&mut line, format!("{pad}{item}")));
            }
        }
        if !line.is_empty() {
            lines.push(line);
        }
        lines
            .iter()
            .flat_map(|l| self.lines(l, 0, indent))
            .collect()
    }

    /// `text` as lines that fit, the first one after `used` columns already taken
    /// (not included), the next ones starting with `indent` spaces.
    pub(crate) fn lines(&self, text: &str, used: usize, indent: usize) -> Vec<String> {
        match self.width {
            Some(width) if used + measure_text_width(text) > width => {
                fill(text, used, indent.min(width / 2), width)
            }
            _ => vec![text.to_owned()],
        }
    }
}

/// A hanging text's next lines align with its first when this many columns remain.
pub(crate) const HANG_MIN: usize = 40;

/// The width of `term`'s lines, if known.
fn term_width(term: &Term) -> Option<usize> {
    let tty = term.size_checked().map(|(_, cols)| cols);
    width(tty, std::env::var("COLUMNS").ok().as_deref())
}

/// The terminal's columns when the stream is one; else `COLUMNS`, if a number.
fn width(tty: Option<u16>, columns: Option<&str>) -> Option<usize> {
    match tty {
        Some(cols) => Some(usize::from(cols)),
        None => columns
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|&c| c > 0),
    }
}

/// Words (runs of non-spaces, each with the spaces before it) placed on lines of at
/// most `width` columns; the spaces at a break are dropped.
fn fill(text: &str, used: usize, indent: usize, width: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let (mut lines, mut line) = (Vec::new(), String::new());
    // The column the line has reached, and whether it holds a word yet.
    let (mut col, mut empty) = (used, true);
    let mut rest = text;
    loop {
        let word_at = rest.find(|c: char| c != ' ').unwrap_or(rest.len());
        let word_end = rest[word_at..]
            .find(' ')
            .map_or(rest.len(), |end| word_at + end);
        let (spaces, mut word) = (&rest[..word_at], &rest[word_at..word_end]);
        rest = &rest[word_end..];
        if word.is_empty() {
            break; // the end, or trailing spaces
        }
        // A line holding a word, or the first one after a head, breaks before a word
        // that does not fit — unless the word would not fit a whole line either and
        // enough room is left here to start it up to one of its soft breaks.
        let (w, room) = (
            measure_text_width(word),
            width.saturating_sub(col + spaces.len()),
        );
        let breaks = !empty || (lines.is_empty() && used > 0);
        let starts_here =
            w + indent > width && room >= START_MIN && breaks_in(word, room).0.is_some();
        if breaks && w > room && !starts_here {
            lines.push(std::mem::replace(&mut line, pad.clone()));
            (col, empty) = (indent, true);
        }
        if !empty || lines.is_empty() {
            line.push_str(spaces);
            col += spaces.len();
        }
        // Longer than what is left of a fresh line: broken where it allows.
        while col + measure_text_width(word) > width {
            let (head, tail) = split_word(word, width.saturating_sub(col).max(1));
            line.push_str(head);
            lines.push(std::mem::replace(&mut line, pad.clone()));
            col = indent;
            word = tail;
        }
        line.push_str(word);
        col += measure_text_width(word);
        empty = false;
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Where `word` may break so that its head takes at most `room` columns: after its
/// last [`BREAK_AFTER`] character that allows it (`soft`), and after its last
/// character that fits (`hard`, at least one).
fn breaks_in(word: &str, room: usize) -> (Option<usize>, usize) {
    let (mut cols, mut hard, mut soft) = (0, 0, None);
    for (i, c) in word.char_indices() {
        let next = i + c.len_utf8();
        cols += measure_text_width(&word[i..next]);
        if cols > room {
            break;
        }
        hard = next;
        if BREAK_AFTER.contains(&c) && next < word.len() {
            soft = Some(next);
        }
    }
    (
        soft,
        hard.max(word.chars().next().map_or(0, char::len_utf8)),
    )
}

/// `word` split at its soft break within `room`, else its hard one.
fn split_word(word: &str, room: usize) -> (&str, &str) {
    let (soft, hard) = breaks_in(word, room);
    word.split_at(soft.unwrap_or(hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(width: usize) -> Fit {
        Fit {
            width: Some(width),
            cwd: Some(PathBuf::from("/work/repo")),
            home: Some(PathBuf::from("/home/ann")),
        }
    }

    #[test]
    fn the_width_is_the_terminal_s_then_columns_then_none() {
        assert_eq!(width(Some(80), Some("200")), Some(80));
        assert_eq!(width(None, Some("120")), Some(120));
        assert_eq!(width(None, Some("wide")), None);
        assert_eq!(width(None, Some("0")), None);
        assert_eq!(width(None, None), None);
    }

    #[test]
    fn paths_are_relative_or_under_home_with_a_width_only() {
        let f = at(80);
        let journal = Path::new("/work/repo/.capfleet/runs/r1/journal.jsonl");
        assert_eq!(f.path(journal), ".capfleet/runs/r1/journal.jsonl");
        assert_eq!(f.path(Path::new("/work/repo")), ".");
        assert_eq!(f.path(Path::new("/home/ann/x/y")), "~/x/y");
        assert_eq!(f.path(Path::new("/etc/hosts")), "/etc/hosts");
        let whole = Fit { width: None, ..f };
        assert_eq!(whole.path(journal), journal.display().to_string());
    }

    #[test]
    fn a_long_line_breaks_between_words_with_its_next_lines_indented() {
        let f = at(20);
        let line = "capfleet: run r1 (journal .capfleet/runs/r1/journal.jsonl)";
        let wrapped = f.wrap(line, 4);
        for l in wrapped.lines() {
            assert!(measure_text_width(l) <= 20, "{l:?} in {wrapped:?}");
        }
        let words: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(words[..3], ["capfleet:", "run", "r1"]);
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("    ")));
        // The path, longer than a line, broke after its slashes: nothing lost.
        let joined: String = wrapped.split_whitespace().collect();
        assert_eq!(joined, line.replace(' ', ""));
        assert_eq!(f.wrap("short  line", 4), "short  line");
        assert_eq!(Fit::default().wrap(line, 4), line);
    }

    #[test]
    fn words_are_never_split_when_they_fit_a_line() {
        let f = at(30);
        let text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do";
        let wrapped = f.wrap(text, 2);
        let back: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(back, text.split(' ').collect::<Vec<_>>());
        for l in wrapped.lines() {
            assert!(l.len() <= 30, "{l:?}");
        }
    }

    #[test]
    fn styled_words_are_measured_without_their_escapes() {
        let f = at(12);
        let bold = "\x1b[1mwarning:\x1b[0m a b";
        assert_eq!(f.wrap(bold, 2), bold, "12 columns shown: it fits");
    }

    #[test]
    fn a_hanging_text_goes_on_under_itself_or_indented() {
        let head = "12:00:00.000  planner ";
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let wide = at(70).hang(head, text, 4);
        let lines: Vec<&str> = wide.lines().collect();
        assert!(lines.len() > 1 && lines[0].starts_with(head), "{wide}");
        assert!(lines[1].starts_with(&" ".repeat(head.len())), "{wide}");
        // A JSON value without spaces starts after the head up to a comma when one
        // fits there, and on the next line otherwise: never broken inside a name.
        let json = r#"{"call_id":"toolu_sim_000009","name":"TodoWrite","input":{"todos":[]}}"#;
        for used in [50, 58] {
            let row = at(80).hang(&"x".repeat(used), json, 14);
            assert!(row.lines().all(|l| l.len() <= 80), "{row}");
            assert!(row.contains(r#""call_id":"toolu_sim_000009","#), "{row}");
            let back: String = row.split_whitespace().collect();
            assert_eq!(back, format!("{}{json}", "x".repeat(used)));
        }
        let narrow = at(40).hang(head, text, 4);
        assert!(
            narrow
                .lines()
                .skip(1)
                .all(|l| l.starts_with("    ") && l.len() <= 40)
        );
        assert!(narrow.lines().all(|l| l.len() <= 40), "{narrow}");
    }
}
