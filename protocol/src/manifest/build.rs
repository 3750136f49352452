//! Reading the core sections (spec §5.1) from the span-aware tree, with the §5.2
//! required fields and §5.3 defaults.

use std::ops::Range;

use toml::de::DeTable;

use super::coding;
use super::patterns::{Patterns, compile_field, compile_row_field};
use super::reader::{Reader, join};
use super::types::*;

/// The manifest as read; only meaningful when the reader recorded no error.
pub(crate) struct Read {
    pub revision: Option<String>,
    pub agent: Agent,
    pub probe: Option<Probe>,
    pub startup: Startup,
    pub fast_path: FastPath,
    pub pty: Pty,
    pub parse: Parse,
    pub capabilities: Capabilities,
    pub cost: Cost,
    pub limits: Limits,
    pub a2a: super::a2a::A2aOptions,
    pub sandbox: super::sandbox::SandboxPaths,
    pub patterns: Patterns,
}

const TOP: &[&str] = &[
    "revision",
    "agent",
    "probe",
    "startup",
    "fast_path",
    "pty",
    "parse",
    "capabilities",
    "cost",
    "limits",
    "sandbox",
];

/// A section table (or `empty` when absent) with its header span.
pub(crate) fn section<'a, 'i>(
    r: &mut Reader,
    t: &'a DeTable<'i>,
    path: &str,
    key: &str,
    empty: &'a DeTable<'i>,
) -> (&'a DeTable<'i>, Option<Range<usize>>) {
    match r.table(t, path, key) {
        Some((sub, span)) => (sub, Some(span)),
        None => (empty, None),
    }
}

/// Report `path.key` missing unless present (a present-but-wrong value was reported already).
fn require(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str, span: &Option<Range<usize>>) {
    if t.get(key).is_none() {
        r.missing(&join(path, key), span.clone());
    }
}

pub(crate) fn read(r: &mut Reader, root: &DeTable<'_>) -> Read {
    let empty = DeTable::new();
    r.unknown_keys(root, "", TOP);

    let (at, at_span) = section(r, root, "", "agent", &empty);
    for key in ["name", "binary", "profiles"] {
        require(r, at, "agent", key, &at_span);
    }
    r.unknown_keys(
        at,
        "agent",
        &[
            "name",
            "binary",
            "version_match",
            "profiles",
            "revision",
            "x-install",
            "x-provider",
        ],
    );
    let agent = Agent {
        name: r.string(at, "agent", "name").unwrap_or_default(),
        binary: r.string(at, "agent", "binary").unwrap_or_default(),
        version_match: r.string(at, "agent", "version_match"),
        profiles: r.strings(at, "agent", "profiles").unwrap_or_default(),
        install: r.string(at, "agent", "x-install"),
        provider: r.string(at, "agent", "x-provider"),
    };
    for key in ["name", "binary"] {
        if let Some(v) = at.get(key).filter(|v| v.get_ref().as_str() == Some("")) {
            r.invalid(&join("agent", key), Some(v.span()), "must not be empty");
        }
    }

    let revision = read_revision(r, root, at);

    let probe = r.table(root, "", "probe").map(|(pt, _)| {
        r.unknown_keys(
            pt,
            "probe",
            &[
                "command",
                "version_pattern",
                "x-help_command",
                "x-flag_fallbacks",
                "x-help_requires",
            ],
        );
        Probe {
            command: argv(r, pt, "probe", "command"),
            version_pattern: r.string(pt, "probe", "version_pattern"),
            help_command: argv(r, pt, "probe", "x-help_command"),
            flag_fallbacks: help_pairs(r, pt, "x-flag_fallbacks", "NEW=OLD"),
            help_requires: help_pairs(r, pt, "x-help_requires", "FAST_PATH=WORD"),
        }
    });

    let startup = read_startup(r, root, &empty);
    let fast_path = super::fast_path::read_fast_path(r, root, &empty);

    let (pt, pt_span) = section(r, root, "", "pty", &empty);
    r.unknown_keys(
        pt,
        "pty",
        &[
            "cols",
            "rows",
            "bracketed_paste",
            "paste_prompts",
            "sigint_cancels_turn",
            "queued_input_supported",
        ],
    );
    require(r, pt, "pty", "cols", &pt_span);
    require(r, pt, "pty", "rows", &pt_span);
    let pty = Pty {
        cols: positive(r, pt, "pty", "cols"),
        rows: positive(r, pt, "pty", "rows"),
        bracketed_paste: r.boolean(pt, "pty", "bracketed_paste").unwrap_or(false),
        paste_prompts: r.boolean(pt, "pty", "paste_prompts").unwrap_or(false),
        sigint_cancels_turn: r
            .wire(pt, "pty", "sigint_cancels_turn")
            .unwrap_or(CancelMode::Hard),
        queued_input_supported: r
            .boolean(pt, "pty", "queued_input_supported")
            .unwrap_or(false),
    };

    let capabilities = read_capabilities(r, root, &empty);
    let (ct, _) = section(r, root, "", "cost", &empty);
    r.unknown_keys(ct, "cost", &["metered", "currency"]);
    let cost = Cost {
        metered: r.boolean(ct, "cost", "metered").unwrap_or(false),
        currency: r.string(ct, "cost", "currency"),
    };

    let limits = super::limits::read_limits(r, root, &empty);
    let a2a = super::a2a::read_a2a(r, root, &empty);
    let sandbox = super::sandbox::read_sandbox(r, root, &empty);

    let mut patterns = Patterns::default();
    let parse = super::parse_section::read_parse(r, root, &empty, &mut patterns);
    if let (Some(p), Some(rw)) = (&startup.ready_when.pattern, startup_ready_span(root)) {
        patterns.ready_when = compile_row_field(r, "startup.ready_when.pattern", Some(rw), p);
    }
    if let Some(p) = &agent.version_match {
        patterns.version_match = compile_field(
            r,
            "agent.version_match",
            Reader::span_of(at, "version_match"),
            p,
        );
    }
    if let Some(p) = probe.as_ref().and_then(|p| p.version_pattern.as_ref()) {
        let span = root
            .get("probe")
            .and_then(|v| v.get_ref().get("version_pattern"))
            .map(|v| v.span());
        patterns.version_pattern = compile_field(r, "probe.version_pattern", span, p);
    }

    Read {
        revision,
        agent,
        probe,
        startup,
        fast_path,
        pty,
        parse,
        capabilities,
        cost,
        limits,
        a2a,
        sandbox,
        patterns,
    }
}

fn startup_ready_span(root: &DeTable<'_>) -> Option<Range<usize>> {
    let rw = root.get("startup")?.get_ref().get("ready_when")?;
    Some(
        rw.get_ref()
            .get("pattern")
            .map(|p| p.span())
            .unwrap_or_else(|| rw.span()),
    )
}

/// Top-level `revision`, else `[agent].revision`.
fn read_revision(r: &mut Reader, root: &DeTable<'_>, agent: &DeTable<'_>) -> Option<String> {
    let top = r.string_or_date(root, "", "revision");
    let nested = r.string_or_date(agent, "agent", "revision");
    if let (Some(a), Some(b)) = (&top, &nested)
        && a != b
    {
        r.note(
            "agent.revision",
            Reader::span_of(agent, "revision"),
            format!("differs from top-level revision {a:?}; the top-level one is kept"),
        );
    }
    top.or(nested)
}

/// `probe.x-flag_fallbacks` (`"NEW=OLD"` flags) and `probe.x-help_requires`
/// (`"FAST_PATH=WORD"`): pairs, both sides non-empty; they need
/// `probe.x-help_command` (the output that tells what the binary takes).
fn help_pairs(r: &mut Reader, pt: &DeTable<'_>, name: &str, shape: &str) -> Vec<String> {
    let key = join("probe", name);
    let Some(list) = r.strings(pt, "probe", name) else {
        return Vec::new();
    };
    let span = Reader::span_of(pt, name);
    if !list.is_empty() && !pt.contains_key("x-help_command") {
        r.invalid(&key, span.clone(), "needs probe.x-help_command");
    }
    for f in &list {
        if !f
            .split_once('=')
            .is_some_and(|(new, old)| !new.is_empty() && !old.is_empty())
        {
            r.invalid(&key, span.clone(), format!("{f:?} is not {shape}"));
        }
    }
    list
}

/// A non-empty argv.
fn argv(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str) -> Option<Vec<String>> {
    let v = r.strings(t, path, key)?;
    if v.is_empty() {
        r.invalid(
            &join(path, key),
            Reader::span_of(t, key),
            "argv must not be empty",
        );
        return None;
    }
    Some(v)
}

fn positive(r: &mut Reader, t: &DeTable<'_>, path: &str, key: &str) -> u16 {
    match r.uint::<u16>(t, path, key) {
        Some(0) => {
            r.invalid(
                &join(path, key),
                Reader::span_of(t, key),
                "must be at least 1",
            );
            0
        }
        Some(n) => n,
        None => 0,
    }
}

fn read_startup(r: &mut Reader, root: &DeTable<'_>, empty: &DeTable<'_>) -> Startup {
    let (st, span) = section(r, root, "", "startup", empty);
    const KNOWN: &[&str] = &[
        "command",
        "cwd_arg",
        "model_arg",
        "session_id_env",
        "resume_arg",
        "permission_mode_arg",
        "ready_when",
        "init_timeout_seconds",
    ];
    r.unknown_keys(st, "startup", KNOWN);
    require(r, st, "startup", "command", &span);
    require(r, st, "startup", "ready_when", &span);
    let mut ready_when = ReadyWhen {
        pattern: None,
        silence_ms: None,
    };
    if let Some((rw, rw_span)) = r.table(st, "startup", "ready_when") {
        let p = "startup.ready_when";
        r.unknown_keys(rw, p, &["pattern", "silence_ms"]);
        ready_when.pattern = r.string(rw, p, "pattern");
        ready_when.silence_ms = r.uint(rw, p, "silence_ms");
        if rw.get("pattern").is_none() && rw.get("silence_ms").is_none() {
            r.invalid(p, Some(rw_span), "needs `pattern` or `silence_ms`");
        }
    }
    let init_timeout_seconds = match r.uint::<u64>(st, "startup", "init_timeout_seconds") {
        Some(0) => {
            r.invalid(
                "startup.init_timeout_seconds",
                Reader::span_of(st, "init_timeout_seconds"),
                "must be at least 1",
            );
            DEFAULT_INIT_TIMEOUT_SECONDS
        }
        Some(n) => n,
        None => DEFAULT_INIT_TIMEOUT_SECONDS,
    };
    Startup {
        command: argv(r, st, "startup", "command").unwrap_or_default(),
        cwd_arg: r.string(st, "startup", "cwd_arg"),
        model_arg: r.string(st, "startup", "model_arg"),
        session_id_env: r.string(st, "startup", "session_id_env"),
        resume_arg: r.string(st, "startup", "resume_arg"),
        permission_mode_arg: r.string(st, "startup", "permission_mode_arg"),
        init_timeout_seconds,
        ready_when,
    }
}

fn read_capabilities(r: &mut Reader, root: &DeTable<'_>, empty: &DeTable<'_>) -> Capabilities {
    let p = "capabilities";
    let (ct, span) = section(r, root, "", p, empty);
    const KNOWN: &[&str] = &[
        "streaming_output",
        "streaming_tool_output",
        "queued_input",
        "mid_turn_cancel",
        "multi_session",
        "input_modalities",
        "output_modalities",
        "ask_user",
        "coding",
    ];
    r.unknown_keys(ct, p, KNOWN);
    require(r, ct, p, "streaming_output", &span);
    let mut ask_user = AskUser::default();
    if let Some((at, _)) = r.table(ct, p, "ask_user") {
        let ap = "capabilities.ask_user";
        r.unknown_keys(at, ap, &["yes_no", "options", "free_text"]);
        ask_user.yes_no = r.boolean(at, ap, "yes_no").unwrap_or(false);
        ask_user.options = r.boolean(at, ap, "options").unwrap_or(false);
        ask_user.free_text = r.boolean(at, ap, "free_text").unwrap_or(false);
    }
    let coding = r
        .table(ct, p, "coding")
        .and_then(|(t, s)| coding::read(r, t, "capabilities.coding", s));
    let by_binding = read_by_binding(r, ct);
    Capabilities {
        streaming_output: r.boolean(ct, p, "streaming_output").unwrap_or(false),
        streaming_tool_output: r.boolean(ct, p, "streaming_tool_output").unwrap_or(false),
        queued_input: r.boolean(ct, p, "queued_input").unwrap_or(false),
        mid_turn_cancel: r.wire(ct, p, "mid_turn_cancel"),
        multi_session: r.boolean(ct, p, "multi_session").unwrap_or(false),
        input_modalities: r.strings(ct, p, "input_modalities"),
        output_modalities: r.strings(ct, p, "output_modalities"),
        ask_user,
        coding,
        by_binding,
    }
}

/// `[capabilities.x-binding.<binding>]`: each known binding's own values.
fn read_by_binding(
    r: &mut Reader,
    ct: &DeTable<'_>,
) -> std::collections::BTreeMap<String, BindingCaps> {
    let p = "capabilities.x-binding";
    let mut by = std::collections::BTreeMap::new();
    let Some((bt, _)) = r.table(ct, "capabilities", "x-binding") else {
        return by;
    };
    r.unknown_keys(bt, p, BINDING_NAMES);
    for name in BINDING_NAMES {
        let Some((t, _)) = r.table(bt, p, name) else {
            continue;
        };
        let at = join(p, name);
        r.unknown_keys(t, &at, &["queued_input"]);
        let caps = BindingCaps {
            queued_input: r.boolean(t, &at, "queued_input"),
        };
        by.insert((*name).to_owned(), caps);
    }
    by
}
