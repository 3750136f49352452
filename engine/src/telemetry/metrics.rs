//! The fleet's Prometheus metrics (`prometheus-client`): one registry per run, fed by
//! the [`super::feed::MetricsFeed`] tap from the events every session publishes, by the
//! router (its pending deliveries) and by the span pipeline (dropped spans). Queue
//! depths and the live process count are read when the registry is encoded (a scrape).
//!
//! Counters are exposed with the `_total` suffix (`capfleet_turns_total`), histograms
//! with `_bucket` / `_sum` / `_count`; [`FleetMetrics::series_names`] lists every name a
//! scrape can carry, for the dashboard cross-check.

mod labels;

pub use labels::ReasonLabels;
pub use labels::{
    AgentLabels, AskLabels, ChildLabels, DecisionLabels, KindLabels, LimitLabels, MailboxLabels,
    PauseLabels, RestartLabels, ScopeLabels, SessionLabels, StateLabels, TokenLabels, TurnLabels,
    UsageLabels,
};

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use tokio::sync::mpsc;

use capfleet_wire::chaos::IoMetrics;
use capfleet_wire::events::Published;
use capfleet_wire::sync::lock;

/// The content type of [`FleetMetrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The value of the `model` label when no model is known.
pub(crate) const UNKNOWN_MODEL: &str = "unknown";

/// Turn latency buckets: 50 ms to about 7 minutes.
#[derive(Clone)]
pub struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(0.05, 2.0, 14))
    }
}

type FloatCounter = Counter<f64, AtomicU64>;

/// What the span pipeline counts: shared with the run's metrics when there are both.
#[derive(Debug, Clone, Default)]
pub struct SpanStats {
    pub exported: Counter,
    pub dropped: Family<ReasonLabels, Counter>,
}
type FloatGauge = Gauge<f64, AtomicU64>;

/// Who a session is, for the `agent` and `model` labels.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub agent: String,
    pub model: String,
}

/// Every metric of a run, and the registry that exposes them.
pub struct FleetMetrics {
    registry: Registry,
    names: Vec<String>,
    pub sessions: Family<StateLabels, Gauge>,
    pub turns: Family<TurnLabels, Counter>,
    pub turn_duration: Family<AgentLabels, Histogram, LatencyBuckets>,
    pub restarts: Family<RestartLabels, Counter>,
    pub pauses: Family<PauseLabels, Counter>,
    pub rate_limit_warnings: Family<LimitLabels, Counter>,
    pub asks: Family<AskLabels, Counter>,
    pub decisions: Family<DecisionLabels, Counter>,
    pub tokens: Family<TokenLabels, Counter>,
    pub cost_usd: Family<UsageLabels, FloatCounter>,
    pub budget_limit_usd: Family<ScopeLabels, FloatGauge>,
    pub budget_remaining_usd: Family<ScopeLabels, FloatGauge>,
    pub events: Family<KindLabels, Counter>,
    /// Chaos faults injected (`[chaos]`, `--chaos`), by kind.
    pub chaos_faults: Family<KindLabels, Counter>,
    pub malformed_frames: Family<SessionLabels, Counter>,
    pub stray_frames: Family<SessionLabels, Counter>,
    /// Turns not re-issued after failing twice in a row the same way (cap.error poison_turn).
    pub poison_turns: Family<SessionLabels, Counter>,
    /// Requests an overloaded agent refused and that were sent again after a backoff
    /// (cap.error server_overloaded: Codex app-server's `-32001`).
    pub overload_retries: Family<SessionLabels, Counter>,
    /// Text steered into a session's running turn (CAP queued input:
    /// `cap.user_input.inject`), by session.
    pub steers: Family<SessionLabels, Counter>,
    /// Children of the root that died (`crate::death`).
    pub tree_deaths: Family<ChildLabels, Counter>,
    pub mailbox_depth: Family<MailboxLabels, Gauge>,
    pub agent_processes: Gauge,
    pub spans: SpanStats,
    /// A chaos run's byte and connection faults, handed to the sessions' handles.
    pub chaos_io: IoMetrics,
    /// Bounded queues whose fill level is read at each scrape.
    queues: Mutex<Vec<(String, mpsc::WeakSender<Published>)>>,
    /// Agent and model per session URN.
    sessions_info: Mutex<HashMap<String, SessionInfo>>,
}

impl std::fmt::Debug for FleetMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetMetrics").finish_non_exhaustive()
    }
}

/// Registers metrics and remembers the series names each one exposes.
struct Builder {
    registry: Registry,
    names: Vec<String>,
}

impl Builder {
    fn add<M: Metric + Clone>(&mut self, name: &str, help: &str, suffixes: &[&str], m: M) -> M {
        self.registry.register(name, help, m.clone());
        for s in suffixes {
            self.names.push(format!("capfleet_{name}{s}"));
        }
        m
    }
}

const COUNTER: &[&str] = &["_total"];
const GAUGE: &[&str] = &[""];
const HISTOGRAM: &[&str] = &["_bucket", "_sum", "_count"];

impl Default for FleetMetrics {
    fn default() -> Self {
        Self::new(SpanStats::default())
    }
}

impl FleetMetrics {
    /// The run's metrics; `spans` are the span pipeline's counters (fresh ones when
    /// nothing exports spans).
    pub fn new(spans: SpanStats) -> Self {
        let mut b = Builder {
            registry: Registry::with_prefix("capfleet"),
            names: Vec::new(),
        };
        let sessions = b.add(
            "sessions",
            "Sessions by lifecycle state",
            GAUGE,
            Family::default(),
        );
        let turns = b.add(
            "turns",
            "Turns ended, by session, agent and outcome",
            COUNTER,
            Family::default(),
        );
        let turn_duration = b.add(
            "turn_duration_seconds",
            "Turn latency, prompt to end, by agent",
            HISTOGRAM,
            Family::new_with_constructor(LatencyBuckets),
        );
        let restarts = b.add(
            "restarts",
            "Agent restarts, by session and cause",
            COUNTER,
            Family::default(),
        );
        let pauses = b.add(
            "pauses",
            "Rate-limit pauses, by session and where their length came from",
            COUNTER,
            Family::default(),
        );
        let asks = b.add(
            "asks",
            "Permission requests and questions from agents",
            COUNTER,
            Family::default(),
        );
        let decisions = b.add(
            "decisions",
            "Answers to permission requests and questions, by the rule that decided",
            COUNTER,
            Family::default(),
        );
        let tokens = b.add(
            "tokens",
            "Tokens reported, by session, agent, model and type",
            COUNTER,
            Family::default(),
        );
        let cost_usd = b.add(
            "cost_usd",
            "Cost in USD, by session, agent and model",
            COUNTER,
            Family::default(),
        );
        let budget_limit_usd = b.add(
            "budget_limit_usd",
            "Budget limits in USD (fleet and per session)",
            GAUGE,
            Family::default(),
        );
        let budget_remaining_usd = b.add(
            "budget_remaining_usd",
            "Budget left in USD (negative once exceeded)",
            GAUGE,
            Family::default(),
        );
        let events = b.add(
            "events",
            "Published events by kind",
            COUNTER,
            Family::default(),
        );
        let chaos_faults = b.add(
            "chaos_faults",
            "Chaos faults injected, by kind (kill, hang, garble, self_kill, ...)",
            COUNTER,
            Family::default(),
        );
        let malformed_frames = b.add(
            "malformed_frames",
            "Agent output that could not be parsed (cap.error parse_failed)",
            COUNTER,
            Family::default(),
        );
        let rate_limit_warnings = b.add(
            "rate_limit_warnings",
            "Warnings that a rate limit is near (cap.error rate_limit_warning), by limit",
            COUNTER,
            Family::default(),
        );
        let stray_frames = b.add(
            "stray_frames",
            "Well-formed agent frames where none may come, not taken as answers (cap.error stray_frame)",
            COUNTER,
            Family::default(),
        );
        let poison_turns = b.add(
            "poison_turns",
            "Turns not tried again after failing twice in a row the same way (cap.error poison_turn)",
            COUNTER,
            Family::default(),
        );
        let steers = b.add(
            "steers",
            "Text steered into a running turn (CAP queued input), by session",
            COUNTER,
            Family::default(),
        );
        let overload_retries = b.add(
            "overload_retries",
            "Requests an overloaded agent refused, sent again after a backoff (cap.error server_overloaded)",
            COUNTER,
            Family::default(),
        );
        let tree_deaths = b.add(
            "tree_deaths",
            "Children of the supervision tree's root that died (journal, budget, telemetry, metrics, …)",
            COUNTER,
            Family::default(),
        );
        let mailbox_depth = b.add(
            "mailbox_depth",
            "Messages waiting in the bounded queues (taps, router deliveries)",
            GAUGE,
            Family::default(),
        );
        let agent_processes = b.add(
            "agent_processes",
            "Process groups capfleet runs (agents and their commands)",
            GAUGE,
            Gauge::default(),
        );
        b.add(
            "otel_spans_exported",
            "Spans exported",
            COUNTER,
            spans.exported.clone(),
        );
        b.add(
            "otel_spans_dropped",
            "Spans lost: the batch queue was full, or the export failed",
            COUNTER,
            spans.dropped.clone(),
        );
        let chaos_io = IoMetrics {
            faults: b.add(
                "chaos_io_faults",
                "Chaos byte and connection faults applied, by session and kind",
                COUNTER,
                Family::default(),
            ),
            bytes_garbled: b.add(
                "chaos_bytes_garbled",
                "Bytes of agent output corrupted by the chaos interposer (garble)",
                COUNTER,
                Family::default(),
            ),
            frames_truncated: b.add(
                "chaos_frames_truncated",
                "Agent frames cut short by the chaos interposer (truncate)",
                COUNTER,
                Family::default(),
            ),
        };
        FleetMetrics {
            registry: b.registry,
            names: b.names,
            sessions,
            turns,
            turn_duration,
            restarts,
            pauses,
            rate_limit_warnings,
            asks,
            decisions,
            tokens,
            cost_usd,
            budget_limit_usd,
            budget_remaining_usd,
            events,
            chaos_faults,
            malformed_frames,
            stray_frames,
            poison_turns,
            overload_retries,
            steers,
            tree_deaths,
            mailbox_depth,
            agent_processes,
            spans,
            chaos_io,
            queues: Mutex::new(Vec::new()),
            sessions_info: Mutex::new(HashMap::new()),
        }
    }

    /// Every series name a scrape can carry.
    pub fn series_names(&self) -> &[String] {
        &self.names
    }

    /// Watch the fill level of a bounded queue, shown as `mailbox_depth{mailbox=name}`.
    pub fn watch_queue(&self, name: &str, tx: &mpsc::Sender<Published>) {
        lock(&self.queues).push((name.to_owned(), tx.downgrade()));
    }

    /// A session joined the fleet: its agent and model label its series; it starts
    /// in `starting`.
    pub fn add_session(&self, urn: &str, info: SessionInfo) {
        lock(&self.sessions_info).insert(urn.to_owned(), info);
        self.sessions
            .get_or_create(&StateLabels {
                state: "starting".into(),
            })
            .inc();
    }

    /// A session that could not start after all.
    pub fn remove_session(&self, urn: &str) {
        lock(&self.sessions_info).remove(urn);
        self.sessions
            .get_or_create(&StateLabels {
                state: "starting".into(),
            })
            .dec();
    }

    /// The agent and model of a session (unknown ones for a session never added).
    pub fn session_info(&self, urn: &str) -> SessionInfo {
        lock(&self.sessions_info)
            .get(urn)
            .cloned()
            .unwrap_or_else(|| SessionInfo {
                agent: "unknown".into(),
                model: UNKNOWN_MODEL.into(),
            })
    }

    /// The run's budget limits.
    pub fn set_budget(&self, total_usd: Option<f64>, per_session: &[(String, f64)]) {
        let scopes = total_usd
            .map(|l| ("fleet".to_owned(), l))
            .into_iter()
            .chain(per_session.iter().cloned());
        for (scope, limit) in scopes {
            let l = ScopeLabels { scope };
            self.budget_limit_usd.get_or_create(&l).set(limit);
            self.budget_remaining_usd.get_or_create(&l).set(limit);
        }
    }

    /// The registry as OpenMetrics text (queue depths and processes read now).
    pub fn encode(&self) -> String {
        self.encode_with(None)
    }

    /// [`FleetMetrics::encode`], followed by the metrics of `extra` (an
    /// application's own registry, e.g. a server's), in one exposition.
    pub fn encode_with(&self, extra: Option<&Registry>) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        self.refresh();
        let mut out = String::new();
        let encoded = encode_registry(&mut out, &self.registry)
            .and_then(|()| extra.map_or(Ok(()), |r| encode_registry(&mut out, r)))
            .and_then(|()| encode_eof(&mut out));
        if let Err(e) = encoded {
            tracing::error!("encoding the metrics: {e}");
        }
        out
    }

    fn refresh(&self) {
        let live = capfleet_wire::process::live_groups();
        self.agent_processes
            .set(i64::try_from(live).unwrap_or(i64::MAX));
        let queues = lock(&self.queues)
            .iter()
            .map(|(n, w)| (n.clone(), w.upgrade()))
            .collect::<Vec<_>>();
        for (name, tx) in queues {
            let depth = tx.map_or(0, |tx| tx.max_capacity() - tx.capacity());
            self.mailbox_depth
                .get_or_create(&MailboxLabels { mailbox: name })
                .set(i64::try_from(depth).unwrap_or(i64::MAX));
        }
    }
}

/// A shared handle on a run's metrics.
pub type Metrics = Arc<FleetMetrics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_series_is_in_a_scrape_once_it_has_a_value() {
        let m = FleetMetrics::default();
        m.add_session(
            "cap://f/a",
            SessionInfo {
                agent: "sim".into(),
                model: "m".into(),
            },
        );
        m.set_budget(Some(1.0), &[]);
        let text = m.encode();
        assert!(
            text.contains("capfleet_sessions{state=\"starting\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("capfleet_budget_remaining_usd{scope=\"fleet\"} 1.0"),
            "{text}"
        );
        assert!(text.contains("capfleet_agent_processes "), "{text}");
        assert!(text.ends_with("# EOF\n"));
        for name in m.series_names() {
            assert!(name.starts_with("capfleet_"), "{name}");
        }
        assert!(m.series_names().iter().any(|n| n == "capfleet_turns_total"));
        assert!(
            m.series_names()
                .iter()
                .any(|n| n == "capfleet_turn_duration_seconds_bucket")
        );
    }
}
