//! `[x-a2a]` (a capfleet extension, spec §14.1): how the A2A binding reaches the peer
//! `fast_path.a2a_serve_at` names — whether a card without the `cap-protocol/v1`
//! extension may be driven as a plain A2A agent, which environment variable holds the
//! secret of the card's security scheme (never the secret itself), whether plain
//! `http://` may go beyond loopback, and the connect and first-byte timeouts.

use toml::de::DeTable;

use super::build::section;
use super::reader::Reader;

/// Connect timeout when the manifest names none.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// First-byte timeout (a request's response headers) when the manifest names none.
pub const DEFAULT_FIRST_BYTE_TIMEOUT_MS: u64 = 30_000;

/// `[x-a2a]`: the A2A binding's options.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct A2aOptions {
    /// `plain = true`: drive a card without the CAP extension; only text, task states
    /// and artifacts are mapped.
    pub plain: bool,
    /// `secret_env`: the environment variable holding the bearer token or API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// `allow_http = true`: plain `http://` to a host that is not loopback.
    pub allow_http: bool,
    /// `connect_timeout_ms`.
    pub connect_timeout_ms: u64,
    /// `first_byte_timeout_ms`: how long a request waits for its response to start.
    pub first_byte_timeout_ms: u64,
}

impl Default for A2aOptions {
    fn default() -> Self {
        A2aOptions {
            plain: false,
            secret_env: None,
            allow_http: false,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            first_byte_timeout_ms: DEFAULT_FIRST_BYTE_TIMEOUT_MS,
        }
    }
}

impl A2aOptions {
    /// Whether nothing is set (the section is then left out when printed).
    pub fn is_default(&self) -> bool {
        *self == A2aOptions::default()
    }
}

const KNOWN: &[&str] = &[
    "plain",
    "secret_env",
    "allow_http",
    "connect_timeout_ms",
    "first_byte_timeout_ms",
];

pub(crate) fn read_a2a(r: &mut Reader, root: &DeTable<'_>, empty: &DeTable<'_>) -> A2aOptions {
    const P: &str = "x-a2a";
    let (t, _) = section(r, root, "", P, empty);
    r.unknown_keys(t, P, KNOWN);
    let d = A2aOptions::default();
    A2aOptions {
        plain: r.boolean(t, P, "plain").unwrap_or(d.plain),
        secret_env: r.string(t, P, "secret_env"),
        allow_http: r.boolean(t, P, "allow_http").unwrap_or(d.allow_http),
        connect_timeout_ms: r
            .uint(t, P, "connect_timeout_ms")
            .unwrap_or(d.connect_timeout_ms),
        first_byte_timeout_ms: r
            .uint(t, P, "first_byte_timeout_ms")
            .unwrap_or(d.first_byte_timeout_ms),
    }
}
