//! Cross-reference checks on a read fleet file, before anything spawns: names,
//! start, routes, cycles and budgets.

use std::collections::{HashMap, HashSet};

use capfleet_engine::tomldoc::Location;

use super::config::{At, FleetFile, HUMAN};
use super::error::FleetError;

/// `journal_max_mb` at most (16 TiB): larger is no bound.
const JOURNAL_MAX_MB_CAP: u64 = 1 << 24;

/// Every problem of `file` that reading alone could not see.
pub(super) fn validate(file: &FleetFile) -> Vec<FleetError> {
    let mut errors = Vec::new();
    errors.extend(super::answerer::check(
        file.fleet.auto_answer.clone(),
        file.answerer.as_ref(),
    ));
    let mut first_line: HashMap<&str, usize> = HashMap::new();
    for s in &file.sessions {
        let name = s.name.value.as_str();
        if !valid_name(name) {
            errors.push(FleetError::InvalidValue {
                at: s.name.at.clone(),
                reason: format!("{name:?}: a session name is letters, digits, `-` and `_`"),
            });
        }
        match first_line.get(name) {
            Some(&first) => errors.push(FleetError::DuplicateSession {
                at: s.name.at.clone(),
                name: name.to_owned(),
                first,
            }),
            None => {
                first_line.insert(name, s.name.at.line.unwrap_or(0));
            }
        }
    }
    if let Some(name) = &file.fleet.name
        && !valid_name(&name.value)
    {
        errors.push(FleetError::InvalidValue {
            at: name.at.clone(),
            reason: format!(
                "{:?}: a fleet name is letters, digits, `-` and `_`",
                name.value
            ),
        });
    }
    if file.sessions.is_empty() {
        errors.push(FleetError::Missing {
            at: Location {
                key: "sessions".into(),
                ..file.fleet.at.clone()
            },
        });
    }
    let known = Known::new(file);
    match &file.fleet.start {
        Some(start) if !start.value.is_empty() => {
            for name in &start.value {
                known.check(name, &start.at, &mut errors);
            }
        }
        Some(start) => errors.push(FleetError::EmptyStart {
            at: start.at.clone(),
        }),
        None => errors.push(FleetError::EmptyStart {
            at: Location {
                key: "fleet.start".into(),
                ..file.fleet.at.clone()
            },
        }),
    }
    if let Some(a) = &file.fleet.answer_from {
        known.check(&a.value, &a.at, &mut errors);
    }
    for route in &file.routes {
        for name in &route.when.value {
            known.check(name, &route.when.at, &mut errors);
        }
        for (name, at) in route.action.targets() {
            known.check(name, at, &mut errors);
        }
    }
    check_budgets(file, &mut errors);
    check_cycles(file, &mut errors);
    errors
}

/// Session names are URN segments.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

struct Known<'a> {
    names: HashSet<&'a str>,
    list: String,
}

impl<'a> Known<'a> {
    fn new(file: &'a FleetFile) -> Self {
        let names: Vec<&str> = file
            .sessions
            .iter()
            .map(|s| s.name.value.as_str())
            .collect();
        Known {
            list: names.join(", "),
            names: names.into_iter().collect(),
        }
    }

    fn check(&self, name: &str, at: &Location, errors: &mut Vec<FleetError>) {
        if !self.names.contains(name) {
            errors.push(FleetError::UnknownSession {
                at: at.clone(),
                name: name.to_owned(),
                known: self.list.clone(),
            });
        }
    }
}

fn bad_budget(b: &At<f64>) -> Option<FleetError> {
    let reason = if b.value.is_nan() {
        "NaN is not an amount".to_owned()
    } else if b.value.is_infinite() {
        "an infinite budget is no budget: leave the key out".to_owned()
    } else if b.value < 0.0 {
        format!("{} is negative", b.value)
    } else {
        return None;
    };
    Some(FleetError::BadBudget {
        at: b.at.clone(),
        reason,
    })
}

fn check_budgets(file: &FleetFile, errors: &mut Vec<FleetError>) {
    let mut total = None;
    if let Some(b) = &file.fleet.budget_usd {
        match bad_budget(b) {
            Some(e) => errors.push(e),
            None => total = Some(b.value),
        }
    }
    for s in &file.sessions {
        let Some(b) = &s.budget_usd else { continue };
        if let Some(e) = bad_budget(b) {
            errors.push(e);
        } else if let Some(total) = total
            && b.value > total
        {
            errors.push(FleetError::BadBudget {
                at: b.at.clone(),
                reason: format!(
                    "{} for session `{}` is more than the fleet's budget_usd ({total})",
                    b.value, s.name.value
                ),
            });
        }
    }
    if let Some(mb) = &file.fleet.journal_max_mb
        && !(1..=JOURNAL_MAX_MB_CAP).contains(&mb.value)
    {
        errors.push(FleetError::InvalidValue {
            at: mb.at.clone(),
            reason: format!(
                "{} is not a size in MiB from 1 to {JOURNAL_MAX_MB_CAP}",
                mb.value
            ),
        });
    }
    for t in [&file.fleet.turn_timeout_s]
        .into_iter()
        .chain(file.sessions.iter().map(|s| &s.restart_window_s))
        .flatten()
    {
        if !(t.value.is_finite() && t.value > 0.0) {
            errors.push(FleetError::InvalidValue {
                at: t.at.clone(),
                reason: format!("{} is not a positive number of seconds", t.value),
            });
        }
    }
}

/// A cycle is allowed only if some session on it has `max_turns` (it ends there):
/// so the routes between sessions without `max_turns` must be acyclic.
fn check_cycles(file: &FleetFile, errors: &mut Vec<FleetError>) {
    let bounded: HashSet<&str> = file
        .sessions
        .iter()
        .filter(|s| s.max_turns.is_some())
        .map(|s| s.name.value.as_str())
        .collect();
    let mut edges: HashMap<&str, Vec<(&str, &Location)>> = HashMap::new();
    for route in &file.routes {
        for (to, _) in route.action.targets() {
            for from in &route.when.value {
                if !bounded.contains(from.as_str()) && !bounded.contains(to) && to != HUMAN {
                    edges.entry(from).or_default().push((to, &route.when.at));
                }
            }
        }
    }
    let mut done: HashSet<&str> = HashSet::new();
    let mut nodes: Vec<&str> = edges.keys().copied().collect();
    nodes.sort_unstable();
    for node in nodes {
        let mut path = Vec::new();
        dfs(node, &edges, &mut path, &mut done, errors);
    }
}

fn dfs<'a>(
    node: &'a str,
    edges: &HashMap<&'a str, Vec<(&'a str, &'a Location)>>,
    path: &mut Vec<&'a str>,
    done: &mut HashSet<&'a str>,
    errors: &mut Vec<FleetError>,
) {
    if done.contains(node) {
        return;
    }
    path.push(node);
    for &(next, at) in edges.get(node).map(Vec::as_slice).unwrap_or_default() {
        if let Some(i) = path.iter().position(|n| *n == next) {
            let mut cycle: Vec<String> = path[i..].iter().map(|s| (*s).to_owned()).collect();
            cycle.push(next.to_owned());
            errors.push(FleetError::Cycle {
                at: at.clone(),
                cycle,
            });
        } else {
            dfs(next, edges, path, done, errors);
        }
    }
    path.pop();
    done.insert(node);
}
