//! Rate limits pause a session instead of failing it: when the agent's limit resets,
//! and how long a session waits at most.
//!
//! A `cap.error` `rate_limit` (any binding) says when to try again in one of the
//! shapes agents use, read by [`reset_after`] from its message and details:
//!
//! - a delay: `retry-after: 30` (seconds), `retry_after_ms`, `retryDelay: "23s"`,
//!   "try again in 5 minutes", "Please retry in 23.5s", "resets in 1h 20m";
//! - a clock time: "resets 3pm", "resets at 15:00", "try again at 3:05 PM
//!   (Europe/London)", "resets 9am UTC" — in the named zone, else the local one, the
//!   next time the clock shows it;
//! - a timestamp: RFC 3339 (`2026-12-01T15:00:00Z`), an HTTP date after
//!   `retry-after`, Unix seconds (`resets_at: 1764601200`, Claude's old
//!   `usage limit reached|1764601200`).
//!
//! A binding that reads the limit from a structured source says so in the error's
//! details: [`DETAIL_SOURCE`] (`rate_limit_event`: Claude Code's frame, whose
//! `resetsAt` is exact) and [`DETAIL_LIMIT_TYPE`] (`five_hour`, `seven_day`, …); the
//! pause then names them. A limit that is only near is a `cap.error`
//! [`RATE_LIMIT_WARNING`]: journaled and counted, never a pause.
//!
//! Without one the session backs off: [`RateLimitPolicy::backoff`] (1 min) doubling
//! per pause, at most [`RateLimitPolicy::backoff_cap`] (1 h). A session pauses for at
//! most [`RateLimitPolicy::max_pause`] (6 h) in all since its last completed turn.

use std::sync::LazyLock;
use std::time::Duration;

use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};
use regex::{Captures, Regex};
use serde_json::Value;

/// Default first backoff step when the agent gives no reset time.
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(60);
/// Default longest backoff step.
pub(crate) const DEFAULT_BACKOFF_CAP: Duration = Duration::from_secs(3600);
/// Default longest a session pauses in all (since its last completed turn).
pub(crate) const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(6 * 3600);
/// The shortest pause for a reset the agent gave: a reset "now" (or already past)
/// still waits this long, so a paused session never retries in a loop.
pub(crate) const MIN_PAUSE: Duration = Duration::from_secs(1);

/// `details` key of a `cap.error` `rate_limit`: where the binding read the limit (a
/// [`PauseSource`] name, e.g. `rate_limit_event`), when it read it from a structured
/// source rather than from error text.
pub const DETAIL_SOURCE: &str = "source";
/// `details` key of a `cap.error` `rate_limit` or [`RATE_LIMIT_WARNING`]: which limit
/// (`five_hour`, `seven_day`, …).
pub const DETAIL_LIMIT_TYPE: &str = "limit_type";
/// The `cap.error` code of a limit that is near, not reached (a binding's own code):
/// a warning, never a turn's failure.
pub const RATE_LIMIT_WARNING: &str = "rate_limit_warning";

/// What a session does on a rate limit (fleet `on_rate_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRateLimit {
    /// Pause until the limit resets, then re-issue the turn.
    #[default]
    Pause,
    /// The turn fails, as any other agent error.
    Fail,
}

impl OnRateLimit {
    pub const NAMES: &[(OnRateLimit, &str)] =
        &[(OnRateLimit::Pause, "pause"), (OnRateLimit::Fail, "fail")];

    /// As written in a fleet file.
    pub fn as_str(self) -> &'static str {
        match self {
            OnRateLimit::Pause => "pause",
            OnRateLimit::Fail => "fail",
        }
    }
}

/// A session's rate-limit policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RateLimitPolicy {
    pub on: OnRateLimit,
    /// The longest a session pauses in all since its last completed turn.
    pub max_pause: Duration,
    /// The first backoff step when the agent gives no reset time (doubling per pause).
    pub backoff: Duration,
    /// The longest backoff step.
    pub backoff_cap: Duration,
}

impl Default for RateLimitPolicy {
    fn default() -> Self {
        RateLimitPolicy {
            on: OnRateLimit::Pause,
            max_pause: DEFAULT_MAX_PAUSE,
            backoff: DEFAULT_BACKOFF,
            backoff_cap: DEFAULT_BACKOFF_CAP,
        }
    }
}

/// Where a pause's length came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseSource {
    /// The agent said when its limit resets.
    Reset,
    /// The agent's `rate_limit_event` frame (Claude Code) said when its limit resets.
    RateLimitEvent,
    /// The agent did not: exponential backoff.
    Backoff,
}

impl PauseSource {
    /// As serialized: `reset`, `rate_limit_event`, `backoff`.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseSource::Reset => "reset",
            PauseSource::RateLimitEvent => "rate_limit_event",
            PauseSource::Backoff => "backoff",
        }
    }

    /// The source a binding named in an error's [`DETAIL_SOURCE`], for a reset it gave.
    pub fn of_detail(name: &str) -> Option<Self> {
        (name == PauseSource::RateLimitEvent.as_str()).then_some(PauseSource::RateLimitEvent)
    }
}

/// What to do about a rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PausePlan {
    Pause {
        delay: Duration,
        source: PauseSource,
    },
    /// Past `max_pause` (or `on_rate_limit = "fail"`): the turn fails, for `reason`.
    GiveUp { reason: String },
}

impl RateLimitPolicy {
    /// The backoff step `step` (from 0): `backoff` doubled `step` times, at most the cap.
    pub fn backoff_step(&self, step: u32) -> Duration {
        let factor = 1u32.checked_shl(step.min(31)).unwrap_or(u32::MAX);
        self.backoff
            .checked_mul(factor)
            .unwrap_or(self.backoff_cap)
            .min(self.backoff_cap)
    }

    /// The plan for pause number `step` (from 0) after `paused` in all, when the agent
    /// said its limit resets after `reset` (if it did).
    pub fn plan(&self, step: u32, reset: Option<Duration>, paused: Duration) -> PausePlan {
        if self.on == OnRateLimit::Fail {
            return PausePlan::GiveUp {
                reason: "on_rate_limit = \"fail\"".into(),
            };
        }
        let (delay, source) = match reset {
            Some(r) => (r.max(MIN_PAUSE), PauseSource::Reset),
            None => (self.backoff_step(step), PauseSource::Backoff),
        };
        if paused + delay > self.max_pause {
            return PausePlan::GiveUp {
                reason: format!(
                    "a pause of {} after {} paused would pass max_pause ({})",
                    human(delay),
                    human(paused),
                    human(self.max_pause)
                ),
            };
        }
        PausePlan::Pause { delay, source }
    }
}

/// `1h 5m`, `30s`, `250ms`: a duration as the summary and the reasons write it.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, 0) => format!("{}ms", d.as_millis()),
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m {sec}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

/// Parse a duration as written in a fleet file or an agent's message: `90`, `90s`,
/// `1.5 s`, `250ms`, `5m`, `5 minutes`, `1h 20m`, `5m30s`, `2 hours and 10 minutes`.
/// A bare number is seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    let mut any = false;
    while !rest.is_empty() {
        let c = PART.captures(rest)?;
        let whole = c.get(0)?;
        if whole.start() != 0 {
            return None;
        }
        let n: f64 = c["n"].parse().ok()?;
        total += Duration::try_from_secs_f64(n * unit_secs(&c["unit"])?).ok()?;
        any = true;
        rest = &rest[whole.end()..];
    }
    any.then_some(total)
}

fn unit_secs(unit: &str) -> Option<f64> {
    let u = unit.to_ascii_lowercase();
    Some(match u.as_str() {
        "ms" | "millisecond" | "milliseconds" => 1e-3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        _ => return None,
    })
}

/// Longest first: the alternation takes the first that matches.
const UNIT: &str = r"milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d";

static PART: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)^\s*(?:and\s+|,\s*)?(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>{UNIT})\s*"
    ))
    .expect("duration part")
});

/// "in 5 minutes", "retry in 23.5s", "after 1h 20m".
static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    let part = format!(r"\d+(?:\.\d+)?\s*(?:{UNIT})");
    Regex::new(&format!(
        r"(?i)\b(?:in|after)\s+(?P<d>{part}(?:(?:\s*,\s*|\s+and\s+|\s*){part})*)\b"
    ))
    .expect("relative reset")
});

/// `retry-after: 30`, `retry_after=30`, `"retry-after-ms": 1500`, `Retry-After: <HTTP date>`.
static RETRY_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)retry[-_ ]?after(?P<ms>[-_]ms)?"?\s*[:=]\s*"?(?P<v>[A-Za-z]{3},\s*\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d{2}:\d{2}:\d{2}\s+GMT|\d+(?:\.\d+)?)"#,
    )
    .expect("retry-after")
});

/// An RFC 3339 timestamp.
static STAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})")
        .expect("timestamp")
});

/// Unix seconds after a reset word or Claude's `limit reached|`.
static EPOCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)(?:limit reached\||resets?_?at"?\s*[:=]\s*"?)(?P<s>\d{10})\b"#)
        .expect("epoch")
});

/// A clock time after "resets", "reset at", "try again at", "retry at", "until".
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:resets?|try again|retry|until|available)(?:\s+(?:at|after|on))?\s+(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?(?:\s*\(?(?P<tz>UTC|GMT|Z\b|[A-Za-z_]+/[A-Za-z_/+-]+)\)?)?",
    )
    .expect("clock time")
});

/// How long after `now` the agent says its rate limit resets, from the error's
/// `message` and `details` (see the module doc); `None` when it does not say.
pub fn reset_after(
    message: &str,
    details: Option<&Value>,
    now: &ZonedDateTime,
) -> Option<Duration> {
    details
        .and_then(|d| from_details(d, now))
        .or_else(|| from_text(message, now))
        .or_else(|| from_text(&details?.to_string(), now))
}

/// Structured keys: `retry_after` (s), `retry_after_ms`, `retryDelay` ("23s"),
/// `resets_at` / `resetsAt` (Unix seconds or RFC 3339), anywhere in the details.
fn from_details(v: &Value, now: &ZonedDateTime) -> Option<Duration> {
    match v {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let key = k.to_ascii_lowercase().replace(['-', '_'], "");
            let secs = |v: &Value| match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            match key.as_str() {
                "retryafter" => secs(v).and_then(|s| Duration::try_from_secs_f64(s).ok()),
                "retryafterms" => secs(v).and_then(|s| Duration::try_from_secs_f64(s / 1e3).ok()),
                "retrydelay" => v.as_str().and_then(parse_duration),
                "resetsat" | "resetat" | "reset" => match v {
                    Value::String(s) => s
                        .parse::<Timestamp>()
                        .ok()
                        .map(|t| until(t, now))
                        .or_else(|| secs(v).and_then(|s| epoch(s, now))),
                    _ => secs(v).and_then(|s| epoch(s, now)),
                },
                _ => from_details(v, now),
            }
        }),
        Value::Array(items) => items.iter().find_map(|v| from_details(v, now)),
        _ => None,
    }
}

fn from_text(text: &str, now: &ZonedDateTime) -> Option<Duration> {
    if let Some(c) = RETRY_AFTER.captures(text) {
        let v = &c["v"];
        let after = match v.parse::<f64>() {
            Ok(n) if c.name("ms").is_some() => Duration::try_from_secs_f64(n / 1e3).ok(),
            Ok(n) => Duration::try_from_secs_f64(n).ok(),
            Err(_) => jiff::fmt::rfc2822::parse(v)
                .ok()
                .map(|z| until(z.timestamp(), now)),
        };
        if after.is_some() {
            return after;
        }
    }
    if let Some(c) = EPOCH.captures(text) {
        return c["s"].parse().ok().and_then(|s| epoch(s, now));
    }
    if let Some(m) = STAMP.find(text) {
        let stamp = m.as_str().replacen(' ', "T", 1);
        if let Ok(t) = stamp.parse::<Timestamp>() {
            return Some(until(t, now));
        }
    }
    if let Some(c) = RELATIVE.captures(text) {
        return parse_duration(&c["d"]);
    }
    CLOCK.captures(text).and_then(|c| clock(&c, now))
}

/// The next time the clock shows `c`'s time, in its zone or `now`'s.
fn clock(c: &Captures<'_>, now: &ZonedDateTime) -> Option<Duration> {
    let mut hour: i8 = c["h"].parse().ok()?;
    let minute: i8 = c.name("m").map_or(Some(0), |m| m.as_str().parse().ok())?;
    match c.name("ampm").map(|m| m.as_str().to_ascii_lowercase()) {
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(ap) if ap.starts_with('p') => hour = hour % 12 + 12,
        Some(_) => hour %= 12,
        // "resets 3" alone is no time; "15:00" is.
        None if c.name("m").is_none() => return None,
        None => {}
    }
    let time = Time::new(hour, minute, 0, 0).ok()?;
    let tz = match c.name("tz").map(|m| m.as_str()) {
        Some(z) if z.eq_ignore_ascii_case("utc") || z.eq_ignore_ascii_case("gmt") || z == "Z" => {
            TimeZone::UTC
        }
        Some(z) => TimeZone::get(z).ok()?,
        None => now.time_zone().clone(),
    };
    let here = now.with_time_zone(tz.clone());
    let today = here
        .date()
        .to_datetime(time)
        .to_zoned_datetime(tz.clone())
        .ok()?;
    let at = if today.timestamp() > now.timestamp() {
        today
    } else {
        here.date()
            .tomorrow()
            .ok()?
            .to_datetime(time)
            .to_zoned_datetime(tz)
            .ok()?
    };
    Some(until(at.timestamp(), now))
}

fn epoch(secs: f64, now: &ZonedDateTime) -> Option<Duration> {
    // Seconds, or milliseconds when they would be centuries away.
    let secs = if secs > 1e11 { secs / 1e3 } else { secs };
    #[allow(clippy::cast_possible_truncation)]
    let t = Timestamp::from_second(secs as i64).ok()?;
    Some(until(t, now))
}

/// From `now` to `t` (zero when `t` is past).
fn until(t: Timestamp, now: &ZonedDateTime) -> Duration {
    Duration::try_from(now.timestamp().duration_until(t)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
#[path = "rate_limit_tests.rs"]
mod tests;
