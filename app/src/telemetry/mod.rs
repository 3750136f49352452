//! Telemetry of a `run` or `chat`: the span pipeline (OTLP and/or `--trace-file`) set
//! up with the diagnostics subscriber, flushed on every way out. (The Prometheus
//! endpoint, `--metrics-addr`, is an HTTP server: `capfleet_server::metrics_http`.)
//!
//! The pipeline is built inside the command's tokio runtime (the gRPC channel lives
//! there) and finished before the runtime ends: [`Telemetry::finish`] on the normal
//! paths (completed, failed, budget exit, Ctrl-C, a signal), the guard's `Drop` when
//! the command unwinds, and a panic hook for a panic outside the runtime's workers
//! (a panicking actor is caught by ractor and the run ends on a normal path).

pub mod pipeline;

use std::path::PathBuf;
use std::sync::Arc;

use capfleet_engine::telemetry::metrics::SpanStats;
use capfleet_engine::telemetry::{TelemetryError, TraceConfig};
use capfleet_wire::events::trace::TRACEPARENT;

use self::pipeline::TracePipeline;
use crate::style::ColorChoice;

/// The flags shared by `run` and `chat`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TelemetryArgs {
    /// Export spans over OTLP to this URL (e.g. http://127.0.0.1:4318 for HTTP/protobuf;
    /// with OTEL_EXPORTER_OTLP_PROTOCOL=grpc, http://127.0.0.1:4317). Overrides
    /// OTEL_EXPORTER_OTLP_ENDPOINT.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Also write every finished span to this file, one JSON object per line.
    #[arg(long, value_name = "PATH")]
    pub trace_file: Option<PathBuf>,
}

/// The running telemetry of one command; finish it before the runtime ends.
pub struct Telemetry {
    pipeline: Option<Arc<TracePipeline>>,
}

fn env_var(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

impl Telemetry {
    /// Set up the span pipeline (if anything asks for one) and the diagnostics
    /// subscriber. Call inside the runtime, once.
    pub fn start(color: ColorChoice, args: &TelemetryArgs) -> Result<Telemetry, TelemetryError> {
        let cfg = TraceConfig {
            otlp: args.otlp.clone(),
            trace_file: args.trace_file.clone(),
        };
        let pipeline = TracePipeline::start(&cfg, env_var)?.map(Arc::new);
        crate::logging::init_with(color, pipeline.as_ref().map(|p| p.layer()));
        if let Some(p) = &pipeline {
            tracing::info!(to = ?p.destinations, "exporting spans");
            install_panic_flush(p.clone());
        }
        Ok(Telemetry { pipeline })
    }

    /// The span pipeline's counters, for the run's metrics.
    pub fn span_stats(&self) -> Option<SpanStats> {
        self.pipeline.as_ref().map(|p| p.stats())
    }

    /// The trace the run continues: the `TRACEPARENT` capfleet was started with, when
    /// spans are exported.
    pub fn traceparent(&self) -> Option<String> {
        self.pipeline.as_ref()?;
        env_var(TRACEPARENT).filter(|v| !v.trim().is_empty())
    }

    /// Export what is left and stop; says so on stderr when spans were lost.
    pub async fn finish(mut self) {
        let Some(p) = self.pipeline.take() else {
            return;
        };
        let totals = match tokio::task::spawn_blocking(move || p.shutdown()).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("capfleet: flushing spans failed: {e}");
                return;
            }
        };
        if totals.dropped > 0 {
            eprintln!(
                "capfleet: {} spans exported, {} dropped (the trace endpoint was slow or unreachable)",
                totals.exported, totals.dropped
            );
        }
    }
}

impl Drop for Telemetry {
    /// The path that skipped [`Telemetry::finish`] (an early return, unwinding).
    fn drop(&mut self) {
        if let Some(p) = self.pipeline.take() {
            p.shutdown();
        }
    }
}

/// On a panic outside the runtime's workers (the command itself), export what has
/// ended before the process goes; then the usual report.
fn install_panic_flush(pipeline: Arc<TracePipeline>) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if tokio::runtime::Handle::try_current().is_err() {
            pipeline.flush();
        }
        previous(info);
    }));
}
