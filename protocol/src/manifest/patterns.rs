//! The CAP regex subset (spec §5.4): patterns compiled once, in multi-line mode, with
//! look-around and backreferences rejected by name.

use regex::{Regex, RegexBuilder};

use super::error::{ManifestError, RegexConstruct};
use super::reader::Reader;

/// Every pattern of a manifest, compiled once at validation so drivers never recompile.
///
/// All are built with `multi_line(true)` (`^`/`$` match at each logical line) and
/// `crlf(true)` (a `\r` before `\n` does not defeat `$`).
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    /// `parse.idle` (the §5.3 default pair when unset).
    pub idle: Vec<Regex>,
    /// `parse.tool_call_start`.
    pub tool_call_start: Option<Regex>,
    /// `parse.tool_call_end`.
    pub tool_call_end: Option<Regex>,
    /// `parse.plan_section`.
    pub plan_section: Option<Regex>,
    /// `parse.thought_section`.
    pub thought_section: Option<Regex>,
    /// `parse.ask_yes_no`.
    pub ask_yes_no: Option<Regex>,
    /// `parse.ask_options`.
    pub ask_options: Option<Regex>,
    /// `parse.error_lines`, in order.
    pub error_lines: Vec<Regex>,
    /// `startup.ready_when.pattern`.
    pub ready_when: Option<Regex>,
    /// `agent.version_match`, applied to `--version` output.
    pub version_match: Option<Regex>,
    /// `probe.version_pattern`.
    pub version_pattern: Option<Regex>,
}

impl PartialEq for Patterns {
    /// Equal when compiled from the same sources.
    fn eq(&self, other: &Self) -> bool {
        fn srcs<'a>(v: impl IntoIterator<Item = &'a Regex>) -> Vec<&'a str> {
            v.into_iter().map(Regex::as_str).collect()
        }
        fn all(p: &Patterns) -> Vec<Vec<&str>> {
            vec![
                srcs(&p.idle),
                srcs(&p.tool_call_start),
                srcs(&p.tool_call_end),
                srcs(&p.plan_section),
                srcs(&p.thought_section),
                srcs(&p.ask_yes_no),
                srcs(&p.ask_options),
                srcs(&p.error_lines),
                srcs(&p.ready_when),
                srcs(&p.version_match),
                srcs(&p.version_pattern),
            ]
        }
        all(self) == all(other)
    }
}

/// Compile one pattern of the CAP subset, multi-line.
pub fn compile(pattern: &str) -> Result<Regex, PatternError> {
    if let Some(construct) = forbidden_construct(pattern) {
        return Err(PatternError::Unsupported(construct));
    }
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .build()
        .map_err(|e| {
            let full = e.to_string();
            if full.contains("look-around") {
                return PatternError::Unsupported(RegexConstruct::LookAhead);
            }
            if full.contains("backreference") {
                return PatternError::Unsupported(RegexConstruct::Backreference);
            }
            // regex's message is a multi-line caret display; keep its `error:` line.
            let msg = full
                .lines()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .map(str::to_owned)
                .unwrap_or(full);
            PatternError::Syntax(msg)
        })
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// A construct outside the §5.4 subset (look-around, backreference).
    Unsupported(RegexConstruct),
    /// Not a valid regex; the engine's message.
    Syntax(String),
}

/// Find look-ahead, look-behind or a backreference outside character classes.
pub fn forbidden_construct(pattern: &str) -> Option<RegexConstruct> {
    let b = pattern.as_bytes();
    let mut i = 0;
    let mut class_depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                let next = b.get(i + 1).copied();
                if class_depth == 0 {
                    match next {
                        Some(b'1'..=b'9') => return Some(RegexConstruct::Backreference),
                        Some(b'k') if matches!(b.get(i + 2), Some(b'<' | b'{' | b'\'')) => {
                            return Some(RegexConstruct::Backreference);
                        }
                        _ => {}
                    }
                }
                i += 2;
                continue;
            }
            b'[' => {
                class_depth += 1;
                // A `]` right after `[` or `[^` is a literal.
                let mut j = i + 1;
                if b.get(j) == Some(&b'^') {
                    j += 1;
                }
                if b.get(j) == Some(&b']') {
                    j += 1;
                }
                i = j;
                continue;
            }
            b']' if class_depth > 0 => class_depth -= 1,
            b'(' if class_depth == 0 => {
                let rest = &b[i + 1..];
                if rest.starts_with(b"?=") || rest.starts_with(b"?!") {
                    return Some(RegexConstruct::LookAhead);
                }
                if rest.starts_with(b"?<=") || rest.starts_with(b"?<!") {
                    return Some(RegexConstruct::LookBehind);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A backslash before a character that is no regex metacharacter and no escape
/// letter (`\›`, `\ `): the first such escape as written, and the pattern with every
/// one of them replaced by its literal. `None` when there is none.
pub fn needless_escapes(pattern: &str) -> Option<(String, String)> {
    const META: &str = "\\.+*?()|[]{}^$#&-~";
    let mut out = String::with_capacity(pattern.len());
    let mut first = None;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(n) if !n.is_ascii_alphanumeric() && !META.contains(n) => {
                first.get_or_insert_with(|| format!("`\\{n}`"));
                out.push(n);
            }
            Some(n) => {
                out.push('\\');
                out.push(n);
            }
            None => out.push('\\'),
        }
    }
    first.map(|f| (f, out))
}

/// How a pattern fares against rendered rows: the screen's text, trailing blanks
/// trimmed, one row (or logical line) at a time, never a line break inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowFit {
    /// Matches rows as written.
    AsWritten,
    /// Literal blanks right before an end anchor (`^> $`) are never on a rendered row:
    /// this is the pattern with them optional (`^> *$`), which matches the prompt as
    /// rendered.
    Relaxed(String),
    /// Can never match a rendered row; the reason.
    Never(&'static str),
}

/// Checks `pattern` against what a rendered row can be (see [`RowFit`]).
pub fn row_fit(pattern: &str) -> RowFit {
    let relaxed = relax_trailing_blanks(pattern);
    let effective = relaxed.as_deref().unwrap_or(pattern);
    if let Some(reason) = never_on_a_row(effective) {
        return RowFit::Never(reason);
    }
    match relaxed {
        Some(p) => RowFit::Relaxed(p),
        None => RowFit::AsWritten,
    }
}

/// Whether the byte at `i` is escaped by an odd run of backslashes before it.
fn escaped(b: &[u8], i: usize) -> bool {
    b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1
}

/// Indices of the `$` end anchors outside classes: unescaped, followed by the end of
/// the pattern, `|` or `)`.
fn end_anchors(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut class = false;
    for i in 0..b.len() {
        match b[i] {
            b'[' if !class && !escaped(b, i) => class = true,
            b']' if class && !escaped(b, i) => class = false,
            b'$' if !class
                && !escaped(b, i)
                && matches!(b.get(i + 1), None | Some(b'|' | b')')) =>
            {
                out.push(i);
            }
            _ => {}
        }
    }
    out
}

/// The pattern with each run of literal spaces right before an end anchor made
/// optional (` ` -> ` *`); `None` when there is none.
fn relax_trailing_blanks(pattern: &str) -> Option<String> {
    let b = pattern.as_bytes();
    let mut out = pattern.to_owned();
    let mut changed = false;
    for &end in end_anchors(b).iter().rev() {
        let mut start = end;
        // An escaped blank (`\ `) keeps its backslash, which then escapes ` *`'s blank.
        while start > 0 && b[start - 1] == b' ' {
            start -= 1;
        }
        if start < end {
            out.replace_range(start..end, " *");
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Why `pattern` can never match a rendered row, if it cannot: it needs a line break,
/// or whitespace right before an end anchor.
fn never_on_a_row(pattern: &str) -> Option<&'static str> {
    if pattern.contains("\\n") || pattern.contains("\\r") {
        return Some("it needs a line break, and a rendered row has none");
    }
    let b = pattern.as_bytes();
    for end in end_anchors(b) {
        let before = &pattern[..end];
        let blank_before = [
            " +", "\\s", "\\s+", "\\t", "\\t+", "[ ]", "[ ]+", "[ \\t]", "[ \\t]+",
        ]
        .iter()
        .any(|t| before.ends_with(t) && !escaped(b, end - t.len()));
        if blank_before {
            return Some(
                "it needs whitespace at the end of the line, and a rendered row's trailing \
                 blanks are trimmed",
            );
        }
    }
    None
}

/// Compile a pattern matched against rendered rows (`[parse]`, `ready_when`): per
/// [`row_fit`], relaxed where its trailing blanks could never be on a row (silently:
/// it then matches the prompt as rendered, the spec's own `^> $` included), and a
/// warning for `key` when it can never match.
pub(crate) fn compile_row_field(
    r: &mut Reader,
    key: &str,
    span: Option<std::ops::Range<usize>>,
    pattern: &str,
) -> Option<Regex> {
    match row_fit(pattern) {
        RowFit::AsWritten => compile_field(r, key, span, pattern),
        RowFit::Relaxed(relaxed) => compile_field(r, key, span, &relaxed),
        RowFit::Never(reason) => {
            let note = format!("`{pattern}` can never match a rendered row: {reason}");
            r.note(key, span.clone(), note);
            compile_field(r, key, span, pattern)
        }
    }
}

/// Compile `pattern` for the field `key`, recording an error on failure.
pub(crate) fn compile_field(
    r: &mut Reader,
    key: &str,
    span: Option<std::ops::Range<usize>>,
    pattern: &str,
) -> Option<Regex> {
    match compile(pattern) {
        Ok(re) => Some(re),
        // Python's `re` (tai's flavor) reads `\›` as `›`; so do we, with a warning.
        Err(PatternError::Syntax(_))
            if let Some((literal, fixed)) = needless_escapes(pattern)
                && let Ok(re) = compile(&fixed) =>
        {
            let note = format!(
                "{literal} escapes no regex metacharacter: read as the literal (write it \
                 unescaped: {fixed:?})"
            );
            r.note(key, span, note);
            Some(re)
        }
        Err(PatternError::Unsupported(construct)) => {
            let at = r.at(key, span);
            r.push(ManifestError::UnsupportedRegex {
                at,
                construct,
                pattern: pattern.to_owned(),
            });
            None
        }
        Err(PatternError::Syntax(message)) => {
            let at = r.at(key, span);
            r.push(ManifestError::Regex {
                at,
                pattern: pattern.to_owned(),
                message,
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needless_escapes_become_literals() {
        let (first, fixed) = needless_escapes(r"^\›\s*$").expect("one");
        assert_eq!((first.as_str(), fixed.as_str()), (r"`\›`", r"^›\s*$"));
        assert!(compile(r"^\›\s*$").is_err(), "the regex crate refuses it");
        assert!(compile(&fixed).expect("fixed").is_match("›  "));
        assert_eq!(needless_escapes(r"a\.b\d\\"), None, "real escapes stay");
        assert_eq!(needless_escapes(r"\ x").map(|(_, f)| f), Some(" x".into()));
    }

    #[test]
    fn scanner() {
        use RegexConstruct::*;
        assert_eq!(forbidden_construct("a(?=b)"), Some(LookAhead));
        assert_eq!(forbidden_construct("a(?!b)"), Some(LookAhead));
        assert_eq!(forbidden_construct("(?<=a)b"), Some(LookBehind));
        assert_eq!(forbidden_construct("(?<!a)b"), Some(LookBehind));
        assert_eq!(forbidden_construct(r"(a)\1"), Some(Backreference));
        assert_eq!(forbidden_construct(r"(?<x>a)\k<x>"), Some(Backreference));
        assert_eq!(forbidden_construct(r"[(?=]x"), None);
        assert_eq!(forbidden_construct(r"[]\1]"), None);
        assert_eq!(forbidden_construct(r"\(?=x"), None);
        assert_eq!(forbidden_construct(r"(?P<n>a)(?<m>b)"), None);
        assert_eq!(forbidden_construct(r"\\1"), None);
    }

    #[test]
    fn row_fit_relaxes_trailing_blanks_and_spots_the_impossible() {
        assert_eq!(row_fit("^>\\s*$"), RowFit::AsWritten);
        assert_eq!(row_fit("^> $"), RowFit::Relaxed("^> *$".into()));
        assert_eq!(
            row_fit("^(> $|❯  $)"),
            RowFit::Relaxed("^(> *$|❯ *$)".into())
        );
        assert_eq!(row_fit("^\\$ $"), RowFit::Relaxed("^\\$ *$".into()));
        assert_eq!(row_fit("[ $]"), RowFit::AsWritten);
        assert_eq!(row_fit("^>\\ $"), RowFit::Relaxed("^>\\ *$".into()));
        assert!(matches!(row_fit("^>\\s+$"), RowFit::Never(_)));
        assert!(matches!(row_fit("^> +$"), RowFit::Never(_)));
        assert!(matches!(row_fit("a\\nb"), RowFit::Never(_)));
        let relaxed = compile("^> *$").unwrap();
        assert!(relaxed.is_match(">") && relaxed.is_match("> "));
    }

    #[test]
    fn syntax_error_is_one_line() {
        let Err(PatternError::Syntax(m)) = compile("(ab") else {
            panic!("expected syntax error")
        };
        assert!(!m.contains('\n'), "{m}");
        assert!(m.contains("unclosed"), "{m}");
    }
}
