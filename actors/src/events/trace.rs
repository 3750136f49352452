//! The trace context that goes with the work, for every actor that opens spans: W3C
//! trace context across process boundaries — `TRACEPARENT` for the agents capfleet
//! spawns (their own spans join the session's trace), and a `TRACEPARENT` capfleet was
//! started with becomes the parent of its run (a CI job's trace contains the fleet) —
//! and counts as span attributes ([`int`]).

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A count as a span attribute: OpenTelemetry integers are `i64` (a `u64` field would
/// be exported as a string).
pub fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// The environment variable carrying a W3C `traceparent` to a child process.
pub const TRACEPARENT: &str = "TRACEPARENT";

/// `span`'s W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), when it is exported.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// Make `span` a child of the remote span `traceparent` names (ignored when malformed).
pub fn adopt_parent(span: &tracing::Span, traceparent: &str) {
    if span.is_disabled() {
        return;
    }
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.trim().to_owned())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid()
        && let Err(e) = span.set_parent(cx)
    {
        tracing::debug!("cannot adopt {TRACEPARENT}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn a_span_hands_on_its_traceparent_and_adopts_a_remote_one() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "t");
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
        let remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!("fleet.run");
            adopt_parent(&root, remote);
            let child = tracing::info_span!(parent: &root, "session");
            let tp = traceparent(&child).expect("exported span");
            let parts: Vec<&str> = tp.split('-').collect();
            assert_eq!(parts[0], "00");
            assert_eq!(parts[1], "0af7651916cd43dd8448eb211c80319c", "{tp}");
            assert_eq!(parts[2].len(), 16);
            assert_eq!(parts[3], "01");
            adopt_parent(&tracing::info_span!("other"), "garbage");
        });
        assert_eq!(traceparent(&tracing::Span::none()), None);
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let root = spans.iter().find(|s| s.name == "fleet.run").unwrap();
        assert_eq!(root.parent_span_id.to_string(), "b7ad6b7169203331");
    }
}
