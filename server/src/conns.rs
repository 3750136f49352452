//! The server's connections, held so that idle sockets cannot lock anyone out: a
//! client has `header_timeout` to send a request's headers, a connection with no
//! request in flight (one that never sent any, or a keep-alive between requests) is
//! closed after `idle_timeout`, and at most `max` are open at once. Past the cap the
//! oldest idle connection is closed to make room — an idle socket never keeps a
//! probe or a client with a request out — and when every one is busy the new one is
//! refused at once with `503` (never queued, never holding a descriptor). A request
//! is in flight from its headers to the end of its response's body (an event stream
//! is busy while it streams). Each closing is counted by why
//! (`capfleet_server_connections_closed_total`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use capfleet_engine::fault::out_of_descriptors;
use capfleet_wire::clock::now_ms;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower_service::Service as _;

use super::error::{ErrorBody, ErrorCode};
use super::state::Server;

/// How the server holds its connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    /// Open at once, at most.
    pub max: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
}

/// How long the accept loop waits after the process ran out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How often a busy connection is looked at for having become idle.
const BUSY_RECHECK: Duration = Duration::from_secs(1);

/// What a connection is doing: its requests in flight, and since when it has none.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn idle_for(&self, now: u64) -> Option<Duration> {
        (self.in_flight.load(Ordering::Acquire) == 0).then(|| {
            Duration::from_millis(now.saturating_sub(self.idle_since_ms.load(Ordering::Acquire)))
        })
    }
}

/// One request in flight on its connection, until dropped (its response's body ended).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.idle_since_ms.store(now_ms(), Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response's body, its request in flight until the body is done with.
struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An open connection, as the accept loop sees it.
struct Open {
    activity: Arc<Activity>,
    /// Told to close it now (to make room for a new one).
    evict: Arc<Notify>,
}

/// The open connections, by when they were accepted (oldest first).
#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Open>,
}

fn lock(t: &Mutex<Table>) -> MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

impl Table {
    /// Room for one more under `max`: there is, or the oldest idle connection is
    /// told to close; `false` when every one is busy.
    fn make_room(&mut self, max: usize) -> bool {
        if self.open.len() < max {
            return true;
        }
        let now = now_ms();
        let oldest_idle = self
            .open
            .iter()
            .find(|(_, c)| c.activity.idle_for(now).is_some())
            .map(|(id, _)| *id);
        match oldest_idle.and_then(|id| self.open.remove(&id)) {
            Some(evicted) => {
                evicted.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Why a connection closed (the metric's label).
#[derive(Debug, Clone, Copy)]
enum Closed {
    /// The client closed it, or the server after its last response.
    Done,
    HeaderTimeout,
    Idle,
    Evicted,
    Refused,
    Shutdown,
}

impl Closed {
    fn as_str(self) -> &'static str {
        match self {
            Closed::Done => "done",
            Closed::HeaderTimeout => "header_timeout",
            Closed::Idle => "idle",
            Closed::Evicted => "evicted",
            Closed::Refused => "refused",
            Closed::Shutdown => "shutdown",
        }
    }
}

/// Serve `app` on `listener` until `closing` is set; then stop accepting, let each
/// connection finish its requests, and return once every one has closed (the caller
/// bounds the wait: dropping this future closes them all).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    server: Arc<Server>,
    mut closing: watch::Receiver<bool>,
) {
    let table = Arc::new(Mutex::new(Table::default()));
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = closing.wait_for(|c| *c) => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            // No descriptor for it: it waits in the backlog until one is free.
            Err(e) if out_of_descriptors(&e) => {
                tracing::error!("accepting a connection: {e}; trying again shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            Err(e) => {
                tracing::debug!("accepting a connection: {e}");
                continue;
            }
        };
        let (id, activity, evict) = {
            let mut t = lock(&table);
            let made = t.make_room(limits.max);
            if !made {
                drop(t);
                refuse(&stream, limits.max);
                server.metrics.connection_closed(Closed::Refused.as_str());
                continue;
            }
            let id = t.next;
            t.next += 1;
            let activity = Arc::new(Activity::default());
            activity.idle_since_ms.store(now_ms(), Ordering::Release);
            let evict = Arc::new(Notify::new());
            t.open.insert(
                id,
                Open {
                    activity: activity.clone(),
                    evict: evict.clone(),
                },
            );
            (id, activity, evict)
        };
        server.metrics.connections.inc();
        let (table, app, server, closing) =
            (table.clone(), app.clone(), server.clone(), closing.clone());
        tasks.spawn(async move {
            let why = connection(stream, peer, app, &activity, &evict, limits, closing).await;
            lock(&table).open.remove(&id);
            server.metrics.connections.dec();
            server.metrics.connection_closed(why.as_str());
        });
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// Serve one connection until it closes; why it did.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    activity: &Arc<Activity>,
    evict: &Notify,
    limits: ConnLimits,
    mut closing: watch::Receiver<bool>,
) -> Closed {
    let tracked = activity.clone();
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let in_flight = InFlight::start(&tracked);
        let mut router = app.clone();
        async move {
            let response = match router.call(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|inner| Tracked {
                inner,
                _in_flight: in_flight,
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        let idle_check = match activity.idle_for(now_ms()) {
            Some(idle) => limits.idle_timeout.saturating_sub(idle),
            // Busy: looked at again soon, its idle time counted from its last response.
            None => limits.idle_timeout.min(BUSY_RECHECK),
        };
        tokio::select! {
            served = conn.as_mut() => {
                return match served {
                    Err(e) if e.is_timeout() => Closed::HeaderTimeout,
                    _ if shutting_down => Closed::Shutdown,
                    _ => Closed::Done,
                };
            }
            () = evict.notified() => return Closed::Evicted,
            () = tokio::time::sleep(idle_check) => {
                if activity.idle_for(now_ms()).is_some_and(|idle| idle >= limits.idle_timeout) {
                    return Closed::Idle;
                }
            }
            _ = closing.wait_for(|c| *c), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Past the cap with every connection busy: `503` (best effort: what the socket
/// takes now) and closed.
fn refuse(stream: &TcpStream, max: usize) {
    let body = ErrorBody {
        code: ErrorCode::TooManyConnections,
        message: format!(
            "the server holds {max} connections, each with a request in flight: try again shortly"
        ),
        findings: None,
        answered_by: None,
        expected: None,
    };
    let body = serde_json::to_string(&body).unwrap_or_default();
    let status = StatusCode::SERVICE_UNAVAILABLE;
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _partial = stream.try_write(format!("{head}{body}").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(table: &mut Table, busy: bool) -> (u64, Arc<Notify>) {
        let activity = Arc::new(Activity::default());
        if busy {
            activity.in_flight.store(1, Ordering::Release);
        }
        let evict = Arc::new(Notify::new());
        let id = table.next;
        table.next += 1;
        table.open.insert(
            id,
            Open {
                activity,
                evict: evict.clone(),
            },
        );
        (id, evict)
    }

    #[test]
    fn past_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_never_do() {
        let mut t = Table::default();
        let (busy, _) = open(&mut t, true);
        let (idle, _) = open(&mut t, false);
        let (idle2, _) = open(&mut t, false);
        assert!(t.make_room(4), "under the cap");
        assert!(t.make_room(3));
        assert!(!t.open.contains_key(&idle), "the oldest idle one went");
        assert!(t.open.contains_key(&busy) && t.open.contains_key(&idle2));
        assert!(t.make_room(2));
        assert_eq!(t.open.keys().copied().collect::<Vec<_>>(), vec![busy]);
        assert!(!t.make_room(1), "every one is busy: refused");
    }

    #[tokio::test]
    async fn an_evicted_connection_is_told_even_before_it_waits() {
        let mut t = Table::default();
        let (_, evict) = open(&mut t, false);
        assert!(t.make_room(1));
        tokio::time::timeout(Duration::from_secs(1), evict.notified())
            .await
            .expect("the eviction waits for its connection");
    }
}
