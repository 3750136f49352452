//! `--trace-file <path>`: every finished span as one JSON line, for offline use
//! (`jq`, a test, a later import). The file is written by the batch processor's own
//! thread and flushed after every batch, so a crashed run keeps what was exported.
//!
//! ```json
//! {"name":"turn","trace_id":"…32 hex…","span_id":"…16 hex…","parent_span_id":"…"|null,
//!  "kind":"internal","start_unix_nano":…,"end_unix_nano":…,"duration_ms":12.5,
//!  "status":{"code":"unset"|"ok"|"error","message":"…"},"attributes":{"cap.turn":1,…},
//!  "events":[{"name":"…","time_unix_nano":…,"attributes":{…}}],"links":[{"trace_id":…,"span_id":…}]}
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, KeyValue, Value as OtelValue};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::{Map, Value, json};

use super::config::TelemetryError;
use capfleet_wire::sync::lock;

/// Writes spans as JSON lines.
#[derive(Debug)]
pub struct TraceFile {
    out: Mutex<BufWriter<File>>,
}

impl TraceFile {
    /// Create (or truncate) the file.
    pub fn create(path: &Path) -> Result<Self, TelemetryError> {
        let fail = |e: std::io::Error| TelemetryError::TraceFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let file = File::create(path).map_err(fail)?;
        Ok(TraceFile {
            out: Mutex::new(BufWriter::new(file)),
        })
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// An attribute's value as OTLP carries it: scalars as JSON scalars, arrays as JSON
/// arrays (`gen_ai.response.finish_reasons` is `["end_turn"]`, not a string of it).
fn value(v: &OtelValue) -> Value {
    match v {
        OtelValue::Bool(b) => Value::Bool(*b),
        OtelValue::I64(i) => Value::from(*i),
        OtelValue::F64(f) => float(*f),
        OtelValue::String(s) => Value::String(s.as_str().to_owned()),
        OtelValue::Array(a) => array(a),
        other => Value::String(other.to_string()),
    }
}

fn array(a: &Array) -> Value {
    match a {
        Array::Bool(v) => v.iter().copied().map(Value::Bool).collect(),
        Array::I64(v) => v.iter().copied().map(Value::from).collect(),
        Array::F64(v) => v.iter().copied().map(float).collect(),
        Array::String(v) => v.iter().map(|s| Value::from(s.as_str())).collect(),
        other => Value::String(other.to_string()),
    }
}

fn attributes<'a>(kvs: impl IntoIterator<Item = &'a KeyValue>) -> Value {
    let map: Map<String, Value> = kvs
        .into_iter()
        .map(|kv| (kv.key.as_str().to_owned(), value(&kv.value)))
        .collect();
    Value::Object(map)
}

fn kind(k: &SpanKind) -> &'static str {
    match k {
        SpanKind::Client => "client",
        SpanKind::Server => "server",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    }
}

/// One span as its JSON line.
pub(crate) fn span_json(span: &SpanData) -> Value {
    let (code, message) = match &span.status {
        Status::Unset => ("unset", String::new()),
        Status::Ok => ("ok", String::new()),
        Status::Error { description } => ("error", description.to_string()),
    };
    let parent = (span.parent_span_id != SpanId::INVALID).then(|| span.parent_span_id.to_string());
    let (start, end) = (nanos(span.start_time), nanos(span.end_time));
    let events: Vec<Value> = span
        .events
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "time_unix_nano": nanos(e.timestamp),
                "attributes": attributes(&e.attributes),
            })
        })
        .collect();
    let links: Vec<Value> = span
        .links
        .iter()
        .map(|l| {
            json!({
                "trace_id": l.span_context.trace_id().to_string(),
                "span_id": l.span_context.span_id().to_string(),
            })
        })
        .collect();
    json!({
        "name": span.name,
        "trace_id": span.span_context.trace_id().to_string(),
        "span_id": span.span_context.span_id().to_string(),
        "parent_span_id": parent,
        "kind": kind(&span.span_kind),
        "start_unix_nano": start,
        "end_unix_nano": end,
        "duration_ms": end.saturating_sub(start) as f64 / 1e6,
        "status": { "code": code, "message": message },
        "attributes": attributes(&span.attributes),
        "events": events,
        "links": links,
    })
}

impl SpanExporter for TraceFile {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut out = lock(&self.out);
        let written: std::io::Result<()> = batch.iter().try_for_each(|span| {
            serde_json::to_writer(&mut *out, &span_json(span))?;
            out.write_all(b"\n")
        });
        written
            .and_then(|()| out.flush())
            .map_err(|e| OTelSdkError::InternalFailure(format!("trace file: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{Span as _, TraceContextExt, Tracer, TracerProvider};
    use opentelemetry_sdk::trace::{SdkTracerProvider, SimpleSpanProcessor};

    use super::*;

    #[test]
    fn spans_are_json_lines_with_parents_status_and_attributes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/spans.jsonl");
        let file = TraceFile::create(&path).unwrap();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(SimpleSpanProcessor::new(file))
            .build();
        let tracer = provider.tracer("t");
        tracer.in_span("parent", |cx| {
            let mut child = tracer.start_with_context("child", &cx);
            child.set_attribute(KeyValue::new("cap.turn", 2));
            child.set_attribute(KeyValue::new("gen_ai.agent.name", "sim"));
            let arrays = [
                (
                    "gen_ai.response.finish_reasons",
                    Array::String(vec!["end_turn".into()]),
                ),
                ("n", Array::I64(vec![1, 2])),
                ("f", Array::F64(vec![0.5])),
                ("b", Array::Bool(vec![true, false])),
            ];
            for (k, a) in arrays {
                child.set_attribute(KeyValue::new(k, OtelValue::Array(a)));
            }
            child.set_status(Status::error("boom"));
            child.end();
            assert!(cx.span().span_context().is_valid());
        });
        provider.shutdown().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let (child, parent) = (&lines[0], &lines[1]);
        assert_eq!(child["name"], "child");
        assert_eq!(child["parent_span_id"], parent["span_id"]);
        assert_eq!(child["trace_id"], parent["trace_id"]);
        assert_eq!(parent["parent_span_id"], Value::Null);
        assert_eq!(child["attributes"]["cap.turn"], 2);
        assert_eq!(child["attributes"]["gen_ai.agent.name"], "sim");
        let attrs = &child["attributes"];
        assert_eq!(attrs["gen_ai.response.finish_reasons"], json!(["end_turn"]));
        assert_eq!(attrs["n"], json!([1, 2]));
        assert_eq!(attrs["f"], json!([0.5]));
        assert_eq!(attrs["b"], json!([true, false]));
        assert_eq!(child["status"]["code"], "error");
        assert_eq!(child["status"]["message"], "boom");
        assert_eq!(child["trace_id"].as_str().unwrap().len(), 32);
        assert!(child["end_unix_nano"].as_u64() >= child["start_unix_nano"].as_u64());
    }

    #[test]
    fn an_unwritable_path_is_a_clear_error() {
        let e = TraceFile::create(Path::new("/proc/nope/spans.jsonl")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot write the trace file /proc/nope/spans.jsonl"),
            "{e}"
        );
    }
}
