//! `[chaos]`: a chaos run's faults, read into the same keys as `capfleet run --chaos`
//! (`capfleet_engine::chaos::spec`), every bad key named with file, line and fix.
//!
//! ```toml
//! [chaos]
//! seed = 7
//! target = ["worker-*"]                 # names, globs, binding:<name>; default: all
//! kill = "0.2/turn"                     # probability per turn attempt
//! hang = "1/min"                        # on average per minute of the run
//! term = { at = ["30s", "2m"] }         # at those times after the start
//! exit = { rate = "0.1/turn", target = "lead" }
//! hang_for = "2s"                       # SIGCONT after; default "never"
//! self_kill = { at = ["5s"] }           # with `capfleet run --resume-on-crash`
//! max_self_kills = 3
//! ```

use std::collections::HashMap;
use std::ops::Range;

use capfleet_engine::chaos::{ChaosSpec, Entry, Raw, Target};
use capfleet_engine::tomldoc::join;
use toml::de::{DeTable, DeValue};

use super::config::SessionEntry;
use super::read::Reader;

const PATH: &str = "chaos";

/// `[chaos]`, if present and valid (its problems are recorded in `r`).
pub(super) fn read(
    r: &mut Reader,
    root: &DeTable<'_>,
    sessions: &[SessionEntry],
) -> Option<ChaosSpec> {
    let (t, span) = r.table(root, "", PATH)?;
    let mut entries = Vec::new();
    let mut spans: HashMap<String, Range<usize>> = HashMap::new();
    for (key, v) in t {
        let key = key.get_ref().to_string();
        match v.get_ref() {
            DeValue::Table(sub) => {
                for (field, fv) in sub {
                    let dotted = format!("{key}.{}", field.get_ref());
                    if let Some(value) = raw(r, &dotted, fv) {
                        spans.insert(dotted.clone(), fv.span());
                        entries.push(Entry { key: dotted, value });
                    }
                }
            }
            _ => {
                if let Some(value) = raw(r, &key, v) {
                    spans.insert(key.clone(), v.span());
                    entries.push(Entry { key, value });
                }
            }
        }
    }
    match ChaosSpec::build(&entries) {
        Ok(spec) => {
            let names: Vec<&str> = sessions.iter().map(|s| s.name.value.as_str()).collect();
            let mut known = true;
            for (key, name) in unknown_sessions(&spec, &names) {
                known = false;
                // Written for the fault, or the `target` every fault takes.
                let key = if spans.contains_key(&key) {
                    key
                } else {
                    "target".into()
                };
                let at = spans.get(&key).cloned().or(Some(span.clone()));
                let reason = format!(
                    "{name:?} is no session of this fleet ({}); name one, or use a glob \
                     (\"worker-*\") or binding:<name>",
                    names.join(", ")
                );
                r.invalid(&join(PATH, &key), at, reason);
            }
            known.then_some(spec)
        }
        Err(errors) => {
            for e in errors {
                let at = spans.get(&e.key).cloned().or(Some(span.clone()));
                r.invalid(&join(PATH, &e.key), at, e.reason);
            }
            None
        }
    }
}

/// The targets named (not globs, not bindings) that are no session: (key, name).
fn unknown_sessions(spec: &ChaosSpec, names: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rule in &spec.rules {
        for t in &rule.targets {
            if let Target::Name(n) = t
                && !names.contains(&n.as_str())
            {
                let key = format!("{}.target", rule.kind);
                if !out.iter().any(|(_, m)| m == n) {
                    out.push((key, n.clone()));
                }
            }
        }
    }
    out
}

/// A value as the spec's keys take it: a string, a number, or an array of strings.
fn raw(r: &mut Reader, dotted: &str, v: &toml::Spanned<DeValue<'_>>) -> Option<Raw> {
    Some(match v.get_ref() {
        DeValue::String(s) => Raw::Text(s.to_string()),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Raw::Int(n),
            Err(_) => {
                r.invalid(&join(PATH, dotted), Some(v.span()), "out of range");
                return None;
            }
        },
        DeValue::Float(f) => match f.as_str().replace('_', "").parse() {
            Ok(n) => Raw::Float(n),
            Err(_) => {
                r.invalid(&join(PATH, dotted), Some(v.span()), "not a number");
                return None;
            }
        },
        DeValue::Array(_) => Raw::List(r.string_array(&join(PATH, dotted), v)?),
        _ => {
            r.wrong_type(
                &join(PATH, dotted),
                v,
                "a string (\"0.2/turn\"), a number or an array of strings",
            );
            return None;
        }
    })
}

/// `capfleet run --chaos SPEC` for `fleet`: the spec, or every problem (a session
/// named that is not in the fleet among them).
pub fn inline(text: &str, fleet: &super::Fleet) -> Result<ChaosSpec, Vec<String>> {
    let spec = ChaosSpec::parse_inline(text)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    let names: Vec<&str> = fleet
        .sessions
        .iter()
        .map(|s| s.spec.name.as_str())
        .collect();
    let unknown: Vec<String> = unknown_sessions(&spec, &names)
        .into_iter()
        .map(|(key, name)| {
            format!(
                "{key}: {name:?} is no session of fleet {} ({})",
                fleet.name,
                names.join(", ")
            )
        })
        .collect();
    if unknown.is_empty() {
        Ok(spec)
    } else {
        Err(unknown)
    }
}
