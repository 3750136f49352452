//! `capfleet serve` under test: a server started on a free loopback port in a
//! directory of its own, requests to it (with or without a bearer token), its runs
//! awaited, its event stream read by curl (a real SSE client), and its end.
//!
//! A server started without `--token-file` is a default `capfleet serve`: it makes
//! its own token file and prints its admin token once, which [`Server`] keeps
//! ([`Server::admin`]) and sends with every request that names no token (a second
//! server on the same directory finds the file, prints nothing, and gets the token
//! the first one printed).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::capfleet::{capfleet, capfleet_with_nofile};
use super::fake_llm::{Response, http_with};

/// A running `capfleet serve`; killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    stderr: Arc<Mutex<String>>,
    /// The admin token a server without `--token-file` made (and printed) for
    /// itself: sent when a request names none.
    admin: Option<String>,
}

/// The admin token each directory's default server printed, for the next server
/// started there (which prints none).
static ADMINS: LazyLock<Mutex<HashMap<PathBuf, String>>> = LazyLock::new(Mutex::default);

impl Server {
    /// `capfleet serve --addr 127.0.0.1:0 EXTRA…` in `dir`, once it listens.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_env(dir, extra, &[])
    }

    /// [`Server::start`] with the variables `env` set.
    pub(crate) fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch(capfleet(dir), dir, extra, env)
    }

    /// [`Server::start`] with the open-file limit, soft and hard, set to `nofile`.
    pub(crate) fn start_with_nofile(dir: &Path, extra: &[&str], nofile: u64) -> Server {
        Server::launch(capfleet_with_nofile(dir, nofile), dir, extra, &[])
    }

    fn launch(mut command: Command, dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = command
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("capfleet serve");
        let (token_tx, token_rx) = std::sync::mpsc::channel();
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = token_tx.send(line.trim().to_owned());
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().expect("stderr"));
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(rest) = line.split("serving on http://127.0.0.1:").nth(1) {
                    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let _ = port_tx.send(port.parse::<u16>().expect("port"));
                }
                let mut all = kept.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let port = port_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the server did not start: {}", stderr.lock().unwrap()));
        // Printed before it listens: there by now when it made its token file.
        let admin = (!extra.contains(&"--token-file")).then(|| {
            let mut admins = ADMINS.lock().unwrap();
            let made = stderr.lock().unwrap().contains("no --token-file: made");
            if made {
                let secret = token_rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the admin token on stdout");
                assert!(secret.starts_with("cft_"), "{secret}");
                admins.insert(dir.to_owned(), secret.clone());
                return secret;
            }
            admins.get(dir).cloned().unwrap_or_else(|| {
                panic!(
                    "the server printed no admin token: {}",
                    stderr.lock().unwrap()
                )
            })
        });
        Server {
            child,
            port,
            dir: dir.to_owned(),
            stderr,
            admin,
        }
    }

    /// The admin token the server made for itself (started without `--token-file`).
    pub(crate) fn admin(&self) -> &str {
        self.admin
            .as_deref()
            .expect("a server started without --token-file")
    }

    /// `token`, else the server's own admin token (none with `--token-file`).
    fn token<'a>(&'a self, token: Option<&'a str>) -> Option<&'a str> {
        token.or(self.admin.as_deref())
    }

    /// [`sse`] of this server, with `token` (else its admin token).
    pub(crate) fn sse(
        &self,
        path: &str,
        token: Option<&str>,
        last_id: Option<u64>,
        stop_after: Option<usize>,
    ) -> Vec<SseEvent> {
        sse(self.port, path, self.token(token), last_id, stop_after)
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What the server said on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// A request with `token` (as a bearer token; none: the server's admin token, if
    /// it made one) and `body` of `content_type`.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: &str,
        body: &[u8],
    ) -> Response {
        let auth = self.token(token).map(|t| format!("Bearer {t}"));
        // Every request activates the CAP extension: the HTTP API ignores it, and the
        // exposed agents' A2A routes refuse plain A2A unless --a2a-plain.
        let mut headers = vec![
            ("Content-Type", content_type),
            ("A2A-Extensions", "cap-protocol/v1"),
        ];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        http_with(self.port, method, path, &headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// A JSON request; the status and the JSON body (`null` when there is none).
    pub(crate) fn json(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let payload = body.map(Value::to_string).unwrap_or_default();
        let r = self.request(method, path, token, "application/json", payload.as_bytes());
        let value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        (r.status, value)
    }

    /// Submit `submission` (see [`submission`]); the 201 body.
    pub(crate) fn submit(&self, token: Option<&str>, submission: &Value) -> Value {
        let (status, body) = self.json("POST", "/v1/runs", token, Some(submission));
        assert_eq!(status, 201, "{body}\n{}", self.stderr());
        body
    }

    /// Submit fleet `ask` (as `token`): one sim session, `s0`, following `script`,
    /// its agents marked with `marker`; the run's id.
    pub(crate) fn submit_script(
        &self,
        token: Option<&str>,
        marker: (&str, &str),
        script: &str,
    ) -> String {
        let fleet = sim_fleet("ask", 1, marker);
        let created = self.submit(token, &submission(&fleet, &[("script.toml", script)]));
        created["id"].as_str().expect("the run's id").to_owned()
    }

    /// Poll run `id` until it has ended; its last view.
    pub(crate) fn wait_run(&self, id: &str, token: Option<&str>, timeout: Duration) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let (status, run) = self.json("GET", &format!("/v1/runs/{id}"), token, None);
            assert_eq!(status, 200, "{run}");
            if !matches!(run["state"].as_str(), Some("queued" | "running")) {
                return run;
            }
            assert!(
                Instant::now() < until,
                "run {id} still {run}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Wait for the server to exit by itself, at most `timeout`.
    pub(crate) fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the server did not exit\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The journal of run `id`.
    pub(crate) fn journal(&self, id: &str) -> PathBuf {
        self.dir
            .join(".capfleet/runs")
            .join(id)
            .join("journal.jsonl")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A token named `name` with `role` added to `dir/tokens.txt`; its secret.
pub(crate) fn add_token(dir: &std::path::Path, name: &str, role: &str) -> String {
    let out = super::succeeded(
        capfleet(dir)
            .args([
                "serve",
                "token",
                "add",
                name,
                "--role",
                role,
                "--token-file",
                "tokens.txt",
            ])
            .output()
            .unwrap(),
    );
    let secret = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(secret.starts_with("cft_") && secret.len() > 40, "{secret}");
    secret
}

/// A session's script asking leave for a high-risk `Bash` command, then saying a line
/// once it was answered.
pub(crate) const PERMISSION: &str = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"echo hi\" }, risk = \"high\" }, { say = \"after the tool\" }]\n";

/// A session's script saying `n` lines `ms` apart: a run that lasts while it is read.
pub(crate) fn chatty(n: usize, ms: u64) -> String {
    let steps: Vec<String> = (0..n)
        .map(|i| format!("{{ sleep_ms = {ms} }}, {{ say = \"line {i}\\n\" }}"))
        .collect();
    format!("[[turn]]\nsteps = [{}]\n", steps.join(", "))
}

/// A JSON submission: `fleet`'s text and the files beside it.
pub(crate) fn submission(fleet: &str, files: &[(&str, &str)]) -> Value {
    let files: serde_json::Map<String, Value> = files
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({ "fleet": fleet, "files": files })
}

/// A fleet `name` of `sessions` sim sessions (`s0`…, all started), each following
/// `script.toml` and carrying the environment pair `marker`.
pub(crate) fn sim_fleet(name: &str, sessions: usize, marker: (&str, &str)) -> String {
    let (k, v) = marker;
    let names: Vec<String> = (0..sessions).map(|i| format!("\"s{i}\"")).collect();
    let mut fleet = format!(
        "[fleet]\nname = \"{name}\"\nstart = [{}]\ntask = \"go\"\n",
        names.join(", ")
    );
    for i in 0..sessions {
        fleet.push_str(&format!(
            "\n[[sessions]]\nname = \"s{i}\"\nagent = \"sim\"\nscript = \"script.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
        ));
    }
    fleet
}

/// One SSE event as curl delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub id: Option<u64>,
    pub event: Option<String>,
    pub data: String,
}

/// Read the event stream of `path` with `curl -N` (a real SSE client), from
/// `last_id` (the `Last-Event-ID` header), until `stop_after` events were read (then
/// the connection is cut) or the stream ends.
fn sse(
    port: u16,
    path: &str,
    token: Option<&str>,
    last_id: Option<u64>,
    stop_after: Option<usize>,
) -> Vec<SseEvent> {
    let mut c = std::process::Command::new("curl");
    c.args(["-sN", "--max-time", "120"]);
    if let Some(t) = token {
        c.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(id) = last_id {
        c.args(["-H", &format!("Last-Event-ID: {id}")]);
    }
    c.arg(format!("http://127.0.0.1:{port}{path}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("curl");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut events = Vec::new();
    let mut cur = SseEvent {
        id: None,
        event: None,
        data: String::new(),
    };
    for line in out.lines().map_while(Result::ok) {
        if line.is_empty() {
            if !cur.data.is_empty() || cur.event.is_some() {
                events.push(std::mem::replace(
                    &mut cur,
                    SseEvent {
                        id: None,
                        event: None,
                        data: String::new(),
                    },
                ));
                if stop_after.is_some_and(|n| events.len() >= n) {
                    break;
                }
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("id:") {
            cur.id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            cur.event = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            cur.data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    events
}

/// One operation of the server's OpenAPI document.
#[derive(Debug, Clone)]
pub(crate) struct Operation {
    pub method: String,
    /// The path template (`/v1/runs/{id}`).
    pub path: String,
    /// The role the document says it needs (`x-capfleet-role`); `None`: open.
    pub role: Option<String>,
}

/// Every operation of `doc`, each with its documented role (none when its security
/// is empty: an open route).
pub(crate) fn operations(doc: &Value) -> Vec<Operation> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            if ![
                "get", "post", "put", "delete", "patch", "head", "options", "trace",
            ]
            .contains(&method.as_str())
            {
                continue;
            }
            let open = op["security"].as_array().is_some_and(|s| {
                s.iter()
                    .all(|r| r.as_object().is_some_and(|o| o.is_empty()))
            });
            let role = (!open).then(|| {
                op["x-capfleet-role"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path}: a guarded route names its role"))
                    .to_owned()
            });
            ops.push(Operation {
                method: method.to_uppercase(),
                path: path.clone(),
                role,
            });
        }
    }
    ops
}

/// `template` with its `{name}` parameters replaced by `values`' (each must be there).
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    while let Some(start) = out.find('{') {
        let end = start + out[start..].find('}').expect("a closed parameter");
        let name = &out[start + 1..end];
        let value = values
            .iter()
            .find(|(k, _)| *k == name)
            .unwrap_or_else(|| panic!("no value for `{name}` in {template}"))
            .1;
        out.replace_range(start..=end, value);
    }
    out
}
