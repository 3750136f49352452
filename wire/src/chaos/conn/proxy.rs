//! The proxy itself: a loopback listener, and per connection the two directions
//! forwarded chunk by chunk with the armed faults applied.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::{Core, RouteError};

/// Bytes forwarded at once, each way.
const CHUNK: usize = 16 << 10;
/// How long a request answered by the proxy is drained before its connection closes.
const DRAIN: Duration = Duration::from_secs(2);
/// The pause before listening again when the port cannot be bound at once.
const REBIND_PAUSE: Duration = Duration::from_millis(50);

/// A proxy listening: ends (with its connections) when dropped.
pub(super) struct Running {
    pub(super) addr: SocketAddr,
    pub(super) peer: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    pub(super) async fn start(
        core: Arc<Core>,
        peer: SocketAddr,
        tls: bool,
    ) -> Result<Running, RouteError> {
        let listener = listen(super::loopback())?;
        let addr = listener.local_addr()?;
        tracing::info!(urn = %core.urn, %addr, %peer, "chaos: connection fault proxy listening");
        let task = tokio::spawn(accept(core, listener, addr, peer, tls));
        Ok(Running { addr, peer, task })
    }
}

/// A listener that may be opened again on the same port right after it closed.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(64)
}

/// Accepts connections (each forwarded by a task of the set, aborted with it), and
/// closes the listener while `refuse` holds.
async fn accept(
    core: Arc<Core>,
    listener: TcpListener,
    addr: SocketAddr,
    peer: SocketAddr,
    tls: bool,
) {
    let mut conns = JoinSet::new();
    let mut listener = Some(listener);
    loop {
        if let Some(until) = core.refusing() {
            if listener.take().is_some() {
                tracing::debug!(urn = %core.urn, "chaos: refusing connections");
            }
            tokio::time::sleep_until(until).await;
            continue;
        }
        let open = match &listener {
            Some(l) => l,
            None => match listen(addr) {
                Ok(l) => listener.insert(l),
                Err(e) => {
                    tracing::warn!(urn = %core.urn, %addr, "chaos: the fault proxy cannot listen again yet: {e}");
                    tokio::time::sleep(REBIND_PAUSE).await;
                    continue;
                }
            },
        };
        tokio::select! {
            accepted = open.accept() => match accepted {
                Ok((client, _)) => {
                    conns.spawn(connection(core.clone(), client, peer, tls));
                }
                Err(e) => tracing::debug!(urn = %core.urn, "chaos: accept failed: {e}"),
            },
            () = core.refuse.notified() => {}
            Some(_done) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// The connection ended by a fault (or a failed read or write): both ways close.
struct Cut;

/// Counts the connection as open for its life.
struct Open(Arc<Core>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn connection(core: Arc<Core>, client: TcpStream, peer: SocketAddr, tls: bool) {
    // Subscribed before counted: a `drop` that sees this connection open reaches it.
    let mut drops = core.drops.subscribe();
    core.open.fetch_add(1, Ordering::AcqRel);
    let _open = Open(core.clone());
    core.count(|s| s.connections += 1);
    let server = match TcpStream::connect(peer).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(urn = %core.urn, %peer, "chaos: the peer refused the proxy: {e}");
            return; // the client sees its connection closed
        }
    };
    for s in [&client, &server] {
        if let Err(e) = s.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
    }
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    // Set when the peer has answered: the client's next bytes start a request.
    let answered = AtomicBool::new(true);
    let (answer, answers) = mpsc::channel(1);
    let up = upstream(&core, from_client, to_server, &answered, answer, tls);
    let down = downstream(&core, from_server, to_client, &answered, answers);
    tokio::select! {
        _ended = async { tokio::try_join!(up, down) } => {}
        _changed = drops.changed() => core.count(|s| s.dropped += 1),
    }
}

/// Client to peer: a request that starts while a 5xx is armed is answered by the
/// proxy (through the other direction, which owns the client's write half).
async fn upstream(
    core: &Core,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    answered: &AtomicBool,
    answer: mpsc::Sender<u16>,
    tls: bool,
) -> Result<(), Cut> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = from.read(&mut buf).await.map_err(|_| Cut)?;
        if n == 0 {
            return to.shutdown().await.map_err(|_| Cut);
        }
        if answered.swap(false, Ordering::AcqRel)
            && let Some(status) = core.take_5xx()
        {
            if tls {
                tracing::info!(urn = %core.urn, status, applied_as = "drop", "chaos: http_5xx on a TLS peer closes the request's connection");
                core.count(|s| s.dropped += 1);
                return Err(Cut);
            }
            answer.send(status).await.map_err(|_| Cut)?;
            // The rest of the request is read and dropped until the client closes:
            // a socket closed with unread bytes resets, and the answer would be lost.
            let drain = async { while from.read(&mut buf).await.is_ok_and(|n| n > 0) {} };
            let _drained = tokio::time::timeout(DRAIN, drain).await;
            return Err(Cut);
        }
        delay(core).await;
        to.write_all(&buf[..n]).await.map_err(|_| Cut)?;
    }
}

/// Peer to client; answers the client itself when the other direction says so.
async fn downstream(
    core: &Core,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    answered: &AtomicBool,
    mut answers: mpsc::Receiver<u16>,
) -> Result<(), Cut> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        tokio::select! {
            Some(status) = answers.recv() => {
                let response = status_response(status);
                let _written = to.write_all(response.as_bytes()).await;
                let _closed = to.shutdown().await;
                core.count(|s| s.answered_5xx += 1);
                tracing::info!(urn = %core.urn, status, "chaos: request answered by the fault proxy");
                // The other direction ends the connection once the client has closed.
                return Ok(());
            }
            read = from.read(&mut buf) => {
                let n = read.map_err(|_| Cut)?;
                if n == 0 {
                    return to.shutdown().await.map_err(|_| Cut);
                }
                answered.store(true, Ordering::Release);
                delay(core).await;
                to.write_all(&buf[..n]).await.map_err(|_| Cut)?;
                if core.take_drop_next() {
                    core.count(|s| s.dropped += 1);
                    return Err(Cut);
                }
            }
        }
    }
}

async fn delay(core: &Core) {
    if let Some(pause) = core.latency() {
        tokio::time::sleep(pause).await;
    }
}

/// The proxy's own answer: `status` (a 5xx), no body worth reading, closing.
fn status_response(status: u16) -> String {
    let status =
        reqwest::StatusCode::from_u16(status).unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR);
    let reason = status.canonical_reason().unwrap_or("Injected Fault");
    let status = status.as_u16();
    let body = "capfleet chaos: http_5xx\n";
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}
