//! The client side of `capfleet serve`'s API, for `capfleet submit` and `capfleet runs
//! --server`: JSON requests with the bearer token, and a run's event stream.

use std::process::ExitCode;
use std::time::Duration;

use capfleet_wire::bindings::sse::lines;
use eventsource_stream::{Event, Eventsource as _};
use futures::{Stream, StreamExt as _};
use serde_json::Value;

use crate::launch::{EXIT_INTERRUPTED, EXIT_INVALID, EXIT_SESSION_FAILED};
use crate::style::Style;

/// The most bytes one event of a run's stream may take: an event is one journal record,
/// an agent's line (1 MiB unless its manifest raises `max_line_bytes`) in its envelope.
/// A broken or hostile server cannot make the client hold more.
const MAX_EVENT: usize = 64 << 20;

/// Why a request to the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url}: {source}")]
    Transport { url: String, source: reqwest::Error },
    #[error(
        "{url}: HTTP {status}: {}: {}",
        body["code"].as_str().unwrap_or("unknown"),
        body["message"].as_str().unwrap_or("")
    )]
    Api {
        url: String,
        status: u16,
        /// The server's answer (`code`, `message`, a fleet's `findings`).
        body: Box<Value>,
    },
    #[error("{url}: the answer is not JSON: {reason}")]
    Body { url: String, reason: String },
    #[error("cannot make an HTTP client: {0}")]
    Client(String),
}

/// A server and the token to call it with.
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// How long connecting may take.
const CONNECT: Duration = Duration::from_secs(10);

impl Client {
    pub fn new(server: &str, token: Option<String>) -> Result<Client, ClientError> {
        capfleet_wire::driver::crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT)
            .build()
            .map_err(|e| ClientError::Client(e.to_string()))?;
        Ok(Client {
            base: server.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn authed(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// `method path` with an optional JSON body; the JSON answer of a 2xx.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let url = self.url(path);
        let mut req = self.authed(self.http.request(method, &url));
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        let transport = |source| ClientError::Transport {
            url: url.clone(),
            source,
        };
        let res = req.send().await.map_err(transport)?;
        let status = res.status();
        let bytes = res.bytes().await.map_err(transport)?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| ClientError::Body {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        if status.is_success() {
            return Ok(value);
        }
        Err(api_error(url, status.as_u16(), value))
    }

    /// The event stream of run `id` after record `after`.
    pub async fn events(
        &self,
        id: &str,
        after: u64,
    ) -> Result<impl Stream<Item = Result<Event, String>> + use<>, ClientError> {
        let url = self.url(&format!("/v1/runs/{id}/events"));
        let res = self
            .authed(self.http.get(&url))
            .header("Last-Event-ID", after.to_string())
            .send()
            .await
            .map_err(|source| ClientError::Transport {
                url: url.clone(),
                source,
            })?;
        if !res.status().is_success() {
            let status = res.status().as_u16();
            let bytes = res.bytes().await.unwrap_or_default();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(api_error(url, status, value));
        }
        Ok(lines(res.bytes_stream(), MAX_EVENT)
            .eventsource()
            .map(|e| e.map_err(|e| e.to_string())))
    }
}

/// The server's error answer (`{"code", "message", …}`).
fn api_error(url: String, status: u16, body: Value) -> ClientError {
    ClientError::Api {
        url,
        status,
        body: Box::new(body),
    }
}

pub fn token(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|t| !t.trim().is_empty())
}

/// Say why a request failed; the exit code (a rejected fleet or token is a usage
/// error, the run's `2`; anything else `1`).
pub fn failed(e: &ClientError, err: Style) -> ExitCode {
    if let ClientError::Api { body, status, .. } = e {
        if let Some(findings) = body["findings"].as_array() {
            for f in findings {
                eprintln!(
                    "{} {}",
                    err.err("error:"),
                    f["message"].as_str().unwrap_or("")
                );
            }
        } else {
            eprintln!("{} {e}", err.err("error:"));
        }
        if matches!(status, 400 | 401 | 403 | 415) {
            return ExitCode::from(EXIT_INVALID);
        }
        if *status == 503 {
            return ExitCode::from(EXIT_INTERRUPTED);
        }
        return ExitCode::from(EXIT_SESSION_FAILED);
    }
    eprintln!("{} {e}", err.err("error:"));
    ExitCode::from(EXIT_SESSION_FAILED)
}
