//! No web page speaks to the server but its own console: every request, on every
//! route and before its body is read, passes three checks that a browser page
//! cannot get round (the bearer token is the fourth; see [`super::auth`]).
//!
//! - `Host` names an address the server listens on (its IP, `localhost` on a loopback
//!   or unspecified address, any IP literal on an unspecified one) or the host of
//!   `--public-url`. A DNS-rebinding page reaches the server under its own name
//!   (`Host: evil.example:7878`): refused with 421, it gets nothing, not even a probe.
//! - `Origin`, when present (a browser sends it with every request that is not a
//!   plain `GET`, and with every cross-origin `fetch`), is the server's own
//!   (`http://<Host>`, or `--public-url`'s): a page of another origin — another port
//!   of the same machine too — is refused with 403, whatever it sends. `Origin: null`
//!   (a sandboxed frame, a `file:` page) passes only with `Sec-Fetch-Site:
//!   same-origin`, which only the browser sets (the console sends no referrer, and
//!   some browsers then say `null` for its own posts).
//! - A body comes only as `application/json` or `application/toml` (each route
//!   narrows it further): never one of the types a form or a `no-cors` fetch can send
//!   without asking (`text/plain`, `multipart/form-data`,
//!   `application/x-www-form-urlencoded`), nor none at all. Refused with 415.
//!
//! Clients that are no web page (curl, the SDKs, `capfleet submit`) send no `Origin`
//! and their `Host` is the address they dialled: they pass unchanged.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The media types a request body may have (before each route's own check).
pub(crate) const BODY_TYPES: [&str; 2] = ["application/json", "application/toml"];

/// What the server answers to: the address it listens on, and `--public-url`.
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    listen: IpAddr,
    /// `--public-url`: its host (lower case, no port) and its origin
    /// (`scheme://host[:port]`, lower case).
    public: Option<(String, String)>,
}

/// Why `--public-url` is not taken.
#[derive(Debug, thiserror::Error)]
#[error("--public-url {0}: expected http://HOST[:PORT] or https://HOST[:PORT] (a path is ignored)")]
pub(crate) struct PublicUrlError(String);

/// A server on the loopback address, with no public URL.
impl Default for Origins {
    fn default() -> Origins {
        Origins {
            listen: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            public: None,
        }
    }
}

impl Origins {
    /// The origins of a server listening on `listen`, reached at `public` too.
    pub(crate) fn new(listen: IpAddr, public: Option<&str>) -> Result<Origins, PublicUrlError> {
        let public = public
            .map(|url| {
                let bad = || PublicUrlError(url.to_owned());
                let uri: Uri = url.parse().map_err(|_| bad())?;
                let scheme = uri.scheme_str().filter(|s| matches!(*s, "http" | "https"));
                let (Some(scheme), Some(authority)) = (scheme, uri.authority()) else {
                    return Err(bad());
                };
                if authority.as_str().contains('@') {
                    return Err(bad());
                }
                let authority = authority.as_str().to_ascii_lowercase();
                Ok((host_of(&authority), format!("{scheme}://{authority}")))
            })
            .transpose()?;
        Ok(Origins { listen, public })
    }

    /// Whether `host` (a `Host` header's name, lower case, without port or brackets)
    /// is this server's.
    fn knows_host(&self, host: &str) -> bool {
        if self.public.as_ref().is_some_and(|(h, _)| h == host) {
            return true;
        }
        let open = self.listen.is_unspecified();
        if host == "localhost" {
            return open || self.listen.is_loopback();
        }
        match host.parse::<IpAddr>() {
            Ok(ip) => open || ip == self.listen,
            Err(_) => false,
        }
    }

    /// The request's refusal, if it gets one.
    pub(crate) fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| uri.authority().map(|a| a.as_str().to_owned()));
        if let Some(host) = &host
            && !self.knows_host(&host_of(&host.to_ascii_lowercase()))
        {
            return Err(ApiError::UnknownHost(printable(host)));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
            let own = host
                .as_ref()
                .is_some_and(|h| origin == format!("http://{}", h.to_ascii_lowercase()))
                || self.public.as_ref().is_some_and(|(_, o)| *o == origin);
            let own_opaque = origin == "null"
                && headers
                    .get("sec-fetch-site")
                    .is_some_and(|s| s.as_bytes() == b"same-origin");
            if !(own || own_opaque) {
                return Err(ApiError::ForeignOrigin(printable(&origin)));
            }
        }
        if has_body(headers) {
            let kind = media_type(headers);
            if !BODY_TYPES.contains(&kind.as_str()) {
                return Err(ApiError::UnsupportedMedia {
                    got: kind,
                    want: "application/json or application/toml",
                });
            }
        }
        Ok(())
    }
}

/// The middleware: [`Origins::check`] before anything else reads the request.
pub(crate) async fn guard(
    State(origins): State<Arc<Origins>>,
    request: Request,
    next: Next,
) -> Response {
    match origins.check(request.headers(), request.uri()) {
        Ok(()) => next.run(request).await,
        Err(e) => {
            tracing::warn!(code = ?e.code(), "{e}");
            e.into_response()
        }
    }
}

/// The request's media type (`type/subtype`, lower case, parameters dropped; empty
/// when it has none).
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Whether the request carries a body (a length that is not zero, or chunks).
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.to_str().ok().and_then(|n| n.trim().parse::<u64>().ok()) != Some(0))
}

/// `authority`'s host: without its port, an IPv6 literal without its brackets, no
/// trailing dot.
fn host_of(authority: &str) -> String {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.trim_end_matches('.').to_owned()
}

/// A header's value as it may go into a message and a log: printable ASCII, bounded.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn req(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn code(o: &Origins, pairs: &[(&'static str, &'static str)]) -> Option<String> {
        o.check(&req(pairs), &Uri::from_static("/v1/runs"))
            .err()
            .map(|e| format!("{:?}", e.code()))
    }

    #[test]
    fn hosts_origins_and_bodies() {
        let lo = Origins::new("127.0.0.1".parse().unwrap(), None).unwrap();
        assert_eq!(code(&lo, &[("host", "127.0.0.1:7878")]), None);
        assert_eq!(code(&lo, &[("host", "localhost:9000")]), None);
        assert_eq!(code(&lo, &[]), None);
        for bad in [
            "evil.example:7878",
            "127.0.0.2:7878",
            "localhost.evil.example",
        ] {
            assert_eq!(code(&lo, &[("host", bad)]).as_deref(), Some("UnknownHost"));
        }
        let own = [
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878"),
        ];
        assert_eq!(code(&lo, &own), None);
        for (origin, site) in [
            ("http://127.0.0.1:8000", "same-site"),
            ("http://localhost:7878", "cross-site"),
            ("null", "cross-site"),
        ] {
            let h = [
                ("host", "127.0.0.1:7878"),
                ("origin", origin),
                ("sec-fetch-site", site),
            ];
            assert_eq!(code(&lo, &h).as_deref(), Some("ForeignOrigin"), "{origin}");
        }
        let opaque_own = [
            ("host", "127.0.0.1:7878"),
            ("origin", "null"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(code(&lo, &opaque_own), None);
        for kind in [
            "text/plain",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
        ] {
            let h = [("content-type", kind), ("content-length", "5")];
            assert_eq!(
                code(&lo, &h).as_deref(),
                Some("UnsupportedMediaType"),
                "{kind}"
            );
        }
        assert_eq!(
            code(&lo, &[("transfer-encoding", "chunked")]).as_deref(),
            Some("UnsupportedMediaType")
        );
        let json = [
            ("content-type", "application/json; charset=utf-8"),
            ("content-length", "2"),
        ];
        assert_eq!(code(&lo, &json), None);
        let empty = [("content-type", "text/plain"), ("content-length", "0")];
        assert_eq!(code(&lo, &empty), None);
    }

    #[test]
    fn an_unspecified_address_and_a_public_url() {
        let any = Origins::new(
            "0.0.0.0".parse().unwrap(),
            Some("https://Fleet.Example.com/capfleet/"),
        )
        .unwrap();
        for ok in [
            "10.1.2.3:7878",
            "[::1]:7878",
            "localhost",
            "fleet.example.com",
        ] {
            assert_eq!(code(&any, &[("host", ok)]), None, "{ok}");
        }
        assert_eq!(
            code(&any, &[("host", "other.example.com")]).as_deref(),
            Some("UnknownHost")
        );
        let proxied = [
            ("host", "fleet.example.com"),
            ("origin", "https://fleet.example.com"),
        ];
        assert_eq!(code(&any, &proxied), None);
        for bad in ["ftp://x", "fleet.example.com", "http://u@x/"] {
            assert!(
                Origins::new("0.0.0.0".parse().unwrap(), Some(bad)).is_err(),
                "{bad}"
            );
        }
    }
}
