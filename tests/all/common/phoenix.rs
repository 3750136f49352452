//! A real trace store: Arize Phoenix (the pinned `phoenix` peer), started on loopback
//! with free ports and a working directory of its own, and read back through its REST
//! API (`GET /v1/projects/<project>/spans/otlpv1`: the spans as OTLP JSON).
//! Its OTLP/HTTP endpoint is `http://127.0.0.1:<http port>` (`/v1/traces`), its gRPC one
//! `http://127.0.0.1:<grpc port>` (Phoenix binds that one on every interface; the
//! tests only ever send to 127.0.0.1).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::otel::Node;
use super::{http, peers};

/// How long Phoenix may take to come up (it runs its migrations first; ~40 s on a
/// loaded 2-core machine).
const STARTUP: Duration = Duration::from_secs(150);

/// A running Phoenix; killed (its process group) on drop.
pub(crate) struct Phoenix {
    child: Child,
    pub http_port: u16,
    pub grpc_port: u16,
    dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Phoenix {
    pub(crate) fn start() -> Phoenix {
        let exe = peers::peer("phoenix");
        let dir = tempfile::tempdir().unwrap();
        let (http_port, grpc_port) = (free_port(), free_port());
        let log = File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(exe)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", http_port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env_remove("PHOENIX_SQL_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("phoenix serve starts");
        let mut p = Phoenix {
            child,
            http_port,
            grpc_port,
            dir,
        };
        let started = Instant::now();
        loop {
            if matches!(http(http_port, "GET", "/healthz", None), Ok((200, _))) {
                break;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("phoenix exited ({status}):\n{}", p.log());
            }
            assert!(
                started.elapsed() < STARTUP,
                "phoenix not up after {STARTUP:?}:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        p
    }

    pub(crate) fn otlp_http(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub(crate) fn otlp_grpc(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("phoenix.log")).unwrap_or_default()
    }

    /// The spans of `project` once `count` of them are stored (Phoenix ingests in the
    /// background), as [`Node`]s.
    pub(crate) fn spans(&self, project: &str, count: usize) -> Vec<Node> {
        let path = format!("/v1/projects/{project}/spans/otlpv1?limit=1000");
        let started = Instant::now();
        loop {
            let got = match http(self.http_port, "GET", &path, None) {
                Ok((200, body)) => {
                    let v: Value = serde_json::from_str(&body).expect("JSON");
                    assert!(v["next_cursor"].is_null(), "one page holds the run");
                    v["data"].as_array().cloned().unwrap_or_default()
                }
                _ => Vec::new(),
            };
            if got.len() >= count {
                return got.iter().map(node).collect();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "phoenix holds {} of {count} spans of {project}:\n{}",
                got.len(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        // SAFETY: plain syscall; the child leads its own group (process_group(0)).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// An OTLP JSON attribute value as text (arrays as JSON).
fn value_text(v: &Value) -> String {
    if let Some(items) = v["array_value"]["values"].as_array() {
        let items: Vec<String> = items.iter().map(value_text).collect();
        return serde_json::to_string(&items).unwrap();
    }
    for k in ["string_value", "int_value", "double_value", "bool_value"] {
        match &v[k] {
            Value::Null => {}
            Value::String(s) => return s.clone(),
            other => return other.to_string(),
        }
    }
    String::new()
}

fn node(s: &Value) -> Node {
    let attributes: BTreeMap<String, String> = s["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            (
                kv["key"].as_str().unwrap().to_owned(),
                value_text(&kv["value"]),
            )
        })
        .collect();
    Node {
        name: s["name"].as_str().unwrap().to_owned(),
        span_id: s["span_id"].as_str().unwrap().to_owned(),
        parent_span_id: s["parent_span_id"].as_str().unwrap_or("").to_owned(),
        start_ns: s["start_time_unix_nano"].as_u64().unwrap(),
        end_ns: s["end_time_unix_nano"].as_u64().unwrap(),
        attributes,
        status: match s["status"]["code"].as_u64() {
            Some(2) => "ERROR",
            Some(1) => "OK",
            _ => "UNSET",
        }
        .to_owned(),
        status_message: s["status"]["message"].as_str().unwrap_or("").to_owned(),
    }
}
