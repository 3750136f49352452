//! Observability: what the fleet does, counted and traced.
//!
//! - [`counters`]: the run's own counters (events by kind, sessions by state, turns,
//!   restarts), a tap every run has, for its report;
//! - [`metrics`] and [`feed`]: the Prometheus metrics of a run (`--metrics-addr`), fed
//!   by a tap from every published event;
//! - [`config`], [`counted`], [`trace_file`], [`openinference`]: the parts of the span
//!   pipeline to OTLP and/or a JSON-lines file (where spans go by the flags and the
//!   standard `OTEL_*` variables, the counted batch queue, the trace file, OpenInference
//!   span kinds as an option); the binary assembles them, with the OTLP exporter and
//!   the `tracing` subscriber (`app/src/telemetry/pipeline.rs`).
//!
//! The W3C `traceparent` in and out of the process, and `int` for span attributes,
//! are in [`capfleet_wire::events::trace`]: the session opens spans too, below this floor.
//!
//! The spans themselves are opened where the work happens: the run's
//! (`invoke_workflow <fleet>`) in [`crate::run`], the session's (named after it),
//! `invoke_agent <session>` turns, `execute_tool <tool>`, `permission <tool>`, `ask`,
//! `restart` in [`crate::session`], `decide` in [`crate::answerer`], `route` in
//! [`crate::router`], `budget` in [`crate::run`]. Each is created with an explicit
//! parent carried in the actors' arguments and messages, so one turn is one tree across
//! the actors it touches, and ended when its work ends ([`capfleet_wire::events::trace::end`]).

/// The [`SpanExporter`](opentelemetry_sdk::trace::SpanExporter) methods an exporter
/// that wraps another (its field `inner`) passes on as they are: shutdown, flush and
/// the resource. Only `export` is the wrapper's own.
macro_rules! pass_to_inner {
    () => {
        fn shutdown_with_timeout(
            &self,
            timeout: std::time::Duration,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.inner.shutdown_with_timeout(timeout)
        }

        fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
            self.inner.force_flush()
        }

        fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
            self.inner.set_resource(resource);
        }
    };
}

pub(crate) mod config;
pub mod counted;
pub(crate) mod counters;
pub(crate) mod feed;
pub mod metrics;
pub mod openinference;
pub(crate) mod trace_file;

pub use config::{
    ENV_RESOURCE_ATTRIBUTES, ENV_SERVICE_NAME, OtlpTarget, Protocol, TelemetryError, TraceConfig,
    queue_size,
};
pub use feed::MetricsTapMsg;
pub use trace_file::TraceFile;

pub use counters::TelemetryMsg;
pub(crate) use counters::{Counters, Telemetry};

/// What a supervision tree reports to: the span its sessions' spans hang under (the
/// run's), and the run's metrics when they are served.
#[derive(Debug, Clone)]
pub struct TreeTelemetry {
    pub span: tracing::Span,
    pub metrics: Option<metrics::Metrics>,
}

impl Default for TreeTelemetry {
    fn default() -> Self {
        TreeTelemetry {
            span: tracing::Span::none(),
            metrics: None,
        }
    }
}
