//! The proxy against a loopback HTTP peer of a few lines: each fault seen by a real
//! reqwest client routed the way the A2A driver routes.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A peer answering every request on a connection with `200 ok`; a request for
/// `/stream` gets a chunked response whose first chunk comes at once and whose end
/// never comes (an SSE stream that waits).
async fn peer() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let head = String::from_utf8_lossy(&buf[..n]).to_string();
                    let reply: &[u8] = if head.starts_with("GET /stream") {
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
                    };
                    if s.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A peer, a session's faults on it, and a reqwest client routed to the peer through
/// the session's proxy, the way the A2A driver routes.
struct Setup {
    faults: ConnFaults,
    client: reqwest::Client,
    route: Route,
    base: String,
}

impl Setup {
    async fn new() -> Setup {
        // Another test may have installed one first: either serves.
        let _installed = rustls::crypto::ring::default_provider().install_default();
        let base = peer().await;
        let faults = ConnFaults::new("cap://t/a");
        let route = faults.route(&base).await.unwrap();
        let client = route.configure(reqwest::Client::builder()).build().unwrap();
        Setup {
            faults,
            client,
            route,
            base,
        }
    }

    /// `GET path` of the peer.
    async fn get(&self, path: &str) -> reqwest::Result<reqwest::Response> {
        let mut req = self
            .client
            .get(format!("{}{path}", self.base))
            .build()
            .unwrap();
        self.route.redirect(&mut req);
        self.client.execute(req).await
    }

    /// The status of `GET path`, which gets an answer.
    async fn status(&self, path: &str) -> u16 {
        self.get(path).await.unwrap().status().as_u16()
    }
}

#[tokio::test]
async fn requests_to_the_peer_go_through_the_proxy() {
    let s = Setup::new().await;
    let res = s.get("/x").await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "ok");
    assert_eq!(s.faults.stats().connections, 1);
    // Another host is left alone.
    let mut other = s.client.get("http://localhost:9/").build().unwrap();
    s.route.redirect(&mut other);
    assert_eq!(other.url().port(), Some(9));
}

#[tokio::test]
async fn http_5xx_answers_the_next_request_only() {
    let s = Setup::new().await;
    assert_eq!(s.status("/x").await, 200);
    s.faults.inject(ConnFault::Http5xx { status: 503 });
    assert_eq!(s.status("/x").await, 503);
    assert_eq!(s.status("/x").await, 200);
    assert_eq!(s.faults.stats().answered_5xx, 1);
}

#[tokio::test]
async fn drop_cuts_a_stream_mid_response() {
    let s = Setup::new().await;
    let mut res = s.get("/stream").await.unwrap();
    assert_eq!(res.chunk().await.unwrap().as_deref(), Some(&b"first\n"[..]));
    s.faults.inject(ConnFault::Drop);
    let end = tokio::time::timeout(Duration::from_secs(5), res.chunk()).await;
    assert!(
        matches!(end, Ok(Err(_))),
        "the stream ends in an error: {end:?}"
    );
    assert_eq!(s.faults.stats().dropped, 1);
}

#[tokio::test]
async fn refuse_closes_the_port_for_a_while() {
    let s = Setup::new().await;
    s.faults.inject(ConnFault::Refuse { for_ms: 300 });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = tokio::net::TcpStream::connect(s.route.proxy).await;
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The same session routes to the peer again, through the same proxy.
    let again = s.faults.route(&s.base).await.unwrap();
    assert_eq!(again.proxy, s.route.proxy);
    assert_eq!(s.status("/x").await, 200);
}

#[tokio::test]
async fn latency_delays_each_chunk() {
    let s = Setup::new().await;
    s.faults.inject(ConnFault::Latency {
        ms: 100,
        for_ms: 10_000,
    });
    let t0 = Instant::now();
    assert_eq!(s.status("/x").await, 200);
    // A request and its answer: two chunks, each delayed.
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t0.elapsed()
    );
    assert!(s.faults.stats().delayed_chunks >= 2);
}
