//! The worker's own metrics (`capfleet_worker_*`), beside its runs' (one registry
//! across the runs it holds, `capfleet_engine::telemetry::metrics`) in the
//! exposition `--metrics-addr` serves: the runs and leases it holds now, the queue's
//! depth as it last read it, the runs it took over from another worker's journal,
//! how each run it held ended here, and its lease renewals.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub result: String,
}

pub(crate) struct WorkerMetrics {
    /// Shared with the metrics server (`capfleet_server::metrics_http`).
    pub registry: std::sync::Arc<Registry>,
    pub runs_held: Gauge,
    pub leases_held: Gauge,
    pub queue_depth: Gauge,
    pub takeovers: Counter,
    /// Runs let go of, by how: `acked`, `handed_back`, `fenced`, `retried` (its
    /// outcome not journaled), `passed` (another worker held its lease).
    pub runs: Family<ResultLabels, Counter>,
    /// Lease renewals, by result: `ok`, `lost`, `failed`.
    pub renewals: Family<ResultLabels, Counter>,
}

impl WorkerMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("capfleet_worker");
        let (runs_held, leases_held, queue_depth) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let takeovers = Counter::default();
        let runs = Family::<ResultLabels, Counter>::default();
        let renewals = Family::<ResultLabels, Counter>::default();
        registry.register("runs_held", "Runs this worker holds now", runs_held.clone());
        registry.register(
            "leases_held",
            "Leases this worker holds now",
            leases_held.clone(),
        );
        registry.register(
            "queue_depth",
            "Runs waiting in the queue, as last read",
            queue_depth.clone(),
        );
        registry.register(
            "takeovers",
            "Runs taken over from the journal another worker left",
            takeovers.clone(),
        );
        registry.register("runs", "Runs let go of, by how", runs.clone());
        registry.register(
            "lease_renewals",
            "Lease renewals, by result",
            renewals.clone(),
        );
        WorkerMetrics {
            registry: std::sync::Arc::new(registry),
            runs_held,
            leases_held,
            queue_depth,
            takeovers,
            runs,
            renewals,
        }
    }

    /// A run let go of, `result` said.
    pub(crate) fn ran(&self, result: &str) {
        count(&self.runs, result);
    }

    /// A lease renewal, `result` said.
    pub(crate) fn renewed(&self, result: &str) {
        count(&self.renewals, result);
    }
}

fn count(family: &Family<ResultLabels, Counter>, result: &str) {
    family
        .get_or_create(&ResultLabels {
            result: result.to_owned(),
        })
        .inc();
}
