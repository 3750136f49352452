//! Connection faults of an A2A peer, Toxiproxy-like: a loopback TCP proxy per
//! session between the A2A driver and its peer, that forwards bytes (it never
//! terminates TLS) and applies the faults armed on the session's [`ConnFaults`].
//!
//! A session of a chaos run with A2A faults has one [`ConnFaults`] handle (kept on its
//! [`LaunchSpec`](crate::driver::LaunchSpec) across restarts). The A2A wire's start
//! asks it for a [`Route`] to the peer's base URL: the proxy is started then (once
//! for the handle's life; it ends with the last handle), and the driver's HTTP client
//! sends every request whose authority is the peer's — the card's, and the endpoint
//! the card names — to the proxy ([`Route::redirect`]): a plain `http://` request to
//! the proxy's address, its `Host` the peer's; an `https://` one to the peer's host
//! name resolved to the proxy, so that TLS still checks the peer's certificate.
//!
//! - `latency`: each chunk, both ways, is delayed `ms` for `for_ms`;
//! - `drop`: the connections open now are closed (mid-stream: an SSE response ends
//!   with no terminal frame); with none open, the next response is cut after its
//!   first chunk;
//! - `http_5xx`: the next request is answered by the proxy with that status (and the
//!   connection closed); on a TLS peer the proxy cannot answer in HTTP, so the
//!   request's connection is closed instead (the span says `applied_as = "drop"`);
//! - `refuse`: as a peer going down, the open connections are closed and the proxy's
//!   listener too for `for_ms` (new connections refused), then it listens again on
//!   the same port.
//!
//! Every injection is a `chaos.conn_fault` span and counted in
//! [`IoMetrics`](super::interpose::metrics::IoMetrics).

mod proxy;
mod route;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

pub(crate) use route::{Route, RouteError};

use super::interpose::metrics::IoMetrics;
use crate::sync::lock;

/// A fault on an A2A peer's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnFault {
    /// Each chunk delayed `ms`, for `for_ms`.
    Latency { ms: u64, for_ms: u64 },
    /// The connection closed mid-stream.
    Drop,
    /// The next request answered with this status by the proxy.
    Http5xx { status: u16 },
    /// Connections refused for `for_ms`.
    Refuse { for_ms: u64 },
}

impl ConnFault {
    /// As a span and the metrics name it (the chaos spec's words).
    pub fn kind(&self) -> &'static str {
        match self {
            ConnFault::Latency { .. } => "latency",
            ConnFault::Drop => "drop",
            ConnFault::Http5xx { .. } => "http_5xx",
            ConnFault::Refuse { .. } => "refuse",
        }
    }
}

/// What the proxy of one session did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Faults injected.
    pub injected: u64,
    /// Connections accepted and forwarded.
    pub connections: u64,
    /// Chunks delayed by `latency`.
    pub delayed_chunks: u64,
    /// Connections closed by `drop` or `refuse` (or by `http_5xx` on a TLS peer).
    pub dropped: u64,
    /// Requests answered by the proxy with a 5xx.
    pub answered_5xx: u64,
    /// Connections refused (attempts while the listener was closed are not seen; this
    /// counts the `refuse` windows).
    pub refusals: u64,
}

/// The connection faults of one session: a cheap handle.
#[derive(Clone)]
pub struct ConnFaults {
    shared: Arc<Shared>,
}

struct Shared {
    core: Arc<Core>,
    /// The proxy, once a route asked for it.
    proxy: tokio::sync::Mutex<Option<proxy::Running>>,
}

/// What the proxy's tasks share with the handle.
pub(crate) struct Core {
    urn: String,
    state: std::sync::Mutex<ConnState>,
    /// Bumped by `drop`: every open connection closes.
    drops: watch::Sender<u64>,
    /// Wakes the accept loop for `refuse`.
    refuse: Notify,
    /// Connections open now.
    open: AtomicUsize,
    metrics: Option<IoMetrics>,
}

#[derive(Default)]
struct ConnState {
    latency: Option<(Duration, Instant)>,
    /// A `drop` found no connection open: the next response is cut.
    drop_next: bool,
    http_5xx: Option<u16>,
    refuse_until: Option<Instant>,
    stats: ConnStats,
}

impl std::fmt::Debug for ConnFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnFaults")
            .field("urn", &self.shared.core.urn)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ConnFaults {
    /// The handle of session `urn`.
    pub fn new(urn: impl Into<String>) -> ConnFaults {
        Self::build(urn.into(), None)
    }

    /// [`ConnFaults::new`], counting into the run's metrics.
    pub fn with_metrics(urn: impl Into<String>, metrics: IoMetrics) -> ConnFaults {
        Self::build(urn.into(), Some(metrics))
    }

    fn build(urn: String, metrics: Option<IoMetrics>) -> ConnFaults {
        ConnFaults {
            shared: Arc::new(Shared {
                core: Arc::new(Core {
                    urn,
                    state: std::sync::Mutex::new(ConnState::default()),
                    drops: watch::Sender::new(0),
                    refuse: Notify::new(),
                    open: AtomicUsize::new(0),
                    metrics,
                }),
                proxy: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// Arms `fault` on the session's connections.
    pub fn inject(&self, fault: ConnFault) {
        let core = &self.shared.core;
        let span = tracing::info_span!(
            "chaos.conn_fault",
            kind = fault.kind(),
            session = %core.urn,
            open = core.open.load(Ordering::Acquire),
        );
        let _entered = span.enter();
        tracing::debug!(?fault, "connection fault armed");
        if let Some(m) = &core.metrics {
            m.fault(&core.urn, fault.kind());
        }
        let now = Instant::now();
        let mut state = lock(&core.state);
        state.stats.injected += 1;
        match fault {
            ConnFault::Latency { ms, for_ms } => {
                state.latency = Some((
                    Duration::from_millis(ms),
                    now + Duration::from_millis(for_ms),
                ));
            }
            ConnFault::Drop => {
                if core.open.load(Ordering::Acquire) > 0 {
                    core.drops.send_modify(|epoch| *epoch += 1);
                } else {
                    state.drop_next = true;
                }
            }
            ConnFault::Http5xx { status } => state.http_5xx = Some(status),
            ConnFault::Refuse { for_ms } => {
                // As a peer going down: its open connections end, new ones are refused.
                state.refuse_until = Some(now + Duration::from_millis(for_ms));
                state.stats.refusals += 1;
                core.refuse.notify_one();
                core.drops.send_modify(|epoch| *epoch += 1);
            }
        }
    }

    /// What the proxy did so far.
    pub fn stats(&self) -> ConnStats {
        lock(&self.shared.core.state).stats
    }

    /// The way to the peer at `base` (its URL) through this session's proxy, started
    /// on the first call (to the address the base URL resolves to now).
    pub async fn route(&self, base: &str) -> Result<Route, RouteError> {
        let (mut route, peer) = Route::to(base).await?;
        let mut proxy = self.shared.proxy.lock().await;
        let running = match proxy.as_mut() {
            Some(running) if running.peer == peer => running,
            _ => proxy
                .insert(proxy::Running::start(self.shared.core.clone(), peer, route.tls).await?),
        };
        route.proxy = running.addr;
        Ok(route)
    }
}

impl Core {
    /// `latency` in effect: the delay of each chunk.
    fn latency(&self) -> Option<Duration> {
        let mut state = lock(&self.state);
        match state.latency {
            Some((ms, until)) if until > Instant::now() => {
                state.stats.delayed_chunks += 1;
                Some(ms)
            }
            Some(_) => {
                state.latency = None;
                None
            }
            None => None,
        }
    }

    /// `refuse` in effect: until when.
    fn refusing(&self) -> Option<Instant> {
        let mut state = lock(&self.state);
        match state.refuse_until {
            Some(until) if until > Instant::now() => Some(until),
            Some(_) => {
                state.refuse_until = None;
                None
            }
            None => None,
        }
    }

    /// A request starts: the 5xx armed for it, if any.
    fn take_5xx(&self) -> Option<u16> {
        lock(&self.state).http_5xx.take()
    }

    /// A response chunk went by: whether a `drop` armed with no connection open cuts
    /// this one.
    fn take_drop_next(&self) -> bool {
        std::mem::take(&mut lock(&self.state).drop_next)
    }

    fn count(&self, f: impl FnOnce(&mut ConnStats)) {
        f(&mut lock(&self.state).stats);
    }
}

/// The address a proxy listens on: loopback, any free port.
fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

#[cfg(test)]
mod tests;
