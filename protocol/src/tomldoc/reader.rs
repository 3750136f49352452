//! The reader: typed getters over `toml::de::DeTable` that record every error (of the
//! loader's [`Finding`] type) and warning, with line numbers.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::finding::{Finding, Location, Warning, WarningKind, nearest};

/// A string-valued enum with fixed wire names.
pub trait Wire: Sized + Copy + 'static {
    /// Every value with its wire name.
    const ALL: &'static [(Self, &'static str)];

    /// The value spelled `s` on the wire, if any.
    fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, w)| *w == s).map(|(v, _)| *v)
    }

    /// The value's wire name.
    fn wire(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::ALL
            .iter()
            .find(|(v, _)| *v == self)
            .map(|(_, w)| *w)
            .unwrap_or("")
    }
}

/// The keys of `t` not in `known` and not `x-` prefixed, each with its span and the
/// nearest known key (for a loader that makes some unknown keys errors).
pub fn unknown<'t>(
    t: &'t DeTable<'_>,
    known: &'t [&'static str],
) -> impl Iterator<Item = (&'t str, Range<usize>, Option<&'static str>)> + 't {
    t.iter().filter_map(move |(k, _)| {
        let name: &str = k.get_ref();
        (!known.contains(&name) && !name.starts_with("x-"))
            .then(|| (name, k.span(), nearest(name, known)))
    })
}

/// `path.key`, or `key` at top level.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Reads one TOML document: typed getters that record each error of type `E` and each warning, with its line, instead of stopping at the first.
pub struct Reader<E> {
    origin: String,
    line_starts: Vec<usize>,
    /// The errors found so far, in the order they were found.
    pub errors: Vec<E>,
    /// The warnings found so far.
    pub warnings: Vec<Warning>,
}

impl<E: Finding> Reader<E> {
    /// A reader of `src`, naming `origin` in its findings.
    pub fn new(origin: &str, src: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Reader {
            origin: origin.to_owned(),
            line_starts,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// 1-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset).max(1)
    }

    /// The location of `key`, with the line of `span` when known.
    pub fn at(&self, key: &str, span: Option<Range<usize>>) -> Location {
        Location {
            origin: self.origin.clone(),
            line: span.map(|s| self.line_of(s.start)),
            key: key.to_owned(),
        }
    }

    /// The origin every finding names.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Records an error.
    pub fn push(&mut self, e: E) {
        self.errors.push(e);
    }

    /// Records that `key`'s value is not acceptable, and why.
    pub fn invalid(&mut self, key: &str, span: Option<Range<usize>>, reason: impl Into<String>) {
        let at = self.at(key, span);
        self.push(E::invalid(at, reason.into()));
    }

    /// Records a warning remark on `key`.
    pub fn note(&mut self, key: &str, span: Option<Range<usize>>, note: impl Into<String>) {
        let at = self.at(key, span);
        self.warnings.push(Warning {
            at,
            kind: WarningKind::Note(note.into()),
        });
    }

    /// Records that `key` is absent, at the line of its `container`.
    pub fn missing(&mut self, key: &str, container: Option<Range<usize>>) {
        let at = self.at(key, container);
        self.push(E::missing(at));
    }

    /// Records that `key`'s value is not of the `expected` type.
    pub fn wrong_type(&mut self, key: &str, v: &Spanned<DeValue<'_>>, expected: &'static str) {
        let at = self.at(key, Some(v.span()));
        self.push(E::wrong_type(at, expected, v.get_ref().type_str()));
    }

    /// Warn about every key not in `known` and not `x-` prefixed, suggesting the
    /// nearest known key.
    pub fn unknown_keys(&mut self, t: &DeTable<'_>, path: &str, known: &[&'static str]) {
        for (name, span, suggestion) in unknown(t, known) {
            let at = self.at(&join(path, name), Some(span));
            self.warnings.push(Warning {
                at,
                kind: WarningKind::UnknownKey { suggestion },
            });
        }
    }

    /// `path.key` as a string; a value of another type is reported.
    pub fn string(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<String> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong_type(&join(path, key), v, "a string");
                None
            }
        }
    }

    /// A string, also accepting a bare TOML date (for `revision = 2026-05-18`).
    pub fn string_or_date(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<String> {
        match t.get(key)?.get_ref() {
            DeValue::Datetime(d) => Some(d.to_string()),
            _ => self.string(t, path, key),
        }
    }

    /// `path.key` as a boolean; a value of another type is reported.
    pub fn boolean(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<bool> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(&join(path, key), v, "a boolean");
                None
            }
        }
    }

    /// A non-negative integer that fits `T`.
    pub fn uint<T: TryFrom<i64>>(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<T> {
        let v = t.get(key)?;
        let DeValue::Integer(i) = v.get_ref() else {
            self.wrong_type(&join(path, key), v, "an integer");
            return None;
        };
        let parsed = i64::from_str_radix(i.as_str(), i.radix())
            .ok()
            .filter(|n| *n >= 0);
        match parsed.and_then(|n| T::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                let reason = format!("{} is out of range", i.as_str());
                self.invalid(&join(path, key), Some(v.span()), reason);
                None
            }
        }
    }

    /// A number, integer or float (`nan` and `inf` included: range checks are the
    /// caller's).
    pub fn number(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<f64> {
        let v = t.get(key)?;
        let text = match v.get_ref() {
            DeValue::Integer(i) => {
                let n = i64::from_str_radix(i.as_str(), i.radix()).ok();
                if n.is_none() {
                    let reason = format!("{} is out of range", i.as_str());
                    self.invalid(&join(path, key), Some(v.span()), reason);
                }
                return n.map(|n| n as f64);
            }
            DeValue::Float(f) => f.as_str().replace('_', ""),
            _ => {
                self.wrong_type(&join(path, key), v, "a number");
                return None;
            }
        };
        let unsigned = text.trim_start_matches(['+', '-']);
        let negative = text.starts_with('-');
        let parsed = match unsigned {
            "nan" => Some(f64::NAN),
            "inf" if negative => Some(f64::NEG_INFINITY),
            "inf" => Some(f64::INFINITY),
            _ => text.parse().ok(),
        };
        if parsed.is_none() {
            self.invalid(
                &join(path, key),
                Some(v.span()),
                format!("{text} is not a number"),
            );
        }
        parsed
    }

    /// An array of strings, with each bad element reported.
    pub fn strings(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<Vec<String>> {
        let v = t.get(key)?;
        self.string_array(&join(path, key), v)
    }

    /// `v` as an array of strings (named `dotted` in findings), with each bad element reported.
    pub fn string_array(&mut self, dotted: &str, v: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(dotted, v, "an array of strings");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match item.get_ref() {
                DeValue::String(s) => out.push(s.to_string()),
                _ => {
                    self.wrong_type(&format!("{dotted}[{i}]"), item, "a string");
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// A string or an array of strings (e.g. `parse.idle`).
    pub fn string_or_list(
        &mut self,
        t: &DeTable<'_>,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(vec![s.to_string()]),
            DeValue::Array(_) => self.string_array(&join(path, key), v),
            _ => {
                self.wrong_type(&join(path, key), v, "a string or an array of strings");
                None
            }
        }
    }

    /// A sub-table, with its span (the header or inline table).
    pub fn table<'a, 'i>(
        &mut self,
        t: &'a DeTable<'i>,
        path: &str,
        key: &str,
    ) -> Option<(&'a DeTable<'i>, Range<usize>)> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Table(sub) => Some((sub, v.span())),
            _ => {
                self.wrong_type(&join(path, key), v, "a table");
                None
            }
        }
    }

    /// A string from a fixed set of wire names.
    pub fn wire<W: Wire>(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<W> {
        let s = self.string(t, path, key)?;
        if let Some(w) = W::from_wire(&s) {
            return Some(w);
        }
        let names: Vec<&str> = W::ALL.iter().map(|(_, w)| *w).collect();
        let span = t.get(key).map(|v| v.span());
        self.invalid(
            &join(path, key),
            span,
            format!("{s:?} is not one of {}", names.join(" | ")),
        );
        None
    }

    /// Parse `src`; on syntax errors, every one of them as a finding.
    pub fn parse<'i>(&self, src: &'i str) -> Result<Spanned<DeTable<'i>>, Vec<E>> {
        let (root, syntax) = DeTable::parse_recoverable(src);
        if syntax.is_empty() {
            return Ok(root);
        }
        Err(syntax
            .into_iter()
            .map(|e| E::syntax(self.at("", e.span()), e.message().trim().to_owned()))
            .collect())
    }

    /// The errors and warnings recorded, each sorted by line.
    pub fn finish(self) -> (Vec<E>, Vec<Warning>) {
        let (mut errors, mut warnings) = (self.errors, self.warnings);
        errors.sort_by_key(|e| e.line().unwrap_or(usize::MAX));
        warnings.sort_by_key(|w| w.at.line.unwrap_or(usize::MAX));
        (errors, warnings)
    }

    /// Span of a key's value, for locating errors found after reading.
    pub fn span_of(t: &DeTable<'_>, key: &str) -> Option<Range<usize>> {
        t.get(key).map(|v| v.span())
    }
}
