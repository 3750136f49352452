//! A span-aware reader over `toml::de::DeTable`: typed getters that record every
//! error and warning (with line numbers) instead of stopping at the first.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{Location, ManifestError, ManifestWarning, WarningKind};

/// A string-valued enum with fixed wire names.
pub(crate) trait Wire: Sized + Copy + 'static {
    const ALL: &'static [(Self, &'static str)];

    fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, w)| *w == s).map(|(v, _)| *v)
    }

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

/// `path.key`, or `key` at top level.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub(crate) struct Reader {
    origin: String,
    line_starts: Vec<usize>,
    pub(crate) errors: Vec<ManifestError>,
    pub(crate) warnings: Vec<ManifestWarning>,
}

impl Reader {
    pub(crate) fn new(origin: &str, src: &str) -> Self {
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
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset).max(1)
    }

    pub(crate) fn at(&self, key: &str, span: Option<Range<usize>>) -> Location {
        Location {
            origin: self.origin.clone(),
            line: span.map(|s| self.line_of(s.start)),
            key: key.to_owned(),
        }
    }

    pub(crate) fn push(&mut self, e: ManifestError) {
        self.errors.push(e);
    }

    pub(crate) fn invalid(
        &mut self,
        key: &str,
        span: Option<Range<usize>>,
        reason: impl Into<String>,
    ) {
        let at = self.at(key, span);
        self.push(ManifestError::InvalidValue {
            at,
            reason: reason.into(),
        });
    }

    pub(crate) fn note(&mut self, key: &str, span: Option<Range<usize>>, note: impl Into<String>) {
        let at = self.at(key, span);
        self.warnings.push(ManifestWarning {
            at,
            kind: WarningKind::Note(note.into()),
        });
    }

    pub(crate) fn missing(&mut self, key: &str, container: Option<Range<usize>>) {
        let at = self.at(key, container);
        self.push(ManifestError::Missing { at });
    }

    fn wrong_type(&mut self, key: &str, v: &Spanned<DeValue<'_>>, expected: &'static str) {
        let at = self.at(key, Some(v.span()));
        self.push(ManifestError::WrongType {
            at,
            expected,
            found: v.get_ref().type_str(),
        });
    }

    /// Warn about every key not in `known` and not `x-` prefixed.
    pub(crate) fn unknown_keys(&mut self, t: &DeTable<'_>, path: &str, known: &[&str]) {
        for (k, _) in t.iter() {
            let name: &str = k.get_ref();
            if !known.contains(&name) && !name.starts_with("x-") {
                let at = self.at(&join(path, name), Some(k.span()));
                self.warnings.push(ManifestWarning {
                    at,
                    kind: WarningKind::UnknownKey,
                });
            }
        }
    }

    pub(crate) fn string(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<String> {
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
    pub(crate) fn string_or_date(
        &mut self,
        t: &DeTable<'_>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        match t.get(key)?.get_ref() {
            DeValue::Datetime(d) => Some(d.to_string()),
            _ => self.string(t, path, key),
        }
    }

    pub(crate) fn boolean(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<bool> {
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
    pub(crate) fn uint<T: TryFrom<i64>>(
        &mut self,
        t: &DeTable<'_>,
        path: &str,
        key: &str,
    ) -> Option<T> {
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

    /// An array of strings, with each bad element reported.
    pub(crate) fn strings(
        &mut self,
        t: &DeTable<'_>,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let v = t.get(key)?;
        self.string_array(&join(path, key), v)
    }

    pub(crate) fn string_array(
        &mut self,
        dotted: &str,
        v: &Spanned<DeValue<'_>>,
    ) -> Option<Vec<String>> {
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
    pub(crate) fn string_or_list(
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
    pub(crate) fn table<'a, 'i>(
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
    pub(crate) fn wire<E: Wire>(&mut self, t: &DeTable<'_>, path: &str, key: &str) -> Option<E> {
        let s = self.string(t, path, key)?;
        if let Some(e) = E::from_wire(&s) {
            return Some(e);
        }
        let names: Vec<&str> = E::ALL.iter().map(|(_, w)| *w).collect();
        let span = t.get(key).map(|v| v.span());
        self.invalid(
            &join(path, key),
            span,
            format!("{s:?} is not one of {}", names.join(" | ")),
        );
        None
    }

    /// Span of a key's value, for locating errors found after reading.
    pub(crate) fn span_of(t: &DeTable<'_>, key: &str) -> Option<Range<usize>> {
        t.get(key).map(|v| v.span())
    }
}
