//! The trace context that goes with the work, for every actor that opens spans: W3C
//! trace context across process boundaries — `TRACEPARENT` for the agents capfleet
//! spawns (their own spans join the session's trace), and a `TRACEPARENT` capfleet was
//! started with becomes the parent of its run (a CI job's trace contains the fleet) —
//! and counts as span attributes ([`int`]) — and how a span ends: [`end`] when its work
//! does, [`fail`] with an `error.type` and a message, [`strings`] for array attributes.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Array, StringValue, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// A count as a span attribute: OpenTelemetry integers are `i64` (a `u64` field would
/// be exported as a string).
pub fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// End `span` now. tracing-opentelemetry ends a span at its last exit (or when its last
/// handle is dropped), which is rarely when its work ends: a turn is entered only while
/// its prompt is sent. Ending the OpenTelemetry span here fixes its end time whatever
/// later enters or drops a handle. Record every attribute before: the span is exported.
pub fn end(span: &tracing::Span) {
    if !span.is_disabled() {
        span.context().span().end();
    }
}

/// Mark `span` failed: status ERROR with `message`, and `error.type` = `kind` (a short,
/// low-cardinality class, as the OpenTelemetry conventions ask).
pub fn fail(span: &tracing::Span, kind: &str, message: &str) {
    if span.is_disabled() {
        return;
    }
    span.set_attribute("error.type", kind.to_owned());
    span.set_status(Status::error(message.to_owned()));
}

/// A string-array attribute (`tracing` fields are scalars).
pub fn strings(span: &tracing::Span, key: &'static str, values: &[&str]) {
    if span.is_disabled() {
        return;
    }
    let values: Vec<StringValue> = values.iter().map(|v| (*v).to_owned().into()).collect();
    span.set_attribute(key, Value::Array(Array::String(values)));
}

/// The OpenTelemetry GenAI instrumentations' switch for recording content: `true`
/// records tool calls' arguments and results on their spans. Off by default, since
/// content may hold what must never reach a trace store (secrets in a command line).
pub(crate) const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
/// The longest content value recorded, in bytes; a longer one is cut (and says so).
pub(crate) const MAX_CONTENT: usize = 4096;

/// Whether [`CAPTURE_CONTENT`] is `true` in capfleet's environment (read once).
pub(crate) fn capture_content() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var(CAPTURE_CONTENT).is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
    })
}

/// Record `value` as JSON text under `key` when content is captured
/// ([`capture_content`]), cut to [`MAX_CONTENT`] bytes.
pub fn content(span: &tracing::Span, key: &'static str, value: &serde_json::Value) {
    if span.is_disabled() || !capture_content() {
        return;
    }
    span.set_attribute(key, cut_content(value.to_string()));
}

fn cut_content(mut text: String) -> String {
    if text.len() > MAX_CONTENT {
        let mut at = MAX_CONTENT;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str("…[cut]");
    }
    text
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

    /// A subscriber exporting every span to memory, as capfleet's pipeline does.
    fn recording() -> (
        InMemorySpanExporter,
        SdkTracerProvider,
        impl tracing::Subscriber + Send + Sync,
    ) {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "t");
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
        (exporter, provider, subscriber)
    }

    #[test]
    fn a_span_hands_on_its_traceparent_and_adopts_a_remote_one() {
        let (exporter, provider, subscriber) = recording();
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

    #[test]
    fn content_is_cut_at_a_character_boundary_and_says_so() {
        assert_eq!(cut_content("short".into()), "short");
        let long = "é".repeat(MAX_CONTENT); // two bytes each: the cut falls inside one
        let cut = cut_content(long);
        assert!(cut.ends_with("…[cut]"), "{}", &cut[cut.len() - 20..]);
        assert!(cut.len() <= MAX_CONTENT + "…[cut]".len());
    }

    #[test]
    fn a_span_ends_when_its_work_does_not_at_its_last_exit() {
        use std::time::Duration;

        let (exporter, _provider, subscriber) = recording();
        tracing::subscriber::with_default(subscriber, || {
            let turn = tracing::info_span!("turn");
            // Entered only while its prompt is sent, as a turn is.
            turn.in_scope(|| ());
            std::thread::sleep(Duration::from_millis(30));
            fail(&turn, "turn_failed", "the agent crashed");
            strings(&turn, "gen_ai.response.finish_reasons", &["error"]);
            end(&turn);
            // A late entry (a handle held elsewhere) does not move the end.
            std::thread::sleep(Duration::from_millis(30));
            turn.in_scope(|| ());
            end(&tracing::Span::none());
        });
        let spans = exporter.get_finished_spans().unwrap();
        let turn = spans.iter().find(|s| s.name == "turn").unwrap();
        let took = turn.end_time.duration_since(turn.start_time).unwrap();
        assert!(
            (Duration::from_millis(30)..Duration::from_millis(55)).contains(&took),
            "{took:?}"
        );
        assert_eq!(turn.status, Status::error("the agent crashed"));
        let attr = |k: &str| {
            turn.attributes
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.clone())
        };
        assert_eq!(attr("error.type"), Some(Value::from("turn_failed")));
        assert_eq!(
            attr("gen_ai.response.finish_reasons"),
            Some(Value::Array(Array::String(vec!["error".into()])))
        );
    }
}
