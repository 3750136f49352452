//! What an agent's error message says, for agents that give an error only as text
//! (a TUI's error line, `codex exec`'s `error` / `turn.failed` messages, an ACP
//! agent's error reply, a stream-json `result` without an HTTP status): the
//! `cap.error` code and whether trying again may help. Written once for every binding
//! that reads error text.
//!
//! Rate limits are recognised in the shapes the agents print (taken from their
//! sources, not guessed):
//!
//! - the APIs' error types: Anthropic's `rate_limit_error` and `overloaded_error` (a
//!   529: the API asks to wait, as for a 429), Google's `RESOURCE_EXHAUSTED` and
//!   `MODEL_CAPACITY_EXHAUSTED`, a `429` status as a word (`API Error: 429 {...}`,
//!   Codex's `exceeded retry limit, last status: 429 Too Many Requests`, Gemini's
//!   `(Status: 429)`);
//! - Claude Code's subscription limits: `You've hit your session limit · resets 3pm`
//!   (also weekly / Opus / usage limit), `You're out of usage credits`, the older
//!   `Claude AI usage limit reached|<epoch>`;
//! - Codex's `You've hit your usage limit. Try again at 3:05 PM.` and `Quota
//!   exceeded. Check your plan and billing details.`;
//! - Gemini CLI's `You have exhausted your daily quota on this model.`, `Usage limit
//!   reached for <model>.`, `Rate limit exceeded. Try again later.` and Google's
//!   `You exceeded your current quota ... Please retry in 23.5s`.
//!
//! Warnings that a limit is near (`You've used 90% of your session limit`,
//! `Approaching usage limit`) are not limits: they fall through to the other families.

use std::sync::LazyLock;

use regex::Regex;

use crate::protocol::ErrorKind;

/// Lower-case fragments that name a rate or usage limit.
const RATE_LIMIT: &[&str] = &[
    "rate_limit",
    "rate limit",
    "ratelimit",
    "too many requests",
    "overloaded_error",
    "resource_exhausted",
    "capacity_exhausted",
    "exhausted your capacity",
    "usage limit",
    "limit reached",
    "you've hit your",
    "you've reached your",
    "out of usage",
    "quota exceeded",
    "exceeded your current quota",
    "exhausted your daily quota",
];

/// How Claude Code words a warning that a limit is near (not a limit).
const NEAR: &[&str] = &["you've used", "you're close to", "approaching"];

const AUTH: &[&str] = &[
    "authentication",
    "auth_error",
    "unauthorized",
    "401",
    "api key",
];

const CONTEXT: &[&str] = &[
    "context length",
    "context window",
    "context_length_exceeded",
    "prompt is too long",
    "maximum context",
];

/// `429` as a status: a word of its own, not part of a longer number.
static STATUS_429: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^0-9.])429(?:$|[^0-9.])").expect("429"));

/// The `cap.error` code of an error message, and whether retrying may help.
pub(crate) fn classify(message: &str) -> (ErrorKind, bool) {
    let lower = message.to_lowercase();
    let has = |keys: &[&str]| keys.iter().any(|k| lower.contains(k));
    let near = NEAR.iter().any(|k| lower.trim_start().starts_with(k));
    if !near && (has(RATE_LIMIT) || STATUS_429.is_match(&lower)) {
        (ErrorKind::RateLimit, true)
    } else if has(AUTH) {
        (ErrorKind::AuthError, false)
    } else if has(CONTEXT) {
        (ErrorKind::ContextOverflow, false)
    } else if has(&["overloaded"]) {
        (ErrorKind::ModelUnavailable, true)
    } else {
        (ErrorKind::Other("agent_error".into()), false)
    }
}

/// True when the message names a rate or usage limit.
#[cfg(test)]
pub(crate) fn is_rate_limit(message: &str) -> bool {
    classify(message).0 == ErrorKind::RateLimit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_of_message_gets_its_code() {
        let cases = [
            ("Error: 429 Too Many Requests", ErrorKind::RateLimit, true),
            (
                "You've hit your usage limit. Try again at 3:05 PM.",
                ErrorKind::RateLimit,
                true,
            ),
            (
                "401 Unauthorized: invalid API key",
                ErrorKind::AuthError,
                false,
            ),
            (
                "{\"error\": {\"message\": \"context length exceeded\"}}",
                ErrorKind::ContextOverflow,
                false,
            ),
            ("server overloaded", ErrorKind::ModelUnavailable, true),
            (
                "something else broke",
                ErrorKind::Other("agent_error".into()),
                false,
            ),
        ];
        for (message, kind, retryable) in cases {
            assert_eq!(classify(message), (kind, retryable), "{message}");
        }
    }

    /// The messages as the agents' sources write them.
    #[test]
    fn the_agents_own_rate_limit_messages_are_rate_limits() {
        for message in [
            // The APIs' error types, as Claude Code prints a failed request.
            r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#,
            r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            "rate_limit_error: Number of requests has exceeded your rate limit",
            // Claude Code 2.1 under a subscription, and its older form.
            "You've hit your session limit · resets 12:40pm (UTC)",
            "You've hit your weekly limit · resets Dec 9, 3pm (Europe/London)",
            "You're out of usage credits · resets 5pm (UTC)",
            "Claude AI usage limit reached|1764601200",
            // Codex (codex-rs core/src/error.rs).
            "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:05 PM.",
            "Quota exceeded. Check your plan and billing details.",
            "exceeded retry limit, last status: 429 Too Many Requests, request id: req_1",
            // Gemini CLI 0.61 and Google's API.
            "You have exhausted your daily quota on this model.",
            "Usage limit reached for gemini-2.5-pro.\nAccess resets at 3:05 PM PST.",
            "Rate limit exceeded. Try again later.",
            "[API Error: You exceeded your current quota, please check your plan and billing details. Please retry in 23.5s. (Status: RESOURCE_EXHAUSTED)]",
            "[API Error: got status: 429 Too Many Requests.]",
        ] {
            assert!(is_rate_limit(message), "{message}");
        }
        for message in [
            "You've used 90% of your session limit · resets 3pm",
            "Approaching usage limit · resets 3pm",
            "error on line 4290",
            "took 0.429 s",
        ] {
            assert!(!is_rate_limit(message), "{message}");
        }
    }
}
