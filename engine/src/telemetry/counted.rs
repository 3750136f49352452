//! The SDK's batch span processor with a count of what is lost.
//!
//! The batch processor never blocks the thread that ends a span: past its bounded
//! queue it drops the span, and only logs the first drop. In front of it sits a gate
//! that admits a span only while fewer than the queue size are in flight (queued,
//! batched or being exported), so the SDK's own queue never overflows and every drop
//! is ours to count (`queue_full`); spans whose export fails count as `export_failed`.
//! A slow or dead endpoint therefore costs the fleet at most one bounded queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor,
};

use super::metrics::{ReasonLabels, SpanStats};

/// A batch processor over `exporter` holding at most `queue` spans, counting into `stats`.
pub fn batch<E: SpanExporter + 'static>(
    exporter: E,
    queue: usize,
    stats: SpanStats,
) -> CountedProcessor {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let exporter = CountedExporter {
        inner: exporter,
        in_flight: in_flight.clone(),
        stats: stats.clone(),
    };
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(queue)
        .build();
    CountedProcessor {
        inner: BatchSpanProcessor::new(exporter, config),
        in_flight,
        queue,
        stats,
    }
}

impl CountedProcessor {
    /// Spans admitted and neither exported nor failed yet: what an exit now would lose.
    pub fn pending(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }
}

/// The gate in front of the batch processor.
#[derive(Debug)]
pub struct CountedProcessor {
    inner: BatchSpanProcessor,
    in_flight: Arc<AtomicUsize>,
    queue: usize,
    stats: SpanStats,
}

fn drop_label(reason: &str) -> ReasonLabels {
    ReasonLabels {
        reason: reason.into(),
    }
}

impl SpanProcessor for CountedProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= self.queue {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.stats
                .dropped
                .get_or_create(&drop_label("queue_full"))
                .inc();
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts what the batch processor hands over, and what the export loses.
#[derive(Debug)]
struct CountedExporter<E> {
    inner: E,
    in_flight: Arc<AtomicUsize>,
    stats: SpanStats,
}

impl<E: SpanExporter> SpanExporter for CountedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.in_flight.fetch_sub(n, Ordering::AcqRel);
        let n = n as u64;
        match &result {
            Ok(()) => {
                self.stats.exported.inc_by(n);
            }
            Err(e) => {
                tracing::debug!("span export failed: {e}");
                self.stats
                    .dropped
                    .get_or_create(&drop_label("export_failed"))
                    .inc_by(n);
            }
        }
        result
    }

    pass_to_inner!();
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::*;

    /// An exporter that blocks until released: a hung endpoint.
    #[derive(Debug)]
    struct Stuck(Arc<Mutex<()>>);

    impl SpanExporter for Stuck {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            drop(self.0.lock());
            Ok(())
        }
    }

    #[test]
    fn a_stuck_exporter_costs_one_queue_and_every_drop_is_counted() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let stats = SpanStats::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch(Stuck(gate.clone()), 8, stats.clone()))
            .build();
        let tracer = provider.tracer("t");
        let started = std::time::Instant::now();
        for _ in 0..1000 {
            tracer.in_span("s", |_| {});
        }
        assert!(started.elapsed() < Duration::from_secs(2), "never blocked");
        let dropped = stats.dropped.get_or_create(&drop_label("queue_full")).get();
        assert!(dropped >= 1000 - 8, "dropped {dropped}");
        drop(held);
        provider.force_flush().unwrap();
        let exported = stats.exported.get();
        assert_eq!(
            exported + dropped,
            1000,
            "every span is exported or counted"
        );
        let _ = provider.shutdown();
    }
}
