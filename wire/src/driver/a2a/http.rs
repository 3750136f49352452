//! The HTTP side of the A2A wire: one reqwest client per connection (rustls on ring,
//! connect timeout from `[x-a2a]`, redirects followed only on the same host, plain
//! `http://` only to loopback unless allowed), the agent card fetched from the
//! well-known paths, and JSON-RPC requests whose answer is either one JSON body
//! (bounded) or an SSE stream (bounded per event, [`super::sse`]). Every request
//! carries the spelling's `A2A-Version`, the CAP extension's activation
//! (`A2A-Extensions` / `X-A2A-Extensions`) when the card advertises it, the auth
//! header when the manifest names a secret, and the turn's W3C `traceparent`.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::auth::Auth;
use super::error::A2aError;
use crate::bindings::a2a::card::CARD_PATHS;
use crate::bindings::a2a::{CAP_EXTENSION, Card, Spelling};
use crate::chaos::conn::Route;
use crate::manifest::a2a::A2aOptions;

/// The longest JSON body read whole (a card, a cancel's answer).
pub(super) const MAX_BODY: usize = 4 << 20;
/// Redirects followed at most (each on the same host).
const MAX_REDIRECTS: usize = 5;

/// The client of one peer.
#[derive(Clone)]
pub(super) struct Http {
    client: reqwest::Client,
    first_byte: Duration,
    auth: Option<Auth>,
    allow_http: bool,
    /// Activate the `cap-protocol/v1` extension on every JSON-RPC request.
    cap: bool,
    /// A chaos run's way to the peer through its fault proxy.
    route: Option<Route>,
}

/// Whether `url` is one plain `http://` may reach: loopback only.
fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Installs ring as rustls' provider once per process (reqwest is built without one,
/// so that no aws-lc C build is needed): every reqwest client of the process needs it,
/// the OTLP exporter's too.
pub fn crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one first: either serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Http {
    /// `cap`: the card advertises the CAP extension, which each request activates.
    /// `route`: the peer's requests go through a chaos run's fault proxy.
    pub(super) fn new(
        opts: &A2aOptions,
        auth: Option<Auth>,
        cap: bool,
        route: Option<Route>,
    ) -> Result<Http, A2aError> {
        crypto_provider();
        let redirect = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt
                .previous()
                .first()
                .and_then(Url::host_str)
                .map(str::to_owned);
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else if attempt.url().host_str().map(str::to_owned) != first {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let mut client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(opts.connect_timeout_ms))
            .redirect(redirect);
        if let Some(route) = &route {
            client = route.configure(client);
        }
        let client = client
            .build()
            .map_err(|e| A2aError::Client(e.to_string()))?;
        Ok(Http {
            client,
            first_byte: Duration::from_millis(opts.first_byte_timeout_ms),
            auth,
            allow_http: opts.allow_http,
            cap,
            route,
        })
    }

    /// `url` parsed and checked against the scheme rule.
    pub(super) fn url(&self, url: &str) -> Result<Url, A2aError> {
        let parsed = Url::parse(url).map_err(|e| A2aError::Url {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        match parsed.scheme() {
            "https" => Ok(parsed),
            "http" if self.allow_http || is_loopback(&parsed) => Ok(parsed),
            "http" => Err(A2aError::Url {
                url: url.to_owned(),
                reason: "plain http:// only to loopback (set `allow_http = true` under [x-a2a])"
                    .into(),
            }),
            other => Err(A2aError::Url {
                url: url.to_owned(),
                reason: format!("scheme `{other}` is not http(s)"),
            }),
        }
    }

    /// Reads the card under `base`: `.well-known/agent-card.json`, else the 0.2-era
    /// `.well-known/agent.json`, beneath the base URL's path (as the SDKs' resolvers
    /// look: `http://h/a2a/sim/` has its card at `/a2a/sim/.well-known/...`), then, for
    /// a base with a path, at the host's root.
    pub(super) async fn card(&self, base: &str) -> Result<Card, A2aError> {
        let mut base = self.url(base)?;
        if !base.path().ends_with('/') {
            let dir = format!("{}/", base.path());
            base.set_path(&dir);
        }
        let bad = |reason: String| A2aError::Url {
            url: base.to_string(),
            reason,
        };
        let mut urls = Vec::new();
        for path in CARD_PATHS {
            let beneath = base.join(path.trim_start_matches('/'));
            urls.push(beneath.map_err(|e| bad(e.to_string()))?);
        }
        if base.path() != "/" {
            for path in CARD_PATHS {
                urls.push(base.join(path).map_err(|e| bad(e.to_string()))?);
            }
        }
        let mut last = None;
        for url in urls {
            let res = self.send(self.client.get(url.clone()), None, None).await?;
            if res.status() == StatusCode::NOT_FOUND {
                last = Some(url);
                continue;
            }
            let res = self.check(res, url.as_str())?;
            let body = read_json(res, url.as_str()).await?;
            return Ok(Card::parse(url.as_str(), &body)?);
        }
        Err(A2aError::NoCard {
            url: last.map(|u| u.to_string()).unwrap_or_default(),
        })
    }

    /// A JSON-RPC request to `endpoint`; the response is checked for its status
    /// (401/403: [`A2aError::Auth`]) and returned for its body or stream.
    pub(super) async fn rpc(
        &self,
        endpoint: &Url,
        spelling: Spelling,
        body: &Value,
        traceparent: Option<&str>,
    ) -> Result<reqwest::Response, A2aError> {
        let req = self
            .client
            .post(endpoint.clone())
            .header("accept", "text/event-stream, application/json")
            .header("content-type", "application/json")
            .body(body.to_string());
        let res = self.send(req, Some(spelling), traceparent).await?;
        self.check(res, endpoint.as_str())
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        spelling: Option<Spelling>,
        traceparent: Option<&str>,
    ) -> Result<reqwest::Response, A2aError> {
        let mut headers = HeaderMap::new();
        if let Some(v) = spelling.and_then(Spelling::version_header) {
            headers.insert(
                HeaderName::from_static("a2a-version"),
                HeaderValue::from_static(v),
            );
        }
        if let Some(sp) = spelling.filter(|_| self.cap) {
            headers.insert(
                HeaderName::from_static(sp.extensions_header()),
                HeaderValue::from_static(CAP_EXTENSION),
            );
        }
        if let Some(tp) = traceparent.and_then(|t| HeaderValue::from_str(t).ok()) {
            headers.insert(HeaderName::from_static("traceparent"), tp);
        }
        if let Some(auth) = &self.auth {
            auth.apply(&mut headers);
        }
        let mut request = req.headers(headers).build().map_err(A2aError::transport)?;
        if let Some(route) = &self.route {
            route.redirect(&mut request);
        }
        match tokio::time::timeout(self.first_byte, self.client.execute(request)).await {
            Ok(Ok(res)) => Ok(res),
            Ok(Err(e)) => Err(A2aError::transport(e)),
            Err(_) => Err(A2aError::FirstByte {
                after_ms: self.first_byte.as_millis() as u64,
            }),
        }
    }

    fn check(&self, res: reqwest::Response, url: &str) -> Result<reqwest::Response, A2aError> {
        let status = res.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(A2aError::Auth {
                url: url.to_owned(),
                status: status.as_u16(),
                scheme: self
                    .auth
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), Auth::describe),
            });
        }
        if status.is_redirection() {
            return Err(A2aError::Redirect {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        if !status.is_success() {
            return Err(A2aError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        Ok(res)
    }
}

/// A whole JSON body, at most [`MAX_BODY`] bytes.
pub(super) async fn read_json(mut res: reqwest::Response, url: &str) -> Result<Value, A2aError> {
    let mut body = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(A2aError::transport)? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(A2aError::TooLarge {
                url: url.to_owned(),
                max: MAX_BODY,
            });
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| A2aError::Json {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

/// Whether a response is an SSE stream (else a single JSON body).
pub(super) fn is_stream(res: &reqwest::Response) -> bool {
    res.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}
