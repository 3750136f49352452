//! The span pipeline the binary sets up: `tracing` spans → `tracing-opentelemetry` →
//! the OpenTelemetry SDK → OTLP (HTTP/protobuf or gRPC) and/or the trace file, each
//! behind the engine's bounded, counted batch queue (`telemetry::counted`), with
//! OpenInference span kinds added when asked (`telemetry::openinference`). The engine
//! opens the spans and keeps those parts; the exporters and the subscriber are the
//! binary's.
//!
//! Only capfleet's own spans are exported (targets `capfleet`, `capfleet_engine` and `capfleet_wire`):
//! ractor wraps each actor's life in spans of its own, which would otherwise become
//! long-lived parents and split a turn over several traces. With nothing configured
//! there is no pipeline at all, and capfleet's spans stay disabled callsites.
//!
//! Build it inside the tokio runtime (the gRPC channel and the HTTP requests live
//! there) and [`TracePipeline::shutdown`] it before the runtime ends: that flushes
//! what is queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capfleet_engine::telemetry::TraceFile;
use capfleet_engine::telemetry::counted;
use capfleet_engine::telemetry::metrics::{ReasonLabels, SpanStats};
use capfleet_engine::telemetry::openinference::{self, Kinds};
use capfleet_engine::telemetry::{
    ENV_RESOURCE_ATTRIBUTES, ENV_SERVICE_NAME, OtlpTarget, Protocol, TelemetryError, TraceConfig,
    queue_size,
};
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{SpanExporter as OtlpExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
pub(crate) const SERVICE_NAME: &str = "capfleet";
/// How long the exit path waits for the last spans to be exported.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one OTLP/HTTP request may take, unless `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`
/// (milliseconds) says otherwise: the OTLP default.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running span pipeline.
#[derive(Debug)]
pub struct TracePipeline {
    provider: SdkTracerProvider,
    stats: SpanStats,
    /// Per destination, the spans admitted and not yet exported.
    pending: Vec<Arc<AtomicUsize>>,
    /// Where spans go, for the closing line.
    pub destinations: Vec<String>,
}

/// What the pipeline did, for the closing line of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanTotals {
    pub exported: u64,
    pub dropped: u64,
}

impl TracePipeline {
    /// The pipeline `cfg` and the environment (through `env`) ask for; `None` when they
    /// ask for nothing.
    pub fn start(
        cfg: &TraceConfig,
        env: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Option<TracePipeline>, TelemetryError> {
        let target = cfg.otlp_target(env)?;
        if target.is_none() && cfg.trace_file.is_none() {
            return Ok(None);
        }
        let queue = queue_size(env);
        let kinds = openinference::wanted(env);
        let stats = SpanStats::default();
        let mut destinations = Vec::new();
        let mut pending = Vec::new();
        let mut builder = SdkTracerProvider::builder().with_resource(resource(env));
        if let Some(t) = &target {
            let exporter = otlp_exporter(t, env)?;
            let processor = counted::batch(Kinds::new(exporter, kinds), queue, stats.clone());
            pending.push(processor.pending());
            builder = builder.with_span_processor(processor);
            destinations.push(format!("{} ({})", t.endpoint, t.protocol.as_str()));
        }
        if let Some(path) = &cfg.trace_file {
            let file = TraceFile::create(path)?;
            let processor = counted::batch(Kinds::new(file, kinds), queue, stats.clone());
            pending.push(processor.pending());
            builder = builder.with_span_processor(processor);
            destinations.push(path.display().to_string());
        }
        Ok(Some(TracePipeline {
            provider: builder.build(),
            stats,
            pending,
            destinations,
        }))
    }

    /// The `tracing` layer that feeds the pipeline with capfleet's spans.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("capfleet");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            // A span's status is its owner's to set, with an `error.type` and a message
            // (`events::trace::fail`); an error event inside it stays an event.
            .with_error_events_to_status(false)
            .with_filter(
                Targets::new()
                    .with_target("capfleet", Level::INFO)
                    .with_target("capfleet_engine", Level::INFO)
                    .with_target("capfleet_wire", Level::INFO),
            )
    }

    /// The pipeline's counters (exported, dropped), to show in the run's metrics.
    pub fn stats(&self) -> SpanStats {
        self.stats.clone()
    }

    pub fn totals(&self) -> SpanTotals {
        let dropped = ["queue_full", "export_failed", "unsent_at_exit"]
            .iter()
            .map(|r| {
                self.stats
                    .dropped
                    .get_or_create(&ReasonLabels {
                        reason: (*r).into(),
                    })
                    .get()
            })
            .sum();
        SpanTotals {
            exported: self.stats.exported.get(),
            dropped,
        }
    }

    /// Export what is queued now (the panic path: the process may not get further).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::debug!("flushing spans: {e}");
        }
    }

    /// Export what is queued, then stop. Blocks up to [`SHUTDOWN_TIMEOUT`] per
    /// destination: call it off the runtime's workers (`spawn_blocking`). What a hung
    /// endpoint still holds then is counted lost (`unsent_at_exit`).
    pub fn shutdown(&self) -> SpanTotals {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::debug!("span pipeline shutdown: {e}");
        }
        let unsent: usize = self.pending.iter().map(|p| p.load(Ordering::Acquire)).sum();
        if unsent > 0 {
            self.stats
                .dropped
                .get_or_create(&ReasonLabels {
                    reason: "unsent_at_exit".into(),
                })
                .inc_by(unsent as u64);
        }
        self.totals()
    }
}

fn otlp_exporter(
    t: &OtlpTarget,
    env: impl Fn(&str) -> Option<String>,
) -> Result<OtlpExporter, TelemetryError> {
    let failed = |e: &dyn std::fmt::Display| TelemetryError::Exporter(e.to_string());
    let built = match t.protocol {
        Protocol::Grpc => OtlpExporter::builder()
            .with_tonic()
            .with_endpoint(t.endpoint.clone())
            .build(),
        Protocol::HttpProtobuf => {
            // reqwest is built on rustls without a provider: install the process's.
            capfleet_wire::driver::crypto_provider();
            let client = reqwest::Client::builder()
                .timeout(http_timeout(env))
                .build()
                .map_err(|e| failed(&e))?;
            let on_runtime = OnRuntime {
                client,
                runtime: tokio::runtime::Handle::try_current().map_err(|e| failed(&e))?,
            };
            OtlpExporter::builder()
                .with_http()
                .with_http_client(on_runtime)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(t.endpoint.clone())
                .build()
        }
    };
    built.map_err(|e| failed(&e))
}

/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, then `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds),
/// else the OTLP default.
fn http_timeout(env: impl Fn(&str) -> Option<String>) -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|k| env(k)?.trim().parse().ok())
    .map_or(HTTP_TIMEOUT, Duration::from_millis)
}

/// The OTLP/HTTP client: the async reqwest client the binary already has, each request
/// run on the command's tokio runtime (the SDK's batch thread, which awaits it, has no
/// reactor of its own).
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, telemetry.sdk.*),
/// named `capfleet` unless the environment names the service.
fn resource(env: impl Fn(&str) -> Option<String>) -> Resource {
    let named = env(ENV_SERVICE_NAME).is_some_and(|v| !v.trim().is_empty())
        || env(ENV_RESOURCE_ATTRIBUTES).is_some_and(|v| {
            v.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    let mut b = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !named {
        b = b.with_service_name(SERVICE_NAME);
    }
    b.build()
}
