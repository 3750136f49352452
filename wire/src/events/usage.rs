//! Token and cost totals, summed from the streams' `cap.usage` events: per turn (a
//! session's turn result), per session and per fleet (the budget).

use serde::Serialize;

use crate::protocol::{Nullable, Usage};

/// Token and cost totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    pub thinking_tokens: u64,
    pub cost_usd: f64,
    /// Usage reports seen.
    pub reports: u32,
}

impl UsageTotals {
    pub fn add(&mut self, u: &Usage) {
        let n = |v: &Nullable<u64>| v.get().copied().unwrap_or(0);
        self.input_tokens += n(&u.input_tokens);
        self.output_tokens += n(&u.output_tokens);
        self.cache_read_tokens += n(&u.cache_read_tokens);
        self.cache_creation_tokens += n(&u.cache_creation_tokens);
        self.thinking_tokens += n(&u.thinking_tokens);
        self.cost_usd += u.cost_usd().unwrap_or(0.0);
        self.reports += 1;
    }

    pub fn merge(&mut self, other: &UsageTotals) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.thinking_tokens += other.thinking_tokens;
        self.cost_usd += other.cost_usd;
        self.reports += other.reports;
    }
}
