//! Typed, located access to script TOML tables, and script errors.

use std::fmt;

use serde_json::Value;
use toml::Table;

/// A script validation error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScriptError {
    pub origin: String,
    pub location: String,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: {}: {}", self.origin, self.location, self.message)
        }
    }
}

impl std::error::Error for ScriptError {}

/// Where in the script a value sits: builds error messages.
#[derive(Debug, Clone)]
pub(super) struct Loc<'a> {
    origin: &'a str,
    location: String,
}

impl<'a> Loc<'a> {
    /// The top of a script.
    pub(super) fn root(origin: &'a str) -> Loc<'a> {
        Loc {
            origin,
            location: String::new(),
        }
    }

    /// The location text, e.g. `turn 2 step 3`.
    pub(super) fn location(&self) -> &str {
        &self.location
    }

    pub(super) fn err(&self, key: &str, message: impl fmt::Display) -> ScriptError {
        let message = if key.is_empty() {
            message.to_string()
        } else {
            format!("key `{key}`: {message}")
        };
        ScriptError {
            origin: self.origin.to_string(),
            location: self.location.clone(),
            message,
        }
    }

    pub(super) fn at(&self, location: String) -> Loc<'a> {
        Loc {
            origin: self.origin,
            location,
        }
    }
}

/// Typed access to the keys of one TOML table, with error locations.
pub(super) struct Fields<'t, 'a> {
    pub table: &'t Table,
    pub loc: Loc<'a>,
}

impl<'t, 'a> Fields<'t, 'a> {
    /// The fields of `value`, a table (else an error at `loc`).
    pub(super) fn of(loc: &Loc<'a>, value: &'t toml::Value) -> Result<Self, ScriptError> {
        let table = value
            .as_table()
            .ok_or_else(|| loc.err("", "expected a table"))?;
        Ok(Fields {
            table,
            loc: loc.clone(),
        })
    }
}

impl Fields<'_, '_> {
    /// Rejects keys outside `allowed`.
    pub(super) fn only(&self, allowed: &[&str]) -> Result<(), ScriptError> {
        match self.table.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self
                .loc
                .err(k, format!("unknown key (allowed: {})", allowed.join(", ")))),
            None => Ok(()),
        }
    }

    pub(super) fn str(&self, key: &str) -> Result<Option<String>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.loc.err(key, "expected a string")),
        }
    }

    pub(super) fn u64(&self, key: &str) -> Result<Option<u64>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => u64::try_from(*i)
                .map(Some)
                .map_err(|_| self.loc.err(key, "expected a non-negative integer")),
            Some(_) => Err(self.loc.err(key, "expected a non-negative integer")),
        }
    }

    pub(super) fn f64(&self, key: &str) -> Result<Option<f64>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(x)) if *x >= 0.0 => Ok(Some(*x)),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as f64)),
            Some(_) => Err(self.loc.err(key, "expected a non-negative number")),
        }
    }

    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(_) => Err(self.loc.err(key, "expected a boolean")),
        }
    }

    pub(super) fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| self.loc.err(key, "expected an array of strings"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.loc.err(key, "expected an array of strings")),
        }
    }

    pub(super) fn table(&self, key: &str) -> Result<Option<&Table>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(t)),
            Some(_) => Err(self.loc.err(key, "expected a table")),
        }
    }

    /// Any TOML value as JSON (tool inputs, `_meta`).
    pub(super) fn json(&self, key: &str) -> Result<Option<Value>, ScriptError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(v) => serde_json::to_value(v)
                .map(Some)
                .map_err(|e| self.loc.err(key, e)),
        }
    }

    /// A required string-valued key.
    pub(super) fn req_str(&self, key: &str) -> Result<String, ScriptError> {
        self.str(key)?.ok_or_else(|| self.loc.err(key, "missing"))
    }

    /// The value of a key that must be exactly `true`.
    pub(super) fn flag_true(&self, key: &str) -> Result<(), ScriptError> {
        match self.bool(key)? {
            Some(true) => Ok(()),
            _ => Err(self.loc.err(key, "expected `true`")),
        }
    }
}
