//! An in-process OTLP/gRPC collector (`fake-opentelemetry-collector`) drained in the
//! background, the span tree it received, and the checks every capfleet trace must
//! pass ([`check_trace`], on [`Node`]s read back from any store); running capfleet
//! without the OTEL environment the test runner may carry.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) use fake_opentelemetry_collector::ExportedSpan;
use fake_opentelemetry_collector::FakeCollectorServer;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// [`super::capfleet`] without the OTEL environment the test runner may carry.
pub(crate) fn capfleet(dir: &Path) -> Command {
    let mut c = super::capfleet(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k == "TRACEPARENT" {
            c.env_remove(k);
        }
    }
    c
}

pub(crate) fn demo() -> PathBuf {
    super::repo_root().join("config/fleets/demo.toml")
}

/// Run `cmd` to the end off the async runtime; panics past `limit`.
pub(crate) async fn finish(mut cmd: Command, limit: Duration) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let child = cmd.spawn().expect("capfleet spawns");
        let pid = child.id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        match rx.recv_timeout(limit) {
            Ok(out) => out.expect("output"),
            Err(_) => {
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("capfleet did not finish within {limit:?}");
            }
        }
    })
    .await
    .expect("join")
}

/// A fleet whose only session crashes and is not restarted: a failed run.
pub(crate) fn failing_fleet(d: &Path) -> PathBuf {
    std::fs::write(
        d.join("crash.toml"),
        "[[turn]]\nsteps = [{ say = \"up\" }, { crash = 3 }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fleet.toml"),
        "[fleet]\nname = \"f\"\nstart = [\"a\"]\ntask = \"go\"\n\n\
         [[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"crash.toml\"\nrestart = \"temporary\"\n",
    )
    .unwrap();
    d.join("fleet.toml")
}

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

    /// The spans of kind `kind` (see [`kind`]).
    pub(crate) fn named(&self, kind: &str) -> Vec<&ExportedSpan> {
        self.spans
            .iter()
            .filter(|s| self::kind(s) == kind)
            .collect()
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
            .filter(|c| c.parent_span_id == s.span_id && kind(c) == name)
            .collect()
    }

    pub(crate) fn names(&self) -> Vec<(String, String)> {
        self.spans
            .iter()
            .map(|s| (s.name.clone(), s.parent_span_id.clone()))
            .collect()
    }
}

/// What a span is, whatever its name says for the reader (`invoke_agent worker-a`,
/// `worker-a`, `execute_tool Read`): `fleet.run`, `session`, `turn`, `tool_call`,
/// `permission`, else its name.
pub(crate) fn kind(s: &ExportedSpan) -> &str {
    let has = |k: &str| s.attributes.contains_key(k);
    if has("gen_ai.operation.name") {
        match attr(s, "gen_ai.operation.name").as_str() {
            "invoke_workflow" => return "fleet.run",
            "invoke_agent" => return "turn",
            "execute_tool" => return "tool_call",
            _ => {}
        }
    } else if has("cap.session.urn") {
        return "session";
    }
    if has("cap.permission.req_id") {
        return "permission";
    }
    &s.name
}

/// An attribute's value as text. The fake collector keeps the protobuf value's Debug
/// form (`Some(AnyValue { value: Some(StringValue("sim")) })`): the scalar is read out;
/// an array of strings becomes JSON (`["end_turn"]`).
pub(crate) fn attr(s: &ExportedSpan, key: &str) -> String {
    let raw = s
        .attributes
        .get(key)
        .unwrap_or_else(|| panic!("{} has no {key}: {:?}", s.name, s.attributes));
    if raw.contains("ArrayValue(") {
        let item = regex::Regex::new(r#"StringValue\(("(?:[^"\\]|\\.)*")\)"#).expect("regex");
        let items: Vec<String> = item
            .captures_iter(raw)
            .map(|c| serde_json::from_str::<String>(&c[1]).unwrap_or_default())
            .collect();
        return serde_json::to_string(&items).expect("json");
    }
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

/// One span as the trace checks see it, from whichever store it was read back.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Scalars as text; arrays as JSON (`["end_turn"]`).
    pub attributes: BTreeMap<String, String>,
    /// `ERROR`, `OK` or `UNSET`, and the status message.
    pub status: String,
    pub status_message: String,
}

impl Node {
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }

    fn ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }
}

impl Tree {
    /// The spans as [`Node`]s.
    pub(crate) fn nodes(&self) -> Vec<Node> {
        self.spans
            .iter()
            .map(|s| Node {
                name: s.name.clone(),
                span_id: s.span_id.clone(),
                parent_span_id: s.parent_span_id.clone(),
                start_ns: s.start_time_unix_nano,
                end_ns: s.end_time_unix_nano,
                attributes: s
                    .attributes
                    .keys()
                    .map(|k| (k.clone(), attr(s, k)))
                    .collect(),
                status: match s.status.as_ref().map(|st| st.code.as_str()) {
                    Some("STATUS_CODE_ERROR") => "ERROR",
                    Some("STATUS_CODE_OK") => "OK",
                    _ => "UNSET",
                }
                .to_owned(),
                status_message: s
                    .status
                    .as_ref()
                    .map(|st| st.message.clone())
                    .unwrap_or_default(),
            })
            .collect()
    }
}

/// How far a child may stick out of its parent: clocks are read at different moments.
const TOLERANCE_NS: u64 = 1_000_000;

/// What every trace of capfleet must be, whichever store it was read back from: one
/// root (its parent, if any, is outside the trace: a `TRACEPARENT`), no orphan, every
/// child inside its parent's interval (within 1 ms), each turn span as long as the
/// turn's own measured `cap.turn.duration_ms` (within 5 % or 2 ms), and every ERROR span
/// with an `error.type` and a message. Panics naming the offender.
pub(crate) fn check_trace(spans: &[Node]) {
    let by_id: HashMap<&str, &Node> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let roots: Vec<&Node> = spans
        .iter()
        .filter(|s| !by_id.contains_key(s.parent_span_id.as_str()))
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "one root, no orphan: {:?}",
        roots
            .iter()
            .map(|s| (&s.name, &s.parent_span_id))
            .collect::<Vec<_>>()
    );
    for s in spans {
        assert!(s.end_ns >= s.start_ns, "{} ends before it starts", s.name);
        if let Some(p) = by_id.get(s.parent_span_id.as_str()) {
            assert!(
                s.start_ns + TOLERANCE_NS >= p.start_ns && s.end_ns <= p.end_ns + TOLERANCE_NS,
                "{} ({}..{}, {:.3} ms) lies outside its parent {} ({}..{}, {:.3} ms)",
                s.name,
                s.start_ns,
                s.end_ns,
                s.ms(),
                p.name,
                p.start_ns,
                p.end_ns,
                p.ms()
            );
        }
        if s.attr("gen_ai.operation.name") == Some("invoke_agent")
            && let Some(d) = s.attr("cap.turn.duration_ms")
        {
            let d: f64 = d.parse().unwrap();
            // The turn's duration is whole milliseconds, and span and turn are stamped
            // at neighbouring points of the session's work: on two loaded cores a
            // scheduling gap of a few ms between them is no fault (seen: 1 ms vs 3.2).
            assert!(
                (s.ms() - d).abs() <= (d * 0.05).max(5.0),
                "{}: a {d} ms turn is a {:.3} ms span",
                s.name,
                s.ms()
            );
        }
        if s.status == "ERROR" {
            assert!(
                s.attr("error.type").is_some_and(|t| !t.is_empty()) && !s.status_message.is_empty(),
                "{} is ERROR without error.type and a message: {s:?}",
                s.name
            );
        }
    }
}
