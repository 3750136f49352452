//! Pricing for agents that report tokens but no cost (Codex, most ACP agents): a table
//! of USD per million tokens by model, so the budget can count them. A cost computed
//! here is marked `_meta["capfleet.cost_estimated"] = true` on the `cap.usage` event.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Number, Value};

use crate::protocol::{HasMeta, Usage};

/// The `_meta` key marking a cost capfleet computed from its pricing table: `true`,
/// or [`UNKNOWN_MODEL`] on a report with tokens whose model the table has no price
/// for (its cost is unknown, counted as nothing).
pub const META_ESTIMATED: &str = "capfleet.cost_estimated";
/// The [`META_ESTIMATED`] value of a report with tokens that could not be priced.
pub const UNKNOWN_MODEL: &str = "unknown model";

/// USD per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default)]
    pub cache_read_per_mtok: f64,
    #[serde(default)]
    pub cache_creation_per_mtok: f64,
}

/// Prices by model id; a model matches an entry equal to it or a prefix of it
/// (`claude-opus-4-8[1m]` is priced as `claude-opus-4-8`), the longest prefix first.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    #[serde(default)]
    pub models: HashMap<String, Price>,
}

impl Pricing {
    /// Parse a `pricing.toml`; errors name the key.
    pub fn parse(src: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(src)
    }

    pub fn price(&self, model: &str) -> Option<&Price> {
        self.models
            .iter()
            .filter(|(m, _)| model.starts_with(m.as_str()))
            .max_by_key(|(m, _)| m.len())
            .map(|(_, p)| p)
    }

    /// Fill in the cost of a usage report that has tokens but no cost, when the model
    /// is priced (else, when it has tokens, mark it [`UNKNOWN_MODEL`]). Returns whether
    /// it priced it.
    pub fn estimate(&self, u: &mut Usage) -> bool {
        if u.cost_usd_estimate.is_set() {
            return false;
        }
        let n = |v: &crate::protocol::Nullable<u64>| v.get().copied().unwrap_or(0) as f64;
        let Some(price) = u.model_id.get().and_then(|m| self.price(m)).copied() else {
            let tokens = [&u.input_tokens, &u.output_tokens, &u.cache_read_tokens]
                .into_iter()
                .any(|t| n(t) > 0.0);
            if tokens {
                u.set_meta(META_ESTIMATED, Value::from(UNKNOWN_MODEL));
            }
            return false;
        };
        let cost = (n(&u.input_tokens) * price.input_per_mtok
            + n(&u.output_tokens) * price.output_per_mtok
            + n(&u.cache_read_tokens) * price.cache_read_per_mtok
            + n(&u.cache_creation_tokens) * price.cache_creation_per_mtok)
            / 1e6;
        let Some(number) = Number::from_f64((cost * 1e10).round() / 1e10) else {
            return false;
        };
        u.cost_usd_estimate = number.into();
        u.set_meta(META_ESTIMATED, Value::Bool(true));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
[models."gpt-5"]
input_per_mtok = 1.25
output_per_mtok = 10.0

[models."gpt-5-mini"]
input_per_mtok = 0.25
output_per_mtok = 2.0
"#;

    fn usage(model: &str, input: u64, output: u64) -> Usage {
        serde_json::from_value(serde_json::json!({
            "model_id": model, "input_tokens": input, "output_tokens": output
        }))
        .unwrap()
    }

    #[test]
    fn prices_by_longest_prefix_and_marks_the_estimate() {
        let p = Pricing::parse(TABLE).unwrap();
        let mut u = usage("gpt-5-mini-2026", 1_000_000, 100_000);
        assert!(p.estimate(&mut u));
        assert!((u.cost_usd().unwrap() - 0.45).abs() < 1e-9);
        assert_eq!(u.meta.as_ref().unwrap()[META_ESTIMATED], true);
    }

    #[test]
    fn reported_costs_and_unknown_models_are_left_alone() {
        let p = Pricing::parse(TABLE).unwrap();
        let mut reported = usage("gpt-5", 10, 10);
        reported.cost_usd_estimate = Number::from_f64(0.5).unwrap().into();
        assert!(!p.estimate(&mut reported));
        assert_eq!(reported.cost_usd(), Some(0.5));
        let mut unknown = usage("mystery", 10, 10);
        assert!(!p.estimate(&mut unknown));
        assert!(unknown.cost_usd().is_none());
        assert_eq!(
            unknown.meta.as_ref().unwrap()[META_ESTIMATED],
            UNKNOWN_MODEL
        );
        let mut nothing = usage("mystery", 0, 0);
        assert!(!p.estimate(&mut nothing));
        assert!(nothing.meta.is_none(), "no tokens, no cost to miss");
        assert!(
            Pricing::parse("[models.x]\ninput_per_mtok = 1\noutput_per_mtok = 1\nbogus = 2")
                .is_err()
        );
    }
}
