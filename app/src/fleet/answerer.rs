//! `[answerer]` and `auto_answer`: the research answerer of a fleet. Read strictly (an
//! unknown key is an error: a misspelt `max_risk` must not leave a default ceiling in
//! force silently), then built into the engine's [`ResearchSpec`]: the researcher's
//! session spec made the way every session's is (the same registry, the same
//! `SessionRequest`), one turn, no restart, its permission requests asked (and
//! answered fail-safe by the answerer: it reads, it changes nothing).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::answerer::{DEFAULT_PARALLEL, DEFAULT_TIMEOUT, ResearchSpec};
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{PermissionMode, RiskLevel};
use capfleet_engine::tomldoc::Location;
use capfleet_wire::supervision::Restart;
use capfleet_wire::supervision::rate_limit::{OnRateLimit, RateLimitPolicy};
use toml::de::{DeTable, DeValue};

use super::build::{Context, session};
use super::config::{At, SessionEntry};
use super::error::FleetError;
use super::read::{Reader, duration, read_env, strict_keys, string_at};

/// The researcher's session name (its sessions are `research.<pid>.<n>`, a name no
/// fleet session can have).
const RESEARCHER: &str = "research";

const KEYS: &[&str] = &[
    "agent", "model", "argv", "env", "script", "parallel", "timeout", "max_risk",
];

/// `auto_answer`: who answers what the policy leaves open when a human could.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum AutoAnswer {
    /// The human at the terminal, if there is one.
    #[default]
    Off,
    /// Nobody: fail-safe (or research, when `[answerer]` is set).
    On,
    /// The research answerer, before any human.
    Research,
}

/// `[answerer]` as written.
#[derive(Debug, Clone)]
pub(crate) struct AnswererSection {
    pub at: Location,
    pub agent: At<String>,
    pub model: Option<String>,
    pub argv: Option<Vec<String>>,
    pub env: Vec<(String, String)>,
    pub script: Option<At<String>>,
    pub parallel: usize,
    pub timeout: Duration,
    pub max_risk: RiskLevel,
}

/// `[fleet].auto_answer`: `true`, `false` or `"research"`.
pub(super) fn read_auto_answer(r: &mut Reader, t: &DeTable<'_>) -> AutoAnswer {
    let Some(v) = t.get("auto_answer") else {
        return AutoAnswer::Off;
    };
    match v.get_ref() {
        DeValue::Boolean(true) => AutoAnswer::On,
        DeValue::Boolean(false) => AutoAnswer::Off,
        DeValue::String(s) if s == "research" => AutoAnswer::Research,
        _ => {
            r.invalid(
                "fleet.auto_answer",
                Some(v.span()),
                "not one of true | false | \"research\" (\"research\" also needs an [answerer] table)",
            );
            AutoAnswer::Off
        }
    }
}

/// `[answerer]`, if present.
pub(super) fn read_answerer(r: &mut Reader, root: &DeTable<'_>) -> Option<AnswererSection> {
    let path = "answerer";
    let (t, span) = r.table(root, "", path)?;
    strict_keys(r, t, path, KEYS);
    let agent = string_at(r, t, path, "agent");
    if agent.is_none() && t.get("agent").is_none() {
        r.missing("answerer.agent", Some(span.clone()));
    }
    let parallel = r.uint::<usize>(t, path, "parallel");
    if parallel == Some(0) {
        r.invalid(
            "answerer.parallel",
            Reader::span_of(t, "parallel"),
            "0 researchers could answer nothing: set 1 or more (default 4)",
        );
    }
    let max_risk = r.string(t, path, "max_risk").and_then(|s| {
        let risk = RiskLevel::parse(&s);
        if risk.is_none() {
            let reason = format!("{s:?} is not one of low | medium | high");
            r.invalid("answerer.max_risk", Reader::span_of(t, "max_risk"), reason);
        }
        risk
    });
    Some(AnswererSection {
        at: r.at(path, Some(span)),
        model: r.string(t, path, "model"),
        argv: r.strings(t, path, "argv"),
        env: read_env(r, t, path),
        script: string_at(r, t, path, "script"),
        parallel: parallel.filter(|&n| n > 0).unwrap_or(DEFAULT_PARALLEL),
        timeout: duration(r, t, path, "timeout").unwrap_or(DEFAULT_TIMEOUT),
        max_risk: max_risk.unwrap_or(RiskLevel::Low),
        agent: agent?,
    })
}

/// `auto_answer = "research"` needs an `[answerer]`.
pub(super) fn check(
    auto: At<AutoAnswer>,
    answerer: Option<&AnswererSection>,
) -> Option<FleetError> {
    (auto.value == AutoAnswer::Research && answerer.is_none()).then(|| FleetError::InvalidValue {
        at: auto.at,
        reason: "auto_answer = \"research\" needs a researcher: add an [answerer] table with \
                 agent = \"claude-code\" (or any agent)"
            .into(),
    })
}

/// The engine's research spec for `a`: the researcher's session made like any other.
pub(super) async fn build(
    a: &AnswererSection,
    auto: AutoAnswer,
    fleet: &str,
    cx: &Context<'_>,
    manifests: &mut HashMap<String, (Arc<Manifest>, String)>,
) -> Result<ResearchSpec, Vec<FleetError>> {
    let entry = SessionEntry {
        at: a.at.clone(),
        name: At {
            value: RESEARCHER.into(),
            at: a.at.clone(),
        },
        agent: a.agent.clone(),
        cwd: None,
        model: a.model.clone(),
        argv: a.argv.clone(),
        system_prompt: None,
        max_turns: Some(1),
        // Every tool it would use beyond reading is asked, and refused.
        permission_mode: Some(PermissionMode::Interactive),
        restart: Some(Restart::Temporary),
        max_restarts: Some(0),
        restart_window_s: None,
        budget_usd: None,
        script: a.script.clone(),
        fleet: None,
        env: a.env.clone(),
        paths: Vec::new(),
        test_command: None,
        raw_bytes: false,
        sandbox: None,
    };
    // The research's own timeout ends it; the turn timeout is only a backstop.
    let mut researcher = session(&entry, fleet, a.timeout * 2, cx, manifests).await?;
    // A rate-limited researcher is a failed research (fail-safe), not a pause.
    researcher.spec.rate_limit = RateLimitPolicy {
        on: OnRateLimit::Fail,
        ..RateLimitPolicy::default()
    };
    Ok(ResearchSpec {
        template: researcher.spec,
        parallel: a.parallel,
        timeout: a.timeout,
        max_risk: a.max_risk,
        first: auto == AutoAnswer::Research,
    })
}
