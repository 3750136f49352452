//! Rate limits of the real Claude Code 2.1.337 over stream-json, through `capfleet
//! run`, against the fake LLM: an API key's 429 (Claude's retries off) and a
//! subscription's limit, which Claude Code reports in `rate_limit_event` frames
//! (issue 34, point 5b) and does not retry.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, EnvMarker, wait_until};
use crate::rate_limit::{of, pauses};

fn events_of(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `cap.error` codes session `a` saw, in order.
/// Session `a` ran one turn, completed, with no restart, and said `done`.
fn one_turn_done(events: &[Value], done: &str, stderr: &str) {
    assert!(of(events, "a", "restart").is_empty());
    let ended = of(events, "a", "turn_ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["outcome"], "completed", "{stderr}");
    let all: Vec<Value> = of(events, "a", "cap").into_iter().cloned().collect();
    assert!(
        common::texts(&all).contains(done),
        "{}",
        common::texts(&all)
    );
}

fn error_codes(events: &[Value]) -> Vec<&str> {
    of(events, "a", "cap")
        .iter()
        .filter(|e| e["event"]["kind"] == "cap.error")
        .filter_map(|e| e["event"]["code"].as_str())
        .collect()
}

/// Real Claude Code 2.1.337 over stream-json, through `capfleet run`, against the fake
/// LLM answering its first two requests with HTTP 429, a `retry-after` header and
/// Anthropic's `rate_limit_error` body. Claude Code's own retries are off
/// (`CLAUDE_CODE_MAX_RETRIES=0`; with them it would wait out `retry-after` itself and
/// capfleet would never see the limit), so it ends the turn with `api_error_status`
/// 429, and says nothing of `retry-after`: the session backs off (1 s, then 2 s),
/// pauses twice, and re-issues the turn, which completes on the third request. The
/// fake LLM counts the requests: one per attempt, each retry after its pause.
#[test]
fn real_claude_code_pauses_on_429_and_completes_the_turn() {
    const DONE: &str = "Done after the rate limit.";
    let fake = common::FakeLlm::start();
    let limited = json!({"error": {
        "status": 429,
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization of 50 requests per minute.",
        "headers": {"retry-after": "1"},
    }});
    fake.script(json!([limited, limited, {"text": DONE}]));
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit-claude");
    let (k, v) = m.pair();
    let fleet = format!(
        "[fleet]\nname = \"rl\"\nstart = \"a\"\ntask = \"Say done.\"\nrate_limit_backoff = \"1s\"\nturn_timeout_s = 30\n\n\
         [[sessions]]\nname = \"a\"\nagent = \"claude-code\"\n\
         env = {{ CLAUDE_CODE_MAX_RETRIES = \"0\", {k} = \"{v}\" }}\n"
    );
    let out = common::run_fleet_with_claude(&fake, home.path(), dir.path(), &fleet);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = events_of(&out);
    assert_eq!(
        error_codes(&events),
        ["rate_limit", "rate_limit"],
        "{stderr}"
    );
    assert_eq!(
        pauses(&events, "a"),
        [(1000, "backoff"), (2000, "backoff")],
        "{stderr}"
    );
    one_turn_done(&events, DONE, &stderr);

    // At the fake LLM: three requests, the retries a backoff step apart at least.
    let requests = fake.requests_to("/v1/messages");
    let statuses: Vec<u64> = requests
        .iter()
        .filter_map(|r| r["status"].as_u64())
        .collect();
    assert_eq!(statuses, [429, 429, 200], "{requests:?}");
    let t: Vec<f64> = requests.iter().map(|r| r["t"].as_f64().unwrap()).collect();
    assert!(
        t[1] - t[0] >= 1.0 && t[2] - t[1] >= 2.0,
        "request times {t:?}"
    );
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
            .processes()
            .is_empty()),
        "no agent survives"
    );
}

/// Claude Code signed in to a subscription (its OAuth token from the environment, no
/// API key: the only sign-in under which 2.1.337 (as 2.1.197) reads the `anthropic-ratelimit-
/// unified-*` headers and writes `rate_limit_event` frames), with its default
/// retries. The fake LLM answers the first request with a 429 whose headers say the
/// five-hour limit is `rejected` until `reset` (a few seconds ahead): Claude Code
/// does not retry it, writes a `rate_limit_event` `rejected` frame with `resetsAt`,
/// and ends the turn with the 429 ("You've hit your session limit · resets …", to
/// the minute). The session pauses until `resetsAt` exactly — the pause names the
/// source `rate_limit_event` and the limit `five_hour`; the default backoff (1 min)
/// would outlast the test — and re-issues the turn; the second answer's headers say
/// the limit is near (`allowed_warning`): a journaled `rate_limit_warning`, and the
/// turn completes.
#[test]
fn real_claude_code_on_a_subscription_waits_for_its_rate_limit_event_reset() {
    const DONE: &str = "Done after the five-hour window.";
    let fake = common::FakeLlm::start();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let reset = now + 8;
    let unified = |status: &str| {
        json!({
            "anthropic-ratelimit-unified-status": status,
            "anthropic-ratelimit-unified-reset": reset.to_string(),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
        })
    };
    let mut near = unified("allowed_warning");
    near["anthropic-ratelimit-unified-5h-surpassed-threshold"] = json!("0.9");
    near["anthropic-ratelimit-unified-5h-utilization"] = json!("0.92");
    near["anthropic-ratelimit-unified-5h-reset"] = json!((now + 3600).to_string());
    fake.script(json!([
        {"error": {"status": 429, "type": "rate_limit_error", "message": "Rate limited"},
         "headers": unified("rejected")},
        {"text": DONE, "headers": near},
    ]));
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit-claude-subscription");
    let (k, v) = m.pair();
    let fleet = format!(
        "[fleet]\nname = \"rl\"\nstart = \"a\"\ntask = \"Say done.\"\nturn_timeout_s = 60\n\n\
         [[sessions]]\nname = \"a\"\nagent = \"claude-code\"\n\
         env = {{ ANTHROPIC_API_KEY = \"\", CLAUDE_CODE_OAUTH_TOKEN = \"capfleet-test-subscription\", {k} = \"{v}\" }}\n"
    );
    let out = common::run_fleet_with_claude(&fake, home.path(), dir.path(), &fleet);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = events_of(&out);
    // The frame's rejection, the turn's 429, then the warning of the second answer.
    assert_eq!(
        error_codes(&events),
        ["rate_limit", "rate_limit", "rate_limit_warning"],
        "{stderr}"
    );
    let paused = of(&events, "a", "paused");
    assert_eq!(paused.len(), 1, "{stderr}");
    let p = paused[0];
    assert_eq!(
        (p["source"].as_str(), p["limit_type"].as_str()),
        (Some("rate_limit_event"), Some("five_hour")),
        "{p}"
    );
    let until = p["until_ms"].as_u64().unwrap();
    assert!(
        until.abs_diff(reset * 1000) < 1000,
        "paused until {until}, resetsAt {reset}: {p}"
    );
    one_turn_done(&events, DONE, &stderr);
    assert!(
        stderr.contains("rate limited: the session pauses"),
        "{stderr}"
    );

    // At the fake LLM: two requests (Claude Code did not retry the 429 itself), as a
    // subscriber (a bearer token, no API key), the second once the window reset.
    let requests = fake.requests_to("/v1/messages");
    let statuses: Vec<u64> = requests
        .iter()
        .filter_map(|r| r["status"].as_u64())
        .collect();
    assert_eq!(statuses, [429, 200], "{requests:?}");
    assert!(
        requests[0]["headers"].get("x-api-key").is_none(),
        "{}",
        requests[0]["headers"]
    );
    assert!(
        requests[1]["t"].as_f64().unwrap() >= reset as f64,
        "retried before the reset: {requests:?}"
    );

    // The journal keeps the pause (with its limit) and the warning.
    let journal = common::run_journal(dir.path());
    let paused = journal
        .iter()
        .find(|r| r["type"] == "paused")
        .expect("paused record");
    assert_eq!(paused["limit_type"], "five_hour", "{paused}");
    let warning = journal
        .iter()
        .find(|r| r["event"]["code"] == "rate_limit_warning")
        .expect("the warning is journaled");
    assert_eq!(
        warning["event"]["details"]["limit_type"], "five_hour",
        "{warning}"
    );
    assert_eq!(
        warning["event"]["details"]["rate_limit_info"]["utilization"],
        0.92
    );
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
            .processes()
            .is_empty()),
        "no agent survives"
    );
}
