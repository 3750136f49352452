//! A chaos spec: which faults, how often, at whom, from which seed. One set of keys,
//! two spellings: the fleet file's `[chaos]` table and `capfleet run --chaos` inline
//! (`seed=7,kill=0.2/turn,hang=1/min,target=worker-*`). Both are flattened into
//! [`Entry`]s (dotted keys: `kill.target`) and built by [`ChaosSpec::build`], which
//! names every bad key with its fix.
//!
//! A fault's rate is one of:
//! - `P/turn`: probability `P` (0..=1) per turn attempt of each targeted session,
//!   decided at the attempt's prompt from (seed, session, turn, attempt, kind);
//! - `N/min`: on average `N` per minute of the run, at seeded (exponential)
//!   intervals, each on a seeded pick among the targeted sessions;
//! - `@30s;2m` (TOML also `at = ["30s", "2m"]`): at those times after the run's start,
//!   each on a seeded pick among the targeted sessions.
//!
//! A target is a session name, a glob over names (`worker-*`), or a binding
//! (`binding:stream_json`); no target is every session.

mod build;
mod inline;

use build::Builder;

use std::time::Duration;

use capfleet_wire::chaos::{FaultKind, Reach};
use capfleet_wire::registry::Binding;
use capfleet_wire::supervision::rate_limit::parse_duration;

/// A whole spec, built and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosSpec {
    /// The seed every decision is drawn from.
    pub seed: u64,
    /// One rule per fault kind written.
    pub rules: Vec<FaultRule>,
    /// The faults' parameters (durations, sizes).
    pub params: Params,
    /// At most this many `self_kill`s in a run, resumes included.
    pub max_self_kills: u32,
}

/// One fault kind, its rate and its targets.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    pub kind: FaultKind,
    pub rate: Rate,
    /// Empty: every session.
    pub targets: Vec<Target>,
}

/// How often a fault happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Rate {
    /// Probability per turn attempt (0..=1).
    PerTurn(f64),
    /// Mean number per minute of the run.
    PerMinute(f64),
    /// At these times after the run's start.
    At(Vec<Duration>),
}

/// Whom a fault may hit.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A session by name.
    Name(String),
    /// Session names matching a glob (`*`, `?`).
    Glob(String),
    /// Every session on a binding.
    Binding(Binding),
}

impl Target {
    fn parse(text: &str) -> Result<Target, String> {
        let text = text.trim();
        if let Some(b) = text.strip_prefix("binding:") {
            return Binding::PRIORITY
                .into_iter()
                .find(|x| x.as_str() == b)
                .map(Target::Binding)
                .ok_or_else(|| {
                    let names: Vec<_> = Binding::PRIORITY.iter().map(|b| b.as_str()).collect();
                    format!("{b:?} is no binding: one of {}", names.join(", "))
                });
        }
        if text.is_empty() {
            return Err("an empty target: a session name, a glob or binding:<name>".into());
        }
        Ok(if text.contains(['*', '?']) {
            Target::Glob(text.to_owned())
        } else {
            Target::Name(text.to_owned())
        })
    }

    /// Whether session `name` on `binding` is this target.
    pub fn matches(&self, name: &str, binding: Binding) -> bool {
        match self {
            Target::Name(n) => n == name,
            Target::Glob(g) => glob_matches(g, name),
            Target::Binding(b) => *b == binding,
        }
    }
}

/// `*` (any run) and `?` (any one character) over a whole session name.
fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    // The classic two-pointer match with one star to backtrack to.
    let (mut gi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == n[ni]) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ni;
            gi += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// The faults' parameters, with their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// `hang`: `SIGCONT` after this; `None` (`"never"`, the default): the session's
    /// turn timeout must find the hang.
    pub hang_for: Option<Duration>,
    /// `slow`: output throttled to this many bytes per second…
    pub slow_bytes_per_sec: u64,
    /// …for this long.
    pub slow_for: Duration,
    /// `garble`: the fraction of each garbled frame's bytes corrupted…
    pub garble_fraction: f64,
    /// …in this many frames.
    pub garble_frames: u32,
    /// `truncate`: this many frames cut short.
    pub truncate_frames: u32,
    /// `stall_stdin`: the agent's input stops for this long.
    pub stall_for: Duration,
    /// `latency`: each request delayed by this (key `latency_delay`: `latency` is the
    /// fault's rate)…
    pub latency: Duration,
    /// …for this long.
    pub latency_for: Duration,
    /// `http_5xx`: the status answered.
    pub http_status: u16,
    /// `refuse`: connections refused for this long.
    pub refuse_for: Duration,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            hang_for: None,
            slow_bytes_per_sec: 64,
            slow_for: Duration::from_secs(2),
            garble_fraction: 0.1,
            garble_frames: 1,
            truncate_frames: 1,
            stall_for: Duration::from_secs(2),
            latency: Duration::from_millis(500),
            latency_for: Duration::from_secs(5),
            http_status: 503,
            refuse_for: Duration::from_secs(2),
        }
    }
}

/// A key's value as written (TOML or inline).
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Text(String),
    Int(i64),
    Float(f64),
    List(Vec<String>),
}

impl Raw {
    fn texts(&self) -> Vec<String> {
        match self {
            Raw::Text(t) => t.split(';').map(|s| s.trim().to_owned()).collect(),
            Raw::List(l) => l.clone(),
            Raw::Int(i) => vec![i.to_string()],
            Raw::Float(f) => vec![f.to_string()],
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Raw::Int(i) => Some(*i as f64),
            Raw::Float(f) => Some(*f),
            Raw::Text(t) => t.trim().parse().ok(),
            Raw::List(_) => None,
        }
    }

    fn duration(&self) -> Option<Duration> {
        match self {
            Raw::Text(t) => parse_duration(t),
            _ => self
                .number()
                .and_then(|n| Duration::try_from_secs_f64(n).ok()),
        }
    }
}

/// One key of a spec (`seed`, `kill`, `kill.target`, `hang_for`, …) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub value: Raw,
}

/// What is wrong with one key, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SpecError {
    /// The key as written (dotted: `kill.target`).
    pub key: String,
    pub reason: String,
}

/// The keys of parameters (beside `seed`, `target`, `max_self_kills` and the kinds).
pub(crate) const PARAM_KEYS: &[&str] = &[
    "hang_for",
    "slow_bytes_per_sec",
    "slow_for",
    "garble_fraction",
    "garble_frames",
    "truncate_frames",
    "stall_for",
    "latency_delay",
    "latency_for",
    "http_status",
    "refuse_for",
];

impl ChaosSpec {
    /// Build a spec from its keys; every bad key is reported, each with its fix.
    pub fn build(entries: &[Entry]) -> Result<ChaosSpec, Vec<SpecError>> {
        let mut b = Builder::default();
        for e in entries {
            b.entry(e);
        }
        b.finish()
    }

    /// The rules whose rate is per turn and that target session `name` on `binding`.
    pub fn per_turn<'a>(
        &'a self,
        name: &'a str,
        binding: Binding,
    ) -> impl Iterator<Item = (FaultKind, f64)> + 'a {
        self.rules.iter().filter_map(move |r| match r.rate {
            Rate::PerTurn(p) if r.targets_session(name, binding) => Some((r.kind, p)),
            _ => None,
        })
    }

    /// The rule of `kind`, if written.
    pub fn rule(&self, kind: FaultKind) -> Option<&FaultRule> {
        self.rules.iter().find(|r| r.kind == kind)
    }
}

impl FaultRule {
    /// Whether session `name` on `binding` may be hit (a target, and a session the
    /// kind can reach: see [`hits`]).
    pub fn targets_session(&self, name: &str, binding: Binding) -> bool {
        hits(self.kind, binding)
            && (self.targets.is_empty() || self.targets.iter().any(|t| t.matches(name, binding)))
    }
}

/// Whether a session on `binding` can take a fault of `kind`: agent faults need a
/// process of ours, connection faults a connection with none (the driver contract
/// says which a binding has); `self_kill` hits no session.
fn hits(kind: FaultKind, binding: Binding) -> bool {
    let process = capfleet_wire::driver::spawns_process(binding);
    match kind.reach() {
        Reach::Signal | Reach::Bytes => process,
        Reach::Connection => !process,
        Reach::Orchestrator => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_match_names_globs_and_bindings() {
        let glob = Target::Glob("worker-?*".into());
        assert!(glob.matches("worker-12", Binding::Pty));
        assert!(!glob.matches("worker-", Binding::Pty));
        assert!(!glob.matches("lead", Binding::Pty));
        assert!(Target::Glob("*-b*".into()).matches("a-bc-b", Binding::Pty));
        assert!(Target::Binding(Binding::Pty).matches("x", Binding::Pty));
        assert!(!Target::Name("x".into()).matches("xy", Binding::Pty));
    }
}
