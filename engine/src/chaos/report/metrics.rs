//! The report as Prometheus / OpenMetrics figures, `capfleet_chaos_*`, on
//! `prometheus-client` as the run's own metrics ([`crate::telemetry::metrics`]):
//! counters with `_total`, gauges bare. `capfleet chaos report --openmetrics` prints
//! them (for a node exporter's text-file collector or a push gateway); the
//! dashboard's chaos row reads them.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Mttr, Report};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MttrLabels {
    pub kind: String,
    /// `ready` (to the next `cap.session.ready`) or `turn` (to the turn's completion).
    pub to: String,
    /// `0.5`, `0.95`, `1` (the worst).
    pub quantile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LostLabels {
    /// `fault` (a garble, truncate or self_kill explains it) or `unexplained`.
    pub cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InFlightLabels {
    /// `journaled` (the reader got it all the same), `lost_to_fault` (a kill, term,
    /// hang or self_kill in its window) or `unexplained`.
    pub fate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InvariantLabels {
    pub invariant: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every `capfleet_chaos_*` series name, as a scrape carries them.
pub const SERIES: &[&str] = &[
    "capfleet_chaos_faults_injected_total",
    "capfleet_chaos_faults_detected_total",
    "capfleet_chaos_faults_recovered_total",
    "capfleet_chaos_mttr_seconds",
    "capfleet_chaos_turns_total",
    "capfleet_chaos_events_lost_total",
    "capfleet_chaos_events_in_flight_total",
    "capfleet_chaos_retry_spend_usd",
    "capfleet_chaos_budget_overshoot_usd",
    "capfleet_chaos_invariant_holds",
];

impl Report {
    /// The report's figures, in a registry of their own (prefix `capfleet_chaos`).
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("capfleet_chaos");
        let per_kind = |pick: fn(&super::KindSummary) -> usize| {
            let f = Family::<KindLabels, Counter>::default();
            for (kind, k) in &self.faults.by_kind {
                let labels = KindLabels { kind: kind.clone() };
                f.get_or_create(&labels).inc_by(pick(k) as u64);
            }
            f
        };
        r.register(
            "faults_injected",
            "Faults injected, by kind",
            per_kind(|k| k.injected),
        );
        r.register(
            "faults_detected",
            "Faults the driver or session noticed, by kind",
            per_kind(|k| k.detected),
        );
        r.register(
            "faults_recovered",
            "Faults after which the turn they hit completed, by kind",
            per_kind(|k| k.recovered),
        );
        let mttr = Family::<MttrLabels, FloatGauge>::default();
        let all = [("all", &self.faults.mttr_ready, &self.faults.mttr_turn)];
        let kinds = self
            .faults
            .by_kind
            .iter()
            .map(|(k, s)| (k.as_str(), &s.mttr_ready, &s.mttr_turn));
        for (kind, ready, turn) in all.into_iter().chain(kinds) {
            set_mttr(&mttr, kind, "ready", ready);
            set_mttr(&mttr, kind, "turn", turn);
        }
        r.register(
            "mttr_seconds",
            "Time from a fault to the next cap.session.ready (to=ready) or to the completion of the turn it hit (to=turn)",
            mttr,
        );
        let turns = Family::<OutcomeLabels, Counter>::default();
        let t = &self.turns;
        for (outcome, n) in [
            ("completed", t.completed),
            ("failed", t.failed),
            ("cancelled", t.cancelled),
            ("cut_by_crash", t.cut_by_crash),
        ] {
            let labels = OutcomeLabels {
                outcome: outcome.into(),
            };
            turns.get_or_create(&labels).inc_by(n as u64);
        }
        r.register("turns", "Turns of the chaos run, by outcome", turns);
        let lost = Family::<LostLabels, Counter>::default();
        for (cause, n) in [
            ("fault", self.events.lost_to_faults),
            ("unexplained", self.events.unexplained),
        ] {
            lost.get_or_create(&LostLabels {
                cause: cause.into(),
            })
            .inc_by(n);
        }
        r.register(
            "events_lost",
            "Turn results the agents emitted that the journal lacks",
            lost,
        );
        let in_flight = Family::<InFlightLabels, Counter>::default();
        let fate = |fate: &str| InFlightLabels { fate: fate.into() };
        for f in ["journaled", "lost_to_fault", "unexplained"] {
            in_flight.get_or_create(&fate(f)).inc_by(0);
        }
        for x in &self.events.in_flight_frames {
            let f = match (x.journaled, &x.cut_by) {
                (true, _) => "journaled",
                (false, Some(_)) => "lost_to_fault",
                (false, None) => "unexplained",
            };
            in_flight.get_or_create(&fate(f)).inc();
        }
        r.register(
            "events_in_flight",
            "Turn results in flight when their agent's process died (recorded, not marked written)",
            in_flight,
        );
        let gauge = |v: f64| {
            let g = FloatGauge::default();
            g.set(v);
            g
        };
        r.register(
            "retry_spend_usd",
            "Usage reported by the attempts before each turn's last one",
            gauge(self.budget.retry_spend_usd),
        );
        r.register(
            "budget_overshoot_usd",
            "What the run went over its budgets by",
            gauge(self.budget.overshoot_usd),
        );
        let holds = Family::<InvariantLabels, Gauge>::default();
        for v in &self.invariants {
            if let Some(h) = v.holds {
                let labels = InvariantLabels {
                    invariant: v.name.into(),
                };
                holds.get_or_create(&labels).set(i64::from(h));
            }
        }
        r.register(
            "invariant_holds",
            "1 when the invariant holds, 0 when it is broken (absent: not checked)",
            holds,
        );
        r
    }

    /// The report's figures as OpenMetrics text.
    pub fn openmetrics(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry()) {
            tracing::error!("encoding the chaos metrics: {e}");
        }
        out
    }
}

fn set_mttr(f: &Family<MttrLabels, FloatGauge>, kind: &str, to: &str, m: &Mttr) {
    for (q, v) in [("0.5", m.p50_ms), ("0.95", m.p95_ms), ("1", m.max_ms)] {
        if let Some(ms) = v {
            let labels = MttrLabels {
                kind: kind.into(),
                to: to.into(),
                quantile: q.into(),
            };
            f.get_or_create(&labels).set(ms as f64 / 1000.0);
        }
    }
}
