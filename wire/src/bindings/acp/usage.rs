//! ACP usage -> one `cap.usage` per turn.
//!
//! Two reports feed it. `usage_update` session updates carry the context window in
//! use (`used` of `size` tokens) and, optionally, the session's cost so far
//! (`cost`: cumulative, ACP says); the `session/prompt` response may carry the turn's
//! tokens (`usage`, ACP's end-turn token usage: claude-agent-acp 0.23.1 resets it per
//! prompt). Neither is summed as it comes: the turn's `cap.usage`, sent just before
//! its end, holds the tokens of the response, the cost as the increase of the
//! cumulative cost over the highest seen before (never negative, rounded like
//! stream-json's), and the last context figures in `_meta` (`acp.context_used`,
//! `acp.context_size`). So an agent that sends several `usage_update`s in a turn,
//! or both reports, is counted once; a cost in a currency other than USD is kept in
//! `_meta["acp.cost"]`, not counted as dollars. A turn with no report has no
//! `cap.usage`.

use agent_client_protocol::v1::schema::{Usage as TurnTokens, UsageUpdate};
use serde_json::{Number, Value, json};

use crate::protocol::{CapEvent, HasMeta, StopReason, Usage};

/// Cost deltas are rounded to this many decimal places (float noise).
const COST_DECIMALS: i32 = 10;
/// The `_meta` key of the context window tokens in use.
pub(crate) const META_CONTEXT_USED: &str = "acp.context_used";
/// The `_meta` key of the context window size.
pub(crate) const META_CONTEXT_SIZE: &str = "acp.context_size";
/// The `_meta` key of a cost in a currency other than USD (`{amount, currency}`).
pub(crate) const META_COST: &str = "acp.cost";

/// The usage reports of one ACP session, folded per turn.
#[derive(Debug, Default)]
pub(crate) struct TurnUsage {
    /// The highest cumulative USD cost seen in this connection.
    cost_seen: f64,
    /// This turn's: the last cumulative USD cost, the context, another currency.
    cost: Option<f64>,
    context: Option<(u64, u64)>,
    foreign: Option<Value>,
}

impl TurnUsage {
    /// Keep a `usage_update` for the turn's `cap.usage`.
    pub(crate) fn update(&mut self, u: &UsageUpdate) {
        self.context = Some((u.used, u.size));
        match &u.cost {
            Some(c) if c.currency.eq_ignore_ascii_case("USD") && c.amount.is_finite() => {
                self.cost = Some(self.cost.map_or(c.amount, |k| k.max(c.amount)));
            }
            Some(c) => self.foreign = Some(json!({ "amount": c.amount, "currency": c.currency })),
            None => {}
        }
    }

    /// The turn's `cap.usage`, from what it reported (`None`: nothing), and a clean
    /// slate for the next turn.
    pub(crate) fn end_turn(
        &mut self,
        tokens: Option<&TurnTokens>,
        stop: StopReason,
    ) -> Option<CapEvent> {
        let (cost, context, foreign) = (self.cost.take(), self.context.take(), self.foreign.take());
        if cost.is_none() && context.is_none() && foreign.is_none() && tokens.is_none() {
            return None;
        }
        let cost = cost.map(|total| {
            let delta = (total - self.cost_seen).max(0.0);
            self.cost_seen = self.cost_seen.max(total);
            let scale = 10f64.powi(COST_DECIMALS);
            (delta * scale).round() / scale
        });
        let mut usage = Usage {
            cost_usd_estimate: cost.and_then(Number::from_f64).into(),
            stop_reason: Some(stop),
            ..Usage::default()
        };
        if let Some(t) = tokens {
            usage.input_tokens = Some(t.input_tokens).into();
            usage.output_tokens = Some(t.output_tokens).into();
            usage.cache_read_tokens = t.cached_read_tokens.into();
            usage.cache_creation_tokens = t.cached_write_tokens.into();
            usage.thinking_tokens = t.thought_tokens.into();
        }
        if let Some((used, size)) = context {
            usage.set_meta(META_CONTEXT_USED, json!(used));
            usage.set_meta(META_CONTEXT_SIZE, json!(size));
        }
        if let Some(f) = foreign {
            usage.set_meta(META_COST, f);
        }
        Some(CapEvent::Usage(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(v: Value) -> UsageUpdate {
        serde_json::from_value(v).expect("usage_update")
    }

    fn cost(e: &CapEvent) -> Option<f64> {
        match e {
            CapEvent::Usage(u) => u.cost_usd(),
            _ => None,
        }
    }

    #[test]
    fn cumulative_cost_becomes_per_turn_counted_once() {
        let mut t = TurnUsage::default();
        // Turn 1: two updates (0.10 then 0.25 so far): the turn cost 0.25.
        t.update(&update(
            json!({"used": 10, "size": 100, "cost": {"amount": 0.1, "currency": "USD"}}),
        ));
        t.update(&update(
            json!({"used": 30, "size": 100, "cost": {"amount": 0.25, "currency": "USD"}}),
        ));
        let e = t.end_turn(None, StopReason::EndTurn).expect("usage");
        assert_eq!(cost(&e), Some(0.25));
        let m = e.meta().expect("meta");
        assert_eq!(
            (m[META_CONTEXT_USED].clone(), m[META_CONTEXT_SIZE].clone()),
            (json!(30), json!(100))
        );
        let CapEvent::Usage(u) = &e else { panic!() };
        assert!(
            u.input_tokens.is_absent(),
            "the context in use is not consumption"
        );
        // Turn 2: the session total 0.40: this turn 0.15.
        t.update(&update(
            json!({"used": 50, "size": 100, "cost": {"amount": 0.4, "currency": "USD"}}),
        ));
        let tokens: TurnTokens = serde_json::from_value(
            json!({"totalTokens": 17, "inputTokens": 12, "outputTokens": 5, "cachedReadTokens": 0}),
        )
        .expect("tokens");
        let e = t
            .end_turn(Some(&tokens), StopReason::EndTurn)
            .expect("usage");
        assert!((cost(&e).unwrap() - 0.15).abs() < 1e-12, "{e:?}");
        let CapEvent::Usage(u) = &e else { panic!() };
        assert_eq!(
            (u.input_tokens.get(), u.output_tokens.get()),
            (Some(&12), Some(&5))
        );
        // Turn 3 reports nothing: no event; a lower total later is not negative.
        assert!(t.end_turn(None, StopReason::EndTurn).is_none());
        t.update(&update(
            json!({"used": 1, "size": 100, "cost": {"amount": 0.3, "currency": "USD"}}),
        ));
        assert_eq!(
            cost(&t.end_turn(None, StopReason::EndTurn).unwrap()),
            Some(0.0)
        );
    }

    #[test]
    fn another_currency_is_kept_not_counted() {
        let mut t = TurnUsage::default();
        t.update(&update(
            json!({"used": 1, "size": 2, "cost": {"amount": 3.5, "currency": "EUR"}}),
        ));
        let e = t.end_turn(None, StopReason::EndTurn).expect("usage");
        assert_eq!(cost(&e), None);
        assert_eq!(
            e.meta().expect("meta")[META_COST],
            json!({"amount": 3.5, "currency": "EUR"})
        );
    }
}
