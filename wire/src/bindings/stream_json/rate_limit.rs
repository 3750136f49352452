//! Claude Code's `rate_limit_event` frame: its subscription limit (the unified
//! five-hour / weekly windows) as it changes.
//!
//! Claude Code 2.1 writes `{"type":"rate_limit_event","rate_limit_info":{"status":
//! "allowed"|"allowed_warning"|"rejected","resetsAt":<Unix s>,"rateLimitType":
//! "five_hour"|"seven_day"|…,"utilization":0.92,"isUsingOverage":false,…},"uuid":…,
//! "session_id":…}` whenever the `anthropic-ratelimit-unified-*` headers of an API
//! answer change its view of the limit — only when signed in to a subscription
//! (an API key never gets one). A `rejected` answer is a 429 that it does not retry;
//! the turn then ends with that 429.
//!
//! | `status` | output |
//! |---|---|
//! | `rejected` (not on overage) | `cap.error` `rate_limit` (retryable), details `source` = `rate_limit_event`, `limit_type`, `resets_at` and the info verbatim: the session pauses until `resetsAt` when the attempt ends |
//! | `allowed_warning`, or `rejected` while on overage (the request goes through) | `cap.error` [`RATE_LIMIT_WARNING`] (the journal has it; a metric counts it), never a turn's failure |
//! | `allowed` | nothing (the frame is handled) |
//! | anything else | nothing; counted in `ignored_frames` |

use serde_json::{Value, json};

use super::frames::RateLimitEventFrame;
use super::mapper::StreamJsonMapper;
use super::output::Output;
use crate::protocol::{CapEvent, ErrorKind, Nullable};
use crate::supervision::rate_limit::{
    DETAIL_LIMIT_TYPE, DETAIL_SOURCE, PauseSource, RATE_LIMIT_WARNING,
};

impl StreamJsonMapper {
    /// True when the frame was understood.
    pub(super) fn on_rate_limit_event(
        &mut self,
        f: RateLimitEventFrame,
        out: &mut Vec<Output>,
    ) -> bool {
        let Some(info) = f.rate_limit_info else {
            return false;
        };
        let status = info.get("status").and_then(Value::as_str);
        let on_overage = info.get("isUsingOverage") == Some(&Value::Bool(true));
        let limit = info.get("rateLimitType").and_then(Value::as_str);
        let resets_at = info.get("resetsAt").and_then(Value::as_f64);
        let (code, retryable, what) = match status {
            Some("allowed") => return true,
            Some("rejected") if !on_overage => (ErrorKind::RateLimit, true, "reached"),
            Some("rejected") => (
                ErrorKind::Other(RATE_LIMIT_WARNING.into()),
                false,
                "reached; the agent goes on using overage",
            ),
            Some("allowed_warning") => (ErrorKind::Other(RATE_LIMIT_WARNING.into()), false, "near"),
            _ => return false,
        };
        let mut message = format!("{} limit {what}", limit.unwrap_or("subscription"));
        if let Some(u) = info.get("utilization").and_then(Value::as_f64) {
            message.push_str(&format!(" ({:.0}% used)", u * 100.0));
        }
        if let Some(at) = resets_at.and_then(stamp) {
            message.push_str(&format!("; resets at {at}"));
        }
        let mut event = CapEvent::error(code, message, retryable);
        if let CapEvent::Error(e) = &mut event {
            e.details = Nullable::Value(json!({
                DETAIL_SOURCE: PauseSource::RateLimitEvent.as_str(),
                DETAIL_LIMIT_TYPE: limit,
                "resets_at": resets_at,
                "rate_limit_info": info,
            }));
        }
        self.emit(out, event);
        true
    }
}

/// Unix seconds as RFC 3339 (UTC), when they are a time.
fn stamp(secs: f64) -> Option<String> {
    #[allow(clippy::cast_possible_truncation)]
    jiff::Timestamp::from_second(secs as i64)
        .ok()
        .map(|t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(lines: &[&str]) -> (Vec<Output>, StreamJsonMapper) {
        let mut m = StreamJsonMapper::new();
        let mut out = Vec::new();
        for l in lines {
            m.on_line(l.as_bytes(), &mut out);
        }
        (out, m)
    }

    fn errors(out: &[Output]) -> Vec<&crate::protocol::ErrorEvent> {
        out.iter()
            .filter_map(|o| match o {
                Output::Event(CapEvent::Error(e)) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The frames as Claude Code 2.1.197 and 2.1.337 write them (its `rate_limit_info` schema).
    #[test]
    fn each_status_maps_as_the_table_says() {
        let (out, m) = map(&[
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","isUsingOverage":false},"uuid":"u1","session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1796647224,"rateLimitType":"five_hour","utilization":0.92,"isUsingOverage":false,"surpassedThreshold":0.9},"uuid":"u2","session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796647224,"rateLimitType":"five_hour","isUsingOverage":false},"uuid":"u3","session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796647224,"rateLimitType":"seven_day","isUsingOverage":true},"uuid":"u4","session_id":"s"}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"someday"},"uuid":"u5","session_id":"s"}"#,
            r#"{"type":"rate_limit_event","uuid":"u6","session_id":"s"}"#,
        ]);
        let errors = errors(&out);
        let codes: Vec<(&str, Option<&bool>)> = errors
            .iter()
            .map(|e| (e.code.as_str(), e.retryable.get()))
            .collect();
        assert_eq!(
            codes,
            [
                (RATE_LIMIT_WARNING, Some(&false)),
                ("rate_limit", Some(&true)),
                (RATE_LIMIT_WARNING, Some(&false)),
            ]
        );
        assert_eq!(
            errors[0].message,
            "five_hour limit near (92% used); resets at 2026-12-07T12:40:24Z"
        );
        let d = errors[1].details.get().unwrap();
        assert_eq!(d[DETAIL_SOURCE], "rate_limit_event");
        assert_eq!(d[DETAIL_LIMIT_TYPE], "five_hour");
        assert_eq!(d["resets_at"], 1796647224.0);
        assert_eq!(d["rate_limit_info"]["status"], "rejected");
        assert_eq!(m.stats().ignored_frames, 2, "unknown status, no info");
        assert_eq!(m.stats().malformed_frames, 0);
        assert!(!out.iter().any(|o| matches!(o, Output::TurnEnd(_))));
    }
}
