//! An in-process OTLP/gRPC collector (`fake-opentelemetry-collector`) drained in the
//! background, and the span tree it received.

use std::collections::HashMap;
use std::time::{Duration, Instant};

pub(crate) use fake_opentelemetry_collector::ExportedSpan;
use fake_opentelemetry_collector::FakeCollectorServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running collector; [`Collector::spans`] ends it.
pub(crate) struct Collector {
    endpoint: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<ExportedSpan>>,
}

impl Collector {
    pub(crate) async fn start() -> Collector {
        let mut fake = FakeCollectorServer::start().await.expect("fake collector");
        let endpoint = fake.endpoint();
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut stopping = false;
            let mut quiet = Instant::now();
            loop {
                let got = fake.exported_spans(1, Duration::from_millis(100)).await;
                if !got.is_empty() {
                    all.extend(got);
                    quiet = Instant::now();
                }
                if !stopping {
                    stopping = stopped.try_recv().is_ok();
                } else if quiet.elapsed() > Duration::from_millis(700) {
                    break;
                }
            }
            fake.abort();
            all
        });
        Collector {
            endpoint,
            stop,
            task,
        }
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every span received, once nothing more arrives.
    pub(crate) async fn spans(self) -> Tree {
        let _ = self.stop.send(());
        Tree::new(self.task.await.expect("collector task"))
    }
}

/// Spans by id, with parent and attribute lookups.
pub(crate) struct Tree {
    pub spans: Vec<ExportedSpan>,
    by_id: HashMap<String, usize>,
}

impl Tree {
    pub(crate) fn new(spans: Vec<ExportedSpan>) -> Tree {
        let by_id = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.span_id.clone(), i))
            .collect();
        Tree { spans, by_id }
    }

    pub(crate) fn named(&self, name: &str) -> Vec<&ExportedSpan> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    pub(crate) fn one(&self, name: &str) -> &ExportedSpan {
        let found = self.named(name);
        assert_eq!(found.len(), 1, "one {name} span: {:#?}", self.names());
        found[0]
    }

    pub(crate) fn parent(&self, s: &ExportedSpan) -> Option<&ExportedSpan> {
        self.by_id.get(&s.parent_span_id).map(|i| &self.spans[*i])
    }

    pub(crate) fn children<'a>(
        &'a self,
        s: &'a ExportedSpan,
        name: &'a str,
    ) -> Vec<&'a ExportedSpan> {
        self.spans
            .iter()
            .filter(|c| c.parent_span_id == s.span_id && c.name == name)
            .collect()
    }

    pub(crate) fn names(&self) -> Vec<(String, String)> {
        self.spans
            .iter()
            .map(|s| (s.name.clone(), s.parent_span_id.clone()))
            .collect()
    }
}

/// An attribute's value as text. The fake collector keeps the protobuf value's Debug
/// form (`Some(AnyValue { value: Some(StringValue("sim")) })`): the scalar is read out.
pub(crate) fn attr(s: &ExportedSpan, key: &str) -> String {
    let raw = s
        .attributes
        .get(key)
        .unwrap_or_else(|| panic!("{} has no {key}: {:?}", s.name, s.attributes));
    let re = regex::Regex::new(r#"(StringValue|IntValue|DoubleValue|BoolValue)\((.*)\)\) \}\)$"#)
        .expect("regex");
    match re.captures(raw) {
        Some(c) if &c[1] == "StringValue" => {
            serde_json::from_str::<String>(&c[2]).unwrap_or_default()
        }
        Some(c) => c[2].to_owned(),
        None => raw.clone(),
    }
}

/// Spans received over OTLP/HTTP: (span name, the resource's service.name).
pub(crate) struct Received {
    rx: tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
}

impl Received {
    /// Everything received, once nothing more arrives for a while.
    pub(crate) async fn collect(mut self) -> Vec<(String, String)> {
        let mut all = Vec::new();
        while let Ok(Some(s)) =
            tokio::time::timeout(Duration::from_millis(700), self.rx.recv()).await
        {
            all.push(s);
        }
        all
    }
}

/// A minimal OTLP/HTTP (protobuf) receiver on 127.0.0.1: `POST /v1/traces` bodies are
/// decoded as `ExportTraceServiceRequest`s. Returns its base URL.
pub(crate) async fn http_receiver() -> (String, Received) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    // One request per connection read fully (headers + content-length body).
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Vec<u8> = buf.drain(..end + 4 + len).skip(end + 4).collect();
                    assert!(head.starts_with("post /v1/traces"), "{head}");
                    let req = ExportTraceServiceRequest::decode(body.as_slice()).expect("protobuf");
                    for rs in req.resource_spans {
                        let service = rs
                            .resource
                            .iter()
                            .flat_map(|r| r.attributes.iter())
                            .find(|kv| kv.key == "service.name")
                            .and_then(|kv| kv.value.as_ref())
                            .map(|v| format!("{:?}", v.value))
                            .unwrap_or_default();
                        let service = service
                            .trim_start_matches("Some(StringValue(\"")
                            .trim_end_matches("\"))")
                            .to_owned();
                        for ss in rs.scope_spans {
                            for span in ss.spans {
                                let _ = tx.send((span.name, service.clone()));
                            }
                        }
                    }
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if conn.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, Received { rx })
}
