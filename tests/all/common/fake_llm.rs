//! `FakeLlm`: `tests/support/fake_llm.py` in its own process group, killed on Drop.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const START_TIMEOUT: Duration = Duration::from_secs(10);
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running fake LLM on 127.0.0.1. Its temp dir holds `port`, `stdout`,
/// `stderr` and `requests.jsonl` (the server's request log).
pub(crate) struct FakeLlm {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl FakeLlm {
    /// Spawns the server (`--port 0`) and waits, at most 10 s, for its port file.
    /// Panics naming the problem: python3 missing, the server exiting, or the
    /// port file never appearing (with the server's stderr).
    pub(crate) fn start() -> FakeLlm {
        let dir = tempfile::Builder::new()
            .prefix("capfleet-fake-llm.")
            .tempdir()
            .expect("fake_llm: create temp dir");
        let port_file = dir.path().join("port");
        let script = super::support("fake_llm.py");
        let out = fs::File::create(dir.path().join("stdout")).expect("fake_llm: stdout file");
        let err = fs::File::create(dir.path().join("stderr")).expect("fake_llm: stderr file");
        let mut child = match Command::new("python3")
            .arg(&script)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(dir.path().join("requests.jsonl"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
        {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "fake_llm: python3 not found on PATH ({e}); install Python >= 3.10 \
                 (./tests/run.sh checks for it)"
            ),
            Err(e) => panic!("fake_llm: cannot spawn python3 {}: {e}", script.display()),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            if let Some(p) = fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse::<u16>().ok())
            {
                break p;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "fake_llm: {} exited ({status}) before writing its port file; stderr:\n{}",
                    script.display(),
                    read_lossy(&dir.path().join("stderr"))
                );
            }
            if Instant::now() >= deadline {
                kill_and_reap(&mut child);
                panic!(
                    "fake_llm: port file {} never appeared within {START_TIMEOUT:?}; stderr:\n{}",
                    port_file.display(),
                    read_lossy(&dir.path().join("stderr"))
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeLlm { child, port, dir }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's pid (= its process group id).
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.path().join("requests.jsonl")
    }

    /// The server's stderr so far (for failure messages).
    pub(crate) fn stderr(&self) -> String {
        read_lossy(&self.dir.path().join("stderr"))
    }

    /// Appends a turn or a list of turns to the queue (`POST /_script`).
    pub(crate) fn script(&self, turns: Value) {
        self.control("POST", "/_script", Some(&turns));
    }

    /// Empties the queue and the in-memory request log (`POST /_reset`).
    pub(crate) fn reset(&self) {
        self.control("POST", "/_reset", Some(&Value::Null));
    }

    /// Every logged request so far, oldest first (`GET /_requests`).
    pub(crate) fn requests(&self) -> Vec<Value> {
        match self.control("GET", "/_requests", None) {
            Value::Array(v) => v,
            other => panic!("fake_llm: GET /_requests: expected a list, got {other}"),
        }
    }

    /// The logged requests whose `path` equals `path` (e.g. `/v1/messages`).
    pub(crate) fn requests_to(&self, path: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["path"] == path)
            .collect()
    }

    fn control(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, text) = http(self.port, method, path, body).unwrap_or_else(|e| {
            panic!("fake_llm: {method} {path}: {e}; stderr:\n{}", self.stderr())
        });
        if status != 200 {
            panic!("fake_llm: {method} {path}: HTTP {status}: {text}");
        }
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("fake_llm: {method} {path}: bad JSON ({e}): {text}"))
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// SIGKILL the child's whole process group, then reap the child.
fn kill_and_reap(child: &mut Child) {
    // SAFETY: plain syscall; the child leads its own group (process_group(0)).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("<cannot read {}: {e}>", p.display()))
}

/// A minimal blocking HTTP/1.1 request to 127.0.0.1:`port` (`Connection: close`,
/// JSON body). Returns (status, body). Handles Content-Length and chunked bodies.
pub(crate) fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, String), String> {
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let headers = [("Content-Type", "application/json")];
    http_with(port, method, path, &headers, payload.as_bytes()).map(|r| (r.status, r.body))
}

/// An HTTP response read whole: status, header lines, body.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Response {
    /// A header's value (the first of that name), as sent.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// [`http`] with any headers and body.
pub(crate) fn http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(HTTP_TIMEOUT)).ok();
    s.set_write_timeout(Some(HTTP_TIMEOUT)).ok();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    s.write_all(req.as_bytes())
        .and_then(|()| s.write_all(body))
        .map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no header end in {:?}", String::from_utf8_lossy(&raw)))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = raw[split + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {head:?}"))?;
    let mut response = Response {
        status,
        head,
        body: String::new(),
    };
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        rest = dechunk(&rest)?;
    } else if let Some(n) = response
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        rest.truncate(n);
    }
    response.body = String::from_utf8_lossy(&rest).into_owned();
    Ok(response)
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_line = String::from_utf8_lossy(&b[..eol]);
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let n = usize::from_str_radix(size_hex, 16).map_err(|e| format!("chunk size: {e}"))?;
        b = &b[eol + 2..];
        if n == 0 {
            return Ok(out);
        }
        if b.len() < n {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&b[..n]);
        b = b.get(n + 2..).unwrap_or(&[]);
    }
}

/// Claude Code prices an Opus 4 model at $5/M input, $25/M output tokens.
const OPUS_4_USD_PER_TOKEN: (f64, f64) = (5e-6, 25e-6);
/// Claude Code 2.1.337 prices its default model, Opus 5.5, at $4/M input, $20/M output.
const OPUS_5_USD_PER_TOKEN: (f64, f64) = (4e-6, 20e-6);
/// Claude Code prices a Sonnet model at $3/M input, $15/M output tokens.
const SONNET_USD_PER_TOKEN: (f64, f64) = (3e-6, 15e-6);

/// Claude Code's USD per (input, output) token for the `model` a request named
/// (measured against the fake LLM): Sonnet's, Opus 4's, else Opus 5's.
pub(crate) fn claude_usd_per_token(model: &str) -> (f64, f64) {
    if model.contains("sonnet") {
        SONNET_USD_PER_TOKEN
    } else if model.contains("opus-4") {
        OPUS_4_USD_PER_TOKEN
    } else {
        OPUS_5_USD_PER_TOKEN
    }
}

/// What Claude Code charges for the fake's logged `requests` (entries of the request
/// log), each at the price of the model it asked for.
pub(crate) fn claude_cost<'a>(requests: impl IntoIterator<Item = &'a Value>) -> f64 {
    requests
        .into_iter()
        .map(|r| {
            let (i, o) = claude_usd_per_token(r["body"]["model"].as_str().unwrap_or(""));
            r["usage"]["input_tokens"].as_u64().unwrap_or(0) as f64 * i
                + r["usage"]["output_tokens"].as_u64().unwrap_or(0) as f64 * o
        })
        .sum()
}
