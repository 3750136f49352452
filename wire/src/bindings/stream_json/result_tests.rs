//! A turn's cost and tokens from its `result`: the turn's own
//! (`model_usage_since_last_result`, Claude Code 2.1.337+) where it is, else the rise
//! of the process's cumulative `total_cost_usd`.

use super::mapper::StreamJsonMapper;
use super::output::Output;
use crate::protocol::{CapEvent, Usage};

const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#;

fn usages(m: &mut StreamJsonMapper, lines: &[&str]) -> Vec<Usage> {
    let mut out = Vec::new();
    for l in lines {
        m.on_line(l.as_bytes(), &mut out);
    }
    out.into_iter()
        .filter_map(|o| match o {
            Output::Event(CapEvent::Usage(u)) => Some(u),
            _ => None,
        })
        .collect()
}

fn result(total: f64, own: &str, usage: &str) -> String {
    format!(
        r#"{{"type":"result","subtype":"success","total_cost_usd":{total},"usage":{usage},"model_usage_since_last_result":{own}}}"#
    )
}

#[test]
fn a_resumed_process_is_charged_its_own_cost_not_the_conversation_total() {
    let mut m = StreamJsonMapper::new();
    let first = result(
        0.25,
        r#"{"m":{"inputTokens":100,"outputTokens":10,"costUSD":0.25}}"#,
        r#"{"input_tokens":100,"output_tokens":10}"#,
    );
    let u = usages(&mut m, &[INIT, &first]);
    assert_eq!(u[0].cost_usd(), Some(0.25));
    // A new process resuming the conversation: its first total holds turn 1's cost.
    m.process_restarted();
    let resumed = result(
        0.375,
        r#"{"m":{"inputTokens":50,"outputTokens":5,"costUSD":0.125}}"#,
        r#"{"input_tokens":50,"output_tokens":5}"#,
    );
    let u = usages(&mut m, &[INIT, &resumed]);
    assert_eq!(u[0].cost_usd(), Some(0.125));
    assert_eq!(u[0].input_tokens.get(), Some(&50));
}

#[test]
fn the_turn_is_summed_over_its_models_and_an_unbilled_usage_is_not_read() {
    let mut m = StreamJsonMapper::new();
    // An interrupted request: `usage` all zero, billed in the since-last-result map.
    let line = result(
        0.5,
        r#"{"a":{"inputTokens":100,"outputTokens":13,"thinkingTokens":2,"costUSD":0.375},"b":{"inputTokens":20,"outputTokens":1,"costUSD":0.125}}"#,
        r#"{"input_tokens":0,"output_tokens":0}"#,
    );
    let u = usages(&mut m, &[INIT, &line]);
    assert_eq!(u[0].cost_usd(), Some(0.5));
    assert_eq!(u[0].input_tokens.get(), Some(&120));
    assert_eq!(u[0].output_tokens.get(), Some(&14));
    assert_eq!(u[0].thinking_tokens.get(), Some(&2));
}

#[test]
fn without_the_map_the_cost_is_the_rise_of_the_process_total() {
    let mut m = StreamJsonMapper::new();
    let usage =
        r#"{"input_tokens":7,"output_tokens":1,"output_tokens_details":{"thinking_tokens":3}}"#;
    let u = usages(
        &mut m,
        &[
            INIT,
            &result(0.25, "null", usage),
            &result(0.375, "null", usage),
        ],
    );
    let costs: Vec<_> = u.iter().map(Usage::cost_usd).collect();
    assert_eq!(costs, [Some(0.25), Some(0.125)]);
    assert_eq!(u[1].thinking_tokens.get(), Some(&3));
}
