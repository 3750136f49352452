//! Reading `fleet.toml` into a [`FleetFile`] through the shared span-aware reader:
//! types and enum values are checked here, cross-references in `validate`.

use std::ops::Range;
use std::time::Duration;

use capfleet_engine::answerer::CommandRules;
use capfleet_engine::protocol::{PermissionMode, RiskLevel};
use capfleet_engine::router::{CollectMode, QueueOrder, Split};
use capfleet_engine::tomldoc::{self, join};
use capfleet_engine::workspace::TestCommand;
use capfleet_wire::supervision::Restart;
use capfleet_wire::supervision::rate_limit::{self, OnRateLimit};
use toml::de::{DeTable, DeValue};

use super::config::{
    ActionEntry, At, FleetFile, FleetSection, OnError, RouteEntry, SessionEntry, session_ref,
};
use super::error::FleetError;

pub(super) type Reader = tomldoc::Reader<FleetError>;

const TOP_KEYS: &[&str] = &[
    "fleet", "sessions", "routes", "answerer", "notify", "chaos", "sandbox",
];
const FLEET_KEYS: &[&str] = &[
    "name",
    "start",
    "task",
    "budget_usd",
    "max_concurrent",
    "on_error",
    "auto_answer",
    "allow_tools",
    "deny_tools",
    "allow_commands",
    "deny_commands",
    "max_risk",
    "turn_timeout_s",
    "base",
    "journal_max_mb",
    "queue",
    "on_rate_limit",
    "max_pause",
    "rate_limit_backoff",
    "answer_from",
    "ask_timeout",
    "sandbox",
];
const SESSION_KEYS: &[&str] = &[
    "name",
    "agent",
    "cwd",
    "model",
    "argv",
    "system_prompt",
    "max_turns",
    "permission_mode",
    "restart",
    "max_restarts",
    "restart_window_s",
    "budget_usd",
    "script",
    "fleet",
    "env",
    "paths",
    "test_command",
    "raw_bytes",
    "sandbox",
];
const ROUTE_KEYS: &[&str] = &["when", "route_to", "fan_out", "collect", "mode"];

const RESTARTS: &[(Restart, &str)] = &[
    (Restart::Permanent, "permanent"),
    (Restart::Transient, "transient"),
    (Restart::Temporary, "temporary"),
];
const SPLITS: &[(Split, &str)] = &[
    (Split::Broadcast, "broadcast"),
    (Split::BySubtask, "by_subtask"),
];
const MODES: &[(CollectMode, &str)] = &[(CollectMode::First, "first"), (CollectMode::All, "all")];

/// Read the whole document; problems are recorded in `r`.
pub(super) fn read(r: &mut Reader, root: &DeTable<'_>) -> FleetFile {
    // A table the schema does not know is an error, not a warning: `[[route]]` for
    // `[[routes]]` would run the fleet with no routes at all.
    for (name, span, suggestion) in tomldoc::unknown(root, TOP_KEYS) {
        let at = r.at(name, Some(span));
        r.push(FleetError::UnknownTable { at, suggestion });
    }
    let empty = DeTable::new();
    let (ft, span) = r.table(root, "", "fleet").unwrap_or((&empty, 0..0));
    if root.get("fleet").is_none() {
        r.missing("fleet", None);
    }
    let fleet = read_fleet(r, ft, span);
    let sessions: Vec<SessionEntry> = tables(r, root, "sessions")
        .into_iter()
        .filter_map(|(i, t, span)| read_session(r, t, &format!("sessions[{i}]"), span))
        .collect();
    let routes = tables(r, root, "routes")
        .into_iter()
        .filter_map(|(i, t, span)| read_route(r, t, &format!("routes[{i}]"), span))
        .collect();
    let answerer = super::answerer::read_answerer(r, root);
    let notify = super::notify::read(r, root);
    let chaos = super::chaos::read(r, root, &sessions);
    let sandbox = super::sandbox::read(r, root);
    FleetFile {
        sandbox,
        fleet,
        sessions,
        routes,
        answerer,
        notify,
        chaos,
    }
}

/// The tables of an array of tables (`[[key]]`), with their index and span.
fn tables<'a, 'i>(
    r: &mut Reader,
    root: &'a DeTable<'i>,
    key: &str,
) -> Vec<(usize, &'a DeTable<'i>, Range<usize>)> {
    let Some(v) = root.get(key) else {
        return Vec::new();
    };
    let DeValue::Array(items) = v.get_ref() else {
        r.wrong_type(key, v, "an array of tables");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.get_ref() {
            DeValue::Table(t) => out.push((i, t, item.span())),
            _ => r.wrong_type(&format!("{key}[{i}]"), item, "a table"),
        }
    }
    out
}

fn at<T>(r: &Reader, t: &DeTable<'_>, path: &str, key: &str, value: T) -> At<T> {
    At {
        value,
        at: r.at(&join(path, key), Reader::span_of(t, key)),
    }
}

/// Every key of `t` (at `path`) not in `keys` is an error naming the keys it may have.
pub(super) fn strict_keys(r: &mut Reader, t: &DeTable<'_>, path: &str, keys: &[&'static str]) {
    for (name, key_span, suggestion) in tomldoc::unknown(t, keys) {
        let at = r.at(&join(path, name), Some(key_span));
        r.push(FleetError::UnknownKey {
            at,
            known: keys.join(", "),
            suggestion,
        });
    }
}

pub(super) fn string_at(
    r: &mut Reader,
    t: &DeTable<'_>,
    path: &str,
    key: &str,
) -> Option<At<String>> {
    let v = r.string(t, path, key)?;
    Some(at(r, t, path, key, v))
}

fn number_at(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str) -> Option<At<f64>> {
    let v = r.number(t, path, key)?;
    Some(at(r, t, path, key, v))
}

/// A string from a fixed set of names.
pub(super) fn choice<T: Copy>(
    r: &mut Reader,
    t: &DeTable<'_>,
    path: &str,
    key: &str,
    names: &[(T, &str)],
) -> Option<T> {
    let s = r.string(t, path, key)?;
    if let Some((v, _)) = names.iter().find(|(_, n)| *n == s) {
        return Some(*v);
    }
    let list: Vec<&str> = names.iter().map(|(_, n)| *n).collect();
    let reason = format!("{s:?} is not one of {}", list.join(" | "));
    r.invalid(&join(path, key), Reader::span_of(t, key), reason);
    None
}

/// `key`, a list of command patterns (`allow_commands`, `deny_commands`), compiled;
/// the first that is no regular expression is an error naming its place.
fn command_rules(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str) -> CommandRules {
    let patterns = r.strings(t, path, key).unwrap_or_default();
    CommandRules::new(&patterns).unwrap_or_else(|e| {
        let span = match t.get(key).map(|v| v.get_ref()) {
            Some(DeValue::Array(items)) => items.get(e.index).map(|i| i.span()),
            _ => None,
        };
        let reason = format!(
            "{:?} is not a regular expression ({}); fix its syntax (regex crate syntax; in a \
             TOML \"basic string\" a backslash is written \\\\, or use a 'literal string')",
            e.pattern, e.reason
        );
        r.invalid(&format!("{path}.{key}[{}]", e.index), span, reason);
        CommandRules::default()
    })
}

fn read_fleet(r: &mut Reader, t: &DeTable<'_>, span: Range<usize>) -> FleetSection {
    let path = "fleet";
    let header = (!span.is_empty()).then_some(span);
    r.unknown_keys(t, path, FLEET_KEYS);
    let start = r
        .string_or_list(t, path, "start")
        .map(|v| v.iter().map(|s| session_ref(s)).collect());
    let max_risk = r.string(t, path, "max_risk").and_then(|s| {
        let risk = RiskLevel::parse(&s);
        if risk.is_none() {
            let reason = format!("{s:?} is not one of low | medium | high");
            r.invalid("fleet.max_risk", Reader::span_of(t, "max_risk"), reason);
        }
        risk
    });
    FleetSection {
        at: r.at(path, header.clone()),
        name: string_at(r, t, path, "name"),
        start: start.map(|v| at(r, t, path, "start", v)),
        task: string_at(r, t, path, "task"),
        budget_usd: number_at(r, t, path, "budget_usd"),
        max_concurrent: r.uint(t, path, "max_concurrent"),
        on_error: choice(r, t, path, "on_error", OnError::WIRE).unwrap_or_default(),
        auto_answer: {
            let value = super::answerer::read_auto_answer(r, t);
            let span = Reader::span_of(t, "auto_answer").or(header);
            At {
                value,
                at: r.at("fleet.auto_answer", span),
            }
        },
        allow_tools: r.strings(t, path, "allow_tools").unwrap_or_default(),
        deny_tools: r.strings(t, path, "deny_tools").unwrap_or_default(),
        allow_commands: command_rules(r, t, path, "allow_commands"),
        deny_commands: command_rules(r, t, path, "deny_commands"),
        max_risk,
        turn_timeout_s: number_at(r, t, path, "turn_timeout_s"),
        base: string_at(r, t, path, "base"),
        journal_max_mb: r
            .uint(t, path, "journal_max_mb")
            .map(|mb| at(r, t, path, "journal_max_mb", mb)),
        queue: choice(r, t, path, "queue", QueueOrder::NAMES).unwrap_or_default(),
        on_rate_limit: choice(r, t, path, "on_rate_limit", OnRateLimit::NAMES).unwrap_or_default(),
        max_pause: duration(r, t, path, "max_pause"),
        rate_limit_backoff: duration(r, t, path, "rate_limit_backoff"),
        answer_from: string_at(r, t, path, "answer_from").map(|a| At {
            value: session_ref(&a.value),
            at: a.at,
        }),
        ask_timeout: duration(r, t, path, "ask_timeout"),
        sandbox: super::sandbox::read_mode(r, t, path),
    }
}

/// A duration: seconds (a number), or a string such as `"6h"`, `"90s"`, `"1h 30m"`.
pub(super) fn duration(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str) -> Option<Duration> {
    let v = t.get(key)?;
    let parsed = match v.get_ref() {
        DeValue::String(s) => rate_limit::parse_duration(s),
        _ => r
            .number(t, path, key)
            .and_then(|n| Duration::try_from_secs_f64(n).ok()),
    };
    let parsed = parsed.filter(|d| !d.is_zero());
    if parsed.is_none() {
        let reason =
            "not a positive duration: seconds, or a string such as \"6h\", \"90s\", \"1h 30m\"";
        r.invalid(&join(path, key), Some(v.span()), reason);
    }
    parsed
}

fn read_session(
    r: &mut Reader,
    t: &DeTable<'_>,
    path: &str,
    span: Range<usize>,
) -> Option<SessionEntry> {
    r.unknown_keys(t, path, SESSION_KEYS);
    let name = string_at(r, t, path, "name");
    let agent = string_at(r, t, path, "agent");
    for (key, v) in [("name", name.is_none()), ("agent", agent.is_none())] {
        if v && t.get(key).is_none() {
            r.missing(&join(path, key), Some(span.clone()));
        }
    }
    let permission_mode = r.string(t, path, "permission_mode").and_then(|s| {
        let mode = PermissionMode::parse(&s);
        if mode.is_none() {
            let reason = format!("{s:?} is not one of none | confirm | interactive");
            r.invalid(
                &join(path, "permission_mode"),
                Reader::span_of(t, "permission_mode"),
                reason,
            );
        }
        mode
    });
    let entry = SessionEntry {
        at: r.at(path, Some(span.clone())),
        name: name?,
        agent: agent?,
        cwd: string_at(r, t, path, "cwd"),
        model: r.string(t, path, "model"),
        argv: r.strings(t, path, "argv"),
        system_prompt: r.string(t, path, "system_prompt"),
        max_turns: r.uint(t, path, "max_turns"),
        permission_mode,
        restart: choice(r, t, path, "restart", RESTARTS),
        max_restarts: r.uint(t, path, "max_restarts"),
        restart_window_s: number_at(r, t, path, "restart_window_s"),
        budget_usd: number_at(r, t, path, "budget_usd"),
        script: string_at(r, t, path, "script"),
        fleet: string_at(r, t, path, "fleet"),
        env: read_env(r, t, path),
        paths: read_paths(r, t, path),
        test_command: read_test_command(r, t, path),
        raw_bytes: r.boolean(t, path, "raw_bytes").unwrap_or(false),
        sandbox: super::sandbox::read_mode(r, t, path),
    };
    Some(entry)
}

/// `paths`: globs relative to the workspace root, inside it.
fn read_paths(r: &mut Reader, t: &DeTable<'_>, path: &str) -> Vec<String> {
    let paths = r.strings(t, path, "paths").unwrap_or_default();
    for p in &paths {
        let outside = p.starts_with('/') || p.split('/').any(|seg| seg == "..");
        if p.trim().is_empty() || outside {
            let reason = format!(
                "{p:?}: a declared path is a glob relative to the workspace root (e.g. \"src/**\")"
            );
            r.invalid(&join(path, "paths"), Reader::span_of(t, "paths"), reason);
        }
    }
    paths
}

/// `test_command`: a shell line, or an argv array.
fn read_test_command(r: &mut Reader, t: &DeTable<'_>, path: &str) -> Option<TestCommand> {
    let v = t.get("test_command")?;
    let key = join(path, "test_command");
    let cmd = match v.get_ref() {
        DeValue::String(s) => TestCommand::Shell(s.to_string()),
        DeValue::Array(_) => TestCommand::Argv(r.string_array(&key, v)?),
        _ => {
            r.wrong_type(&key, v, "a command line or an argv array of strings");
            return None;
        }
    };
    let empty = match &cmd {
        TestCommand::Shell(s) => s.trim().is_empty(),
        TestCommand::Argv(a) => a.first().is_none_or(|p| p.is_empty()),
    };
    if empty {
        r.invalid(
            &key,
            Reader::span_of(t, "test_command"),
            "the test command is empty (e.g. \"cargo test\" or [\"pytest\", \"-q\"])",
        );
        return None;
    }
    Some(cmd)
}

pub(super) fn read_env(r: &mut Reader, t: &DeTable<'_>, path: &str) -> Vec<(String, String)> {
    let Some((env, _)) = r.table(t, path, "env") else {
        return Vec::new();
    };
    let env_path = join(path, "env");
    let mut out = Vec::new();
    for (k, _) in env.iter() {
        let key: &str = k.get_ref();
        if let Some(v) = r.string(env, &env_path, key) {
            out.push((key.to_owned(), v));
        }
    }
    out
}

fn read_route(
    r: &mut Reader,
    t: &DeTable<'_>,
    path: &str,
    span: Range<usize>,
) -> Option<RouteEntry> {
    r.unknown_keys(t, path, ROUTE_KEYS);
    let when = r
        .string_or_list(t, path, "when")
        .map(|v| v.iter().map(|s| session_ref(s)).collect::<Vec<_>>());
    let when = match when {
        Some(w) if !w.is_empty() => at(r, t, path, "when", w),
        Some(_) => {
            r.invalid(
                &join(path, "when"),
                Reader::span_of(t, "when"),
                "names no session",
            );
            return None;
        }
        None => {
            if t.get("when").is_none() {
                r.missing(&join(path, "when"), Some(span));
            }
            return None;
        }
    };
    let present: Vec<&str> = ["route_to", "fan_out", "collect"]
        .into_iter()
        .filter(|k| t.get(*k).is_some())
        .collect();
    let container = Some(span);
    if present.len() != 1 {
        let reason = format!(
            "a route needs exactly one of route_to | fan_out | collect, found {}",
            if present.is_empty() {
                "none".to_owned()
            } else {
                present.join(", ")
            }
        );
        r.invalid(path, container, reason);
        return None;
    }
    if t.get("mode").is_some() && present[0] != "collect" {
        r.invalid(
            &join(path, "mode"),
            Reader::span_of(t, "mode"),
            "`mode` goes with `collect`",
        );
    }
    let action = match present[0] {
        "route_to" => {
            let to = string_at(r, t, path, "route_to")?;
            ActionEntry::To(At {
                value: session_ref(&to.value),
                at: to.at,
            })
        }
        "fan_out" => read_fan_out(r, t, path)?,
        _ => {
            let picker = string_at(r, t, path, "collect")?;
            let mode = choice(r, t, path, "mode", MODES).unwrap_or(CollectMode::First);
            ActionEntry::Collect {
                picker: At {
                    value: session_ref(&picker.value),
                    at: picker.at,
                },
                mode,
            }
        }
    };
    Some(RouteEntry { when, action })
}

fn read_fan_out(r: &mut Reader, t: &DeTable<'_>, path: &str) -> Option<ActionEntry> {
    let (ft, span) = r.table(t, path, "fan_out")?;
    let fpath = join(path, "fan_out");
    r.unknown_keys(ft, &fpath, &["to", "split"]);
    let Some(to) = r.strings(ft, &fpath, "to") else {
        if ft.get("to").is_none() {
            r.missing(&join(&fpath, "to"), Some(span));
        }
        return None;
    };
    if to.is_empty() {
        r.invalid(
            &join(&fpath, "to"),
            Reader::span_of(ft, "to"),
            "names no session",
        );
        return None;
    }
    let to = at(
        r,
        ft,
        &fpath,
        "to",
        to.iter().map(|s| session_ref(s)).collect(),
    );
    let split = choice(r, ft, &fpath, "split", SPLITS).unwrap_or(Split::Broadcast);
    Some(ActionEntry::FanOut { to, split })
}
