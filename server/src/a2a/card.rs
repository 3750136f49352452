//! The agent card of an exposed agent or fleet (spec §11.2): its name, a skill per
//! CAP profile of the agent (or the fleet's sessions), the `cap-protocol/v1`
//! extension, one JSON-RPC interface per spelling at `/a2a/<name>/` of `--public-url`
//! or the address the server listens on (never the request's `Host`), and the bearer
//! scheme (the server always has tokens). The card is
//! public, as A2A discovery expects: it names no run, session or secret.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use capfleet_wire::bindings::a2a::Spelling;
use capfleet_wire::bindings::a2a::outbound::{self, Offer};

use super::{Exposed, Host};
use crate::error::ApiError;

/// `GET /a2a/{name}/.well-known/agent-card.json`.
pub(super) async fn serve(
    State(exposed): State<Arc<Exposed>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    card_of(&exposed, &name, &headers)
}

/// `GET /.well-known/agent-card.json`: the card of the one agent or fleet exposed
/// (A2A §8.2's well-known location), as discovery by the server's address expects;
/// 404 when several are (each is at its own path).
pub(super) async fn serve_root(
    State(exposed): State<Arc<Exposed>>,
    headers: HeaderMap,
) -> Response {
    let mut names = exposed.hosts.keys();
    match (names.next(), names.next()) {
        (Some(name), None) => card_of(&exposed, name, &headers),
        _ => ApiError::NoRoute.into_response(),
    }
}

/// Where clients reach the server: `--public-url` when given, else the address it
/// listens on. An unspecified one (`0.0.0.0`, `::`) names no host, so the IP the
/// client dialled stands in (an IP literal: no name a rebinding page controls),
/// else loopback. Never a host name from the request.
pub(super) fn base_of(base: &Base, headers: &HeaderMap) -> String {
    match base {
        Base::Public(url) => url.clone(),
        Base::Listen(addr) if !addr.ip().is_unspecified() => format!("http://{addr}"),
        Base::Listen(addr) => {
            let dialled = headers
                .get("host")
                .and_then(|v| v.to_str().ok())
                .and_then(|h| h.parse::<std::net::SocketAddr>().ok())
                .map(|a| a.ip())
                .or_else(|| {
                    headers
                        .get("host")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|h| h.parse::<std::net::IpAddr>().ok())
                })
                .filter(|ip| !ip.is_unspecified());
            let ip = dialled.unwrap_or(if addr.is_ipv4() {
                std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
            } else {
                std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
            });
            format!("http://{}", std::net::SocketAddr::new(ip, addr.port()))
        }
    }
}

/// Where the cards say the server is.
#[derive(Debug, Clone)]
pub(crate) enum Base {
    /// `--public-url`'s origin.
    Public(String),
    /// The address the server listens on.
    Listen(std::net::SocketAddr),
}

impl Base {
    /// `public`'s origin (`scheme://host[:port]`; its path is ignored, as the server's
    /// Host and Origin checks ignore it) when given, else `listen`.
    pub(crate) fn new(public: Option<&str>, listen: std::net::SocketAddr) -> Base {
        let origin = public
            .and_then(|url| url.parse::<axum::http::Uri>().ok())
            .and_then(|u| Some(format!("{}://{}", u.scheme_str()?, u.authority()?)));
        match origin {
            Some(o) => Base::Public(o),
            None => Base::Listen(listen),
        }
    }
}

fn card_of(exposed: &Exposed, name: &str, headers: &HeaderMap) -> Response {
    let Some(host) = exposed.hosts.get(name) else {
        return ApiError::NoRoute.into_response();
    };
    let url = format!("{}/a2a/{name}/", base_of(&exposed.base, headers));
    let (description, skills) = match host {
        Host::Agent(a) => {
            let m = &a.manifest;
            let mut skills: Vec<(String, String, String)> = m
                .agent
                .profiles
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        format!("{p} profile"),
                        format!("CAP profile {p} of {}", m.agent.name),
                    )
                })
                .collect();
            skills.push((
                "turn".into(),
                "a turn".into(),
                format!(
                    "one turn of {} (`{}`), driven by capfleet",
                    m.agent.name, m.agent.binary
                ),
            ));
            (
                format!(
                    "the agent {} behind capfleet: one session per context, one turn per task",
                    m.agent.name
                ),
                skills,
            )
        }
        Host::Fleet(f) => (
            format!(
                "the capfleet fleet {}: each task is a run, its answer the start session's final text",
                f.name
            ),
            f.sessions
                .iter()
                .map(|(s, agent)| (s.clone(), s.clone(), format!("session {s} ({agent})")))
                .collect(),
        ),
    };
    let card = outbound::card(&Offer {
        name,
        description: &description,
        version: env!("CARGO_PKG_VERSION"),
        url: &url,
        spellings: &[Spelling::V1, Spelling::V03],
        cap_extension: true,
        cap_required: !exposed.plain,
        bearer: true,
        skills,
    });
    ([("content-type", "application/json")], card.to_string()).into_response()
}
