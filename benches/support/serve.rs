//! `capfleet serve` for the benches that drive it (`serve`, `console`): the release
//! binary on a free loopback port in a directory of its own (with the admin token it
//! makes for itself, or a token file's when asked),
//! its RSS, a fleet submitted, a run awaited, and a run's event stream read record by
//! record.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

pub(crate) const EXE: &str = env!("CARGO_BIN_EXE_capfleet");

/// `capfleet serve` on a free loopback port in a directory of its own.
pub(crate) struct Serve {
    child: Child,
    pub(crate) api: Api,
    dir: tempfile::TempDir,
}

/// A server's API: its base URL and the token of every request.
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) base: String,
    pub(crate) token: Option<String>,
}

impl Serve {
    pub(crate) fn start(extra: &[&str]) -> Serve {
        Serve::spawn(tempfile::tempdir().expect("tempdir"), None, extra)
    }

    /// A server with a token file holding one admin token, `bench`.
    pub(crate) fn start_with_token(extra: &[&str]) -> Serve {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new(EXE)
            .current_dir(dir.path())
            .args(["serve", "token", "add", "bench", "--role", "admin"])
            .args(["--token-file", "tokens.txt"])
            .output()
            .expect("capfleet serve token add");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8(out.stdout)
            .expect("the token")
            .trim()
            .to_owned();
        let mut args = vec!["--token-file", "tokens.txt"];
        args.extend_from_slice(extra);
        Serve::spawn(dir, Some(token), &args)
    }

    fn spawn(dir: tempfile::TempDir, token: Option<String>, extra: &[&str]) -> Serve {
        let mut child = Command::new(EXE)
            .current_dir(dir.path())
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("capfleet serve");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let port = loop {
            let line = lines.next().expect("the server starts").expect("stderr");
            if let Some(rest) = line.split("serving on http://127.0.0.1:").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                break digits.parse::<u16>().expect("port");
            }
        };
        // Keep draining its stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        // Without a token file it made one and printed its admin token (stdout),
        // before it listened.
        let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let token = token.or_else(|| {
            let made = out.next().expect("the admin token").expect("stdout");
            Some(made.trim().to_owned())
        });
        std::thread::spawn(move || out.for_each(drop));
        Serve {
            child,
            api: Api {
                base: format!("http://127.0.0.1:{port}"),
                token,
            },
            dir,
        }
    }

    /// (VmRSS, VmHWM) in KiB.
    pub(crate) fn rss(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// The journal of run `id`.
    pub(crate) fn journal(&self, id: &str) -> PathBuf {
        self.dir
            .path()
            .join(".capfleet/runs")
            .join(id)
            .join("journal.jsonl")
    }
}

impl Api {
    /// `req` with the server's token, if it has one.
    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Submit `fleet`; the status and the body.
    pub(crate) async fn submit(&self, http: &reqwest::Client, fleet: &str) -> (u16, Value) {
        let r = self
            .auth(http.post(format!("{}/v1/runs", self.base)))
            .header("Content-Type", "application/toml")
            .body(fleet.to_owned())
            .send()
            .await
            .expect("submit");
        let status = r.status().as_u16();
        let body = r.bytes().await.unwrap_or_default();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// Wait until run `id` has ended; its state.
    pub(crate) async fn ended(&self, http: &reqwest::Client, id: &str) -> String {
        loop {
            let body = self
                .auth(http.get(format!("{}/v1/runs/{id}", self.base)))
                .send()
                .await
                .expect("show")
                .bytes()
                .await
                .expect("body");
            let run: Value = serde_json::from_slice(&body).expect("json");
            let state = run["state"].as_str().unwrap_or("").to_owned();
            if state != "queued" && state != "running" {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Read run `id`'s event stream until it ends or `each` says stop (false): each
    /// record's JSON line and when it arrived.
    pub(crate) async fn records(
        &self,
        http: &reqwest::Client,
        id: &str,
        mut each: impl FnMut(&[u8], Instant) -> bool,
    ) {
        let r = self
            .auth(http.get(format!("{}/v1/runs/{id}/events", self.base)))
            .send()
            .await
            .expect("events");
        let mut body = r.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else { break };
            buf.extend_from_slice(&chunk);
            let mut start = 0;
            while let Some(i) = buf[start..].iter().position(|b| *b == b'\n') {
                let line = &buf[start..start + i];
                start += i + 1;
                if let Some(data) = line.strip_prefix(b"data:")
                    && ts_ms(data).is_some()
                    && !each(data, Instant::now())
                {
                    return;
                }
            }
            buf.drain(..start);
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ts_ms` of a journal line, found without parsing the whole record.
pub(crate) fn ts_ms(line: &[u8]) -> Option<u64> {
    number_after(line, b"\"ts_ms\":")
}

/// The digits right after the first `key` in `line`, as a number.
pub(crate) fn number_after(line: &[u8], key: &[u8]) -> Option<u64> {
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    let digits: Vec<u8> = line[at..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Now, in ms since the epoch (the clock of the journal's `ts_ms`).
pub(crate) fn epoch_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// A one-session fleet following the script at `script` (an absolute path).
pub(crate) fn fleet(name: &str, script: &Path) -> String {
    format!(
        "[fleet]\nname = \"{name}\"\nstart = \"s0\"\ntask = \"go\"\n\n[[sessions]]\nname = \"s0\"\n\
         agent = \"sim\"\nscript = \"{}\"\n",
        script.display()
    )
}

/// The `p` quantile of `sorted` (NaN when empty).
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
