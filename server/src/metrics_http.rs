//! `GET /metrics`: a run's metrics in the OpenMetrics text format, for Prometheus.
//! [`router`] is the route on its own, for a server that serves more (a later `serve`);
//! [`MetricsServer`] is the stand-alone server `capfleet run --metrics-addr` starts.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use capfleet_engine::telemetry::metrics::{self, Metrics};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The `/metrics` route over `metrics`, and `extra` (an application's own registry)
/// after them.
pub(crate) fn router(metrics: Metrics, extra: Option<Arc<Registry>>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            let extra = extra.clone();
            async move {
                let text = m.encode_with(extra.as_deref());
                ([(CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
            }
        }),
    )
}

/// A running `/metrics` server.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Bind `addr` and serve until [`MetricsServer::stop`].
    pub async fn start(addr: SocketAddr, metrics: Metrics) -> Result<Self, String> {
        Self::start_with(addr, metrics, None).await
    }

    /// [`MetricsServer::start`], `extra`'s metrics served too.
    pub async fn start_with(
        addr: SocketAddr,
        metrics: Metrics,
        extra: Option<Arc<Registry>>,
    ) -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("--metrics-addr {addr}: cannot listen: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(metrics, extra);
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _either = stopped.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!("the metrics server stopped: {e}");
            }
        });
        Ok(MetricsServer {
            addr,
            stop: Some(stop),
            task,
        })
    }

    /// Where it listens (the port chosen when `:0` was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and end the server.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _already = stop.send(());
        }
        if tokio::time::timeout(std::time::Duration::from_secs(2), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}
