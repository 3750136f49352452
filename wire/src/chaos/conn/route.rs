//! The way an A2A driver's requests to its peer take through the session's proxy.

use std::net::SocketAddr;

use reqwest::Url;
use reqwest::header::{HOST, HeaderValue};

/// Requests to the peer's authority (`host`, `port`) go to `proxy`.
#[derive(Debug, Clone)]
pub struct Route {
    host: String,
    port: u16,
    pub(super) tls: bool,
    pub(super) proxy: SocketAddr,
}

/// Why no route to a peer could be made: its requests then go straight to it.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("`{url}` is not a peer URL: {reason}")]
    Url { url: String, reason: String },
    #[error("the host of `{url}` does not resolve: {source}")]
    Resolve {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// An `https://` peer named by its address: its certificate names the address, which
    /// no local name can stand for.
    #[error(
        "`{url}`: an https peer named by an IP address cannot be proxied without breaking TLS; name it by host"
    )]
    TlsByAddress { url: String },
    #[error("the fault proxy cannot listen on loopback: {0}")]
    Listen(#[from] std::io::Error),
}

impl Route {
    /// The route to the peer at `base` (its proxy not known yet), and the address its
    /// host resolves to now.
    pub(super) async fn to(base: &str) -> Result<(Route, SocketAddr), RouteError> {
        let bad = |reason: &str| RouteError::Url {
            url: base.to_owned(),
            reason: reason.to_owned(),
        };
        let url = Url::parse(base).map_err(|e| bad(&e.to_string()))?;
        let tls = match url.scheme() {
            "https" => true,
            "http" => false,
            _ => return Err(bad("the scheme is not http(s)")),
        };
        let host = url.host_str().ok_or_else(|| bad("no host"))?.to_owned();
        let port = url.port_or_known_default().ok_or_else(|| bad("no port"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if tls && bare.parse::<std::net::IpAddr>().is_ok() {
            return Err(RouteError::TlsByAddress {
                url: base.to_owned(),
            });
        }
        let peer = tokio::net::lookup_host((bare, port))
            .await
            .and_then(|mut addrs| {
                addrs
                    .next()
                    .ok_or_else(|| std::io::Error::other("no address"))
            })
            .map_err(|source| RouteError::Resolve {
                url: base.to_owned(),
                source,
            })?;
        let route = Route {
            host,
            port,
            tls,
            proxy: super::loopback(),
        };
        Ok((route, peer))
    }

    /// The client of a TLS route resolves the peer's host name to the proxy (the port
    /// comes from the URL, which [`Route::redirect`] sets).
    pub fn configure(&self, client: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        if self.tls {
            let bare = self.host.trim_start_matches('[').trim_end_matches(']');
            client.resolve(bare, SocketAddr::new(self.proxy.ip(), 0))
        } else {
            client
        }
    }

    /// A request to the peer's authority is sent to the proxy instead, its `Host`
    /// still the peer's; any other request is left alone.
    pub fn redirect(&self, request: &mut reqwest::Request) {
        let url = request.url_mut();
        let ours = url
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
            && url.port_or_known_default() == Some(self.port);
        if !ours {
            return;
        }
        let authority = match url.port() {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        };
        let moved = if self.tls {
            url.set_port(Some(self.proxy.port()))
        } else {
            url.set_ip_host(self.proxy.ip())
                .and_then(|()| url.set_port(Some(self.proxy.port())))
        };
        if moved.is_err() {
            tracing::warn!(%url, "chaos: this request cannot go through the fault proxy");
            return;
        }
        if let Ok(host) = HeaderValue::from_str(&authority) {
            request.headers_mut().insert(HOST, host);
        }
    }
}
