//! OpenInference span kinds, as an option (`CAPFLEET_OTEL_OPENINFERENCE=true`): stores
//! built on OpenInference (Arize Phoenix) classify a span by `openinference.span.kind`
//! and show every other span as "unknown". With the option on, each exported span gets
//! one, read off what the span already says: `invoke_agent` turns and the sessions
//! (the agents) are `AGENT`, `execute_tool` calls `TOOL`, everything else (the run,
//! routes, permissions, restarts, ...) `CHAIN`. The GenAI attributes stay as they are.

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// The environment variable turning the kinds on (`true` or `1`).
pub(crate) const ENV_OPENINFERENCE: &str = "CAPFLEET_OTEL_OPENINFERENCE";
/// The attribute OpenInference reads.
pub(crate) const SPAN_KIND: &str = "openinference.span.kind";

/// Whether the environment (through `env`) asks for the kinds.
pub fn wanted(env: impl Fn(&str) -> Option<String>) -> bool {
    env(ENV_OPENINFERENCE).is_some_and(|v| matches!(v.trim(), "true" | "1"))
}

/// An exporter that adds the kinds to each span it passes on (when `on`).
#[derive(Debug)]
pub struct Kinds<E> {
    inner: E,
    on: bool,
}

impl<E> Kinds<E> {
    pub fn new(inner: E, on: bool) -> Self {
        Kinds { inner, on }
    }
}

/// The OpenInference kind of `span`.
pub(crate) fn kind(span: &SpanData) -> &'static str {
    let attr = |key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    };
    match attr("gen_ai.operation.name") {
        Some(Value::String(op)) if op.as_str() == "invoke_agent" => "AGENT",
        Some(Value::String(op)) if op.as_str() == "execute_tool" => "TOOL",
        Some(_) => "CHAIN",
        // A session span names its agent and performs no operation of its own.
        None if attr("gen_ai.agent.id").is_some() => "AGENT",
        None => "CHAIN",
    }
}

impl<E: SpanExporter> SpanExporter for Kinds<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        if self.on {
            for span in &mut batch {
                let k = kind(span);
                span.attributes.push(KeyValue::new(SPAN_KIND, k));
            }
        }
        self.inner.export(batch).await
    }

    pass_to_inner!();
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{Span as _, Tracer, TracerProvider};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SimpleSpanProcessor};

    use super::*;

    #[test]
    fn each_span_gets_the_kind_its_attributes_say_only_when_asked() {
        for on in [true, false] {
            let memory = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_span_processor(SimpleSpanProcessor::new(Kinds::new(memory.clone(), on)))
                .build();
            let tracer = provider.tracer("t");
            let spans = [
                ("invoke_workflow demo", Some("invoke_workflow"), false),
                ("planner", None, true),
                ("invoke_agent planner", Some("invoke_agent"), true),
                ("execute_tool Read", Some("execute_tool"), false),
                ("restart", None, false),
            ];
            for (name, op, agent) in spans {
                let mut s = tracer.start(name);
                if let Some(op) = op {
                    s.set_attribute(KeyValue::new("gen_ai.operation.name", op));
                }
                if agent {
                    s.set_attribute(KeyValue::new("gen_ai.agent.id", "cap://x"));
                }
                s.end();
            }
            let got: Vec<(String, Option<String>)> = memory
                .get_finished_spans()
                .unwrap()
                .iter()
                .map(|s| {
                    let k = s
                        .attributes
                        .iter()
                        .find(|kv| kv.key.as_str() == SPAN_KIND)
                        .map(|kv| kv.value.to_string());
                    (s.name.to_string(), k)
                })
                .collect();
            let want = ["CHAIN", "AGENT", "AGENT", "TOOL", "CHAIN"];
            for ((name, k), w) in got.iter().zip(want) {
                assert_eq!(k.as_deref(), on.then_some(w), "{name}");
            }
        }
        assert!(wanted(|_| Some("true".into())));
        assert!(!wanted(|_| Some("no".into())));
        assert!(!wanted(|_| None));
    }
}
