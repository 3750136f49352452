use serde_json::json;

use super::*;

/// 2026-12-01 14:00:00 in London (UTC+0 in winter); the zone a message without one
/// is read in.
fn now() -> ZonedDateTime {
    "2026-12-01T14:00:00+00:00[Europe/London]"
        .parse()
        .expect("fixed now")
}

fn after(message: &str) -> Option<Duration> {
    reset_after(message, None, &now())
}

const MIN: u64 = 60;
const HOUR: u64 = 3600;

#[test]
fn delays_in_words_and_headers() {
    for (message, secs) in [
        ("429 Too Many Requests; retry-after: 30", 30.0),
        ("{\"retry_after\": 12}", 12.0),
        ("retry-after-ms: 1500", 1.5),
        ("Rate limited. Try again in 5 minutes.", 300.0),
        ("Please retry in 23.5s.", 23.5),
        ("Your limit resets in 1h 20m", 4800.0),
        ("try again in 5m30s", 330.0),
        ("resets in 2 hours and 10 minutes", 7800.0),
    ] {
        assert_eq!(
            after(message),
            Some(Duration::from_secs_f64(secs)),
            "{message}"
        );
    }
}

#[test]
fn clock_times_with_and_without_a_zone() {
    for (message, secs) in [
        // Local (London) 15:00 is an hour away.
        ("5-hour limit reached ∙ resets 3pm", HOUR),
        (
            "You've hit your usage limit. Try again at 3:05 PM.",
            HOUR + 5 * MIN,
        ),
        ("limit reached, resets at 15:30", HOUR + 30 * MIN),
        // 9am has passed today: tomorrow's.
        ("resets 9am", 19 * HOUR),
        // New York is UTC-5: 10am there is 15:00 here.
        (
            "Claude usage limit reached. Resets 10am (America/New_York)",
            HOUR,
        ),
        ("resets 4pm UTC", 2 * HOUR),
        ("limit reached · resets 12am", 10 * HOUR),
    ] {
        assert_eq!(after(message), Some(Duration::from_secs(secs)), "{message}");
    }
}

#[test]
fn timestamps_and_unix_seconds() {
    let in_two_hours = now().timestamp().as_second() + 2 * 3600;
    for message in [
        "rate limited until 2026-12-01T16:00:00Z".to_owned(),
        "resets 2026-12-01T17:00:00+01:00".to_owned(),
        format!("Claude AI usage limit reached|{in_two_hours}"),
        "Retry-After: Tue, 01 Dec 2026 16:00:00 GMT".to_owned(),
    ] {
        assert_eq!(
            after(&message),
            Some(Duration::from_secs(2 * HOUR)),
            "{message}"
        );
    }
    assert_eq!(
        after("resets 2026-12-01T13:00:00Z"),
        Some(Duration::ZERO),
        "a past reset is now"
    );
}

#[test]
fn structured_details() {
    let stamp = now().timestamp().as_second() + 600;
    for details in [
        json!({"retry_after": 600}),
        json!({"headers": {"retry-after": "600"}}),
        json!({"error": {"details": [{"@type": "RetryInfo", "retryDelay": "600s"}]}}),
        json!({"rate_limit_info": {"resetsAt": stamp}}),
        json!({"resets_at": "2026-12-01T14:10:00Z"}),
    ] {
        assert_eq!(
            reset_after("rate_limit", Some(&details), &now()),
            Some(Duration::from_secs(600)),
            "{details}"
        );
    }
}

#[test]
fn no_reset_time_is_none() {
    for message in [
        "rate_limit_error: slow down",
        "429 Too Many Requests",
        "RESOURCE_EXHAUSTED: quota exceeded for 3 requests",
        "resets 3",
        "resets 13pm",
        "retry in a while",
    ] {
        assert_eq!(after(message), None, "{message}");
    }
}

#[test]
fn backoff_doubles_from_a_minute_to_an_hour() {
    let p = RateLimitPolicy::default();
    let steps: Vec<u64> = (0..9).map(|s| p.backoff_step(s).as_secs()).collect();
    assert_eq!(steps, [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
    assert_eq!(p.backoff_step(u32::MAX), DEFAULT_BACKOFF_CAP);
}

#[test]
fn plans_pause_until_max_pause() {
    let p = RateLimitPolicy::default();
    assert_eq!(
        p.plan(0, None, Duration::ZERO),
        PausePlan::Pause {
            delay: Duration::from_secs(60),
            source: PauseSource::Backoff
        }
    );
    assert_eq!(
        p.plan(3, Some(Duration::from_secs(5)), Duration::ZERO),
        PausePlan::Pause {
            delay: Duration::from_secs(5),
            source: PauseSource::Reset
        }
    );
    assert_eq!(
        p.plan(0, Some(Duration::ZERO), Duration::ZERO),
        PausePlan::Pause {
            delay: MIN_PAUSE,
            source: PauseSource::Reset
        },
        "a reset now still waits"
    );
    let PausePlan::GiveUp { reason } = p.plan(
        0,
        Some(Duration::from_secs(5 * HOUR)),
        Duration::from_secs(HOUR + 1),
    ) else {
        panic!("past max_pause");
    };
    assert!(reason.contains("max_pause (6h)"), "{reason}");
    let fail = RateLimitPolicy {
        on: OnRateLimit::Fail,
        ..p
    };
    assert!(matches!(
        fail.plan(0, None, Duration::ZERO),
        PausePlan::GiveUp { .. }
    ));
}

#[test]
fn durations_as_written() {
    for (text, ms) in [
        ("90", 90_000),
        ("1.5", 1500),
        ("250ms", 250),
        ("5m", 300_000),
        ("6h", 21_600_000),
        ("1h 30m", 5_400_000),
        ("2 minutes", 120_000),
    ] {
        assert_eq!(
            parse_duration(text),
            Some(Duration::from_millis(ms)),
            "{text}"
        );
    }
    for bad in ["", "soon", "5 parsecs", "-1", "5m soon"] {
        assert_eq!(parse_duration(bad), None, "{bad}");
    }
    assert_eq!(human(Duration::from_secs(3900)), "1h 5m");
    assert_eq!(human(Duration::from_millis(250)), "250ms");
}
