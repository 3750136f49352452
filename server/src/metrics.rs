//! The server's own metrics, beside the runs' (one registry across all runs,
//! `capfleet_engine::telemetry::metrics`), in the same `/metrics` exposition:
//! requests by route and status, submissions by what became of them, runs running
//! and queued now, the A2A tasks of exposed agents and fleets by how they ended, the
//! connections open now and closed by why ([`super::conns`]), the MCP tool calls by
//! tool and result ([`super::mcp`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub method: String,
    /// The route's pattern (`/v1/runs/{id}`), never the path itself.
    pub route: String,
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SubmissionLabels {
    /// `admitted`, `queued`, `refused` (full), `invalid`, `no_sandbox`, `draining`.
    pub result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct A2aTaskLabels {
    /// The exposed agent's or fleet's name (a flag of the server, not a client's).
    pub name: String,
    /// The task's final state: `completed`, `canceled`, `failed`.
    pub state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClosedLabels {
    /// `done`, `header_timeout`, `idle`, `evicted` (for a newer one past the cap),
    /// `refused` (past the cap, every one busy), `shutdown`.
    pub reason: String,
}

pub(crate) struct ServerMetrics {
    pub registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub submissions: Family<SubmissionLabels, Counter>,
    pub a2a_tasks: Family<A2aTaskLabels, Counter>,
    pub running: Gauge,
    pub queued: Gauge,
    /// Connections open now.
    pub connections: Gauge,
    pub connections_closed: Family<ClosedLabels, Counter>,
    /// The webhooks' notices (`capfleet_server_notify_*`).
    pub notify: capfleet_app::notify::NotifyStats,
    /// The MCP tool calls at `/mcp` (`capfleet_server_mcp_tool_calls_total`).
    pub mcp: capfleet_mcp::McpMetrics,
}

impl ServerMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("capfleet_server");
        let requests = Family::<RequestLabels, Counter>::default();
        let submissions = Family::<SubmissionLabels, Counter>::default();
        let a2a_tasks = Family::<A2aTaskLabels, Counter>::default();
        let (running, queued) = (Gauge::default(), Gauge::default());
        registry.register(
            "a2a_tasks",
            "A2A tasks of exposed agents and fleets ended, by name and final state",
            a2a_tasks.clone(),
        );
        registry.register(
            "requests",
            "HTTP requests, by method, route and status",
            requests.clone(),
        );
        registry.register(
            "submissions",
            "Runs submitted, by what became of them",
            submissions.clone(),
        );
        registry.register("runs_running", "Runs running now", running.clone());
        registry.register(
            "runs_queued",
            "Runs waiting for admission now",
            queued.clone(),
        );
        let connections = Gauge::default();
        let connections_closed = Family::<ClosedLabels, Counter>::default();
        registry.register(
            "connections",
            "Client connections open now",
            connections.clone(),
        );
        registry.register(
            "connections_closed",
            "Client connections closed (or refused), by why",
            connections_closed.clone(),
        );
        let notify = capfleet_app::notify::NotifyStats::default();
        notify.register(&mut registry);
        let mcp = capfleet_mcp::McpMetrics::register(&mut registry);
        ServerMetrics {
            notify,
            mcp,
            registry,
            requests,
            submissions,
            a2a_tasks,
            running,
            queued,
            connections,
            connections_closed,
        }
    }

    pub(crate) fn connection_closed(&self, reason: &str) {
        self.connections_closed
            .get_or_create(&ClosedLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub(crate) fn submitted(&self, result: &str) {
        self.submissions
            .get_or_create(&SubmissionLabels {
                result: result.to_owned(),
            })
            .inc();
    }
}
