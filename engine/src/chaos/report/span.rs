//! The report as an OpenTelemetry span (`chaos_report`): its figures as attributes,
//! exported with the run's spans when spans are exported (`--otlp`, `--trace-file`),
//! so a trace store holds each run's verdicts beside its faults' spans.

use super::Report;
use capfleet_wire::events::trace::{end, int};

impl Report {
    /// Record the report as a `chaos_report` span of run `run_id` (ended at once).
    pub fn record_span(&self, run_id: &str) {
        let ms = |v: Option<u64>| v.map_or(-1, int);
        let f = &self.faults;
        let detected: usize = f.by_kind.values().map(|k| k.detected).sum();
        let recovered: usize = f.by_kind.values().map(|k| k.recovered).sum();
        let broken: Vec<&str> = self
            .invariants
            .iter()
            .filter(|v| v.holds == Some(false))
            .map(|v| v.name)
            .collect();
        let span = tracing::info_span!(
            "chaos.report",
            otel.name = "chaos_report",
            capfleet.run.id = run_id,
            capfleet.chaos.faults = int(f.total),
            capfleet.chaos.detected = int(detected),
            capfleet.chaos.recovered = int(recovered),
            capfleet.chaos.mttr_ready_p95_ms = ms(f.mttr_ready.p95_ms),
            capfleet.chaos.mttr_turn_p95_ms = ms(f.mttr_turn.p95_ms),
            capfleet.chaos.turns_failed = int(self.turns.failed),
            capfleet.chaos.events_lost_unexplained = int(self.events.unexplained),
            capfleet.chaos.events_in_flight = int(self.events.in_flight),
            capfleet.chaos.retry_spend_usd = self.budget.retry_spend_usd,
            capfleet.chaos.holds = self.holds,
            capfleet.chaos.broken = %broken.join(","),
        );
        end(&span);
    }
}
