//! What an agent's error message says, for agents that give an error only as text
//! (a TUI's error line, `codex exec`'s `error` / `turn.failed` messages): the
//! `cap.error` code and whether trying again may help. Written once for every binding
//! that reads error text.

use crate::protocol::ErrorKind;

/// The `cap.error` code of an error message, and whether retrying may help.
pub fn classify(message: &str) -> (ErrorKind, bool) {
    let lower = message.to_lowercase();
    let has = |keys: &[&str]| keys.iter().any(|k| lower.contains(k));
    if has(&[
        "rate_limit",
        "rate limit",
        "too many requests",
        "429",
        "usage limit",
        "limit reached",
        "resource_exhausted",
    ]) {
        (ErrorKind::RateLimit, true)
    } else if has(&[
        "authentication",
        "auth_error",
        "unauthorized",
        "401",
        "api key",
    ]) {
        (ErrorKind::AuthError, false)
    } else if has(&[
        "context length",
        "context window",
        "context_length_exceeded",
        "prompt is too long",
        "maximum context",
    ]) {
        (ErrorKind::ContextOverflow, false)
    } else if has(&["overloaded"]) {
        (ErrorKind::ModelUnavailable, true)
    } else {
        (ErrorKind::Other("agent_error".into()), false)
    }
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
}
