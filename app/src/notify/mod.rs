//! Webhook notifications: a JSON `POST` when a session waits for an answer (input or
//! a permission), when a run ends, when a budget is crossed — from a fleet's
//! `[notify]` or `run --notify URL` / `serve --notify URL`.
//!
//! Each body is signed with HMAC-SHA256 under a shared secret (read from a variable
//! or a file, never logged): `X-Capfleet-Signature: sha256=<hex of the MAC of the
//! body>`; `X-Capfleet-Event` names the event, `X-Capfleet-Delivery` is unique per
//! notice (the same on each retry). Delivery ([`deliver`]) never blocks the run: a
//! notice goes into a bounded queue per webhook ([`QUEUE`]; when it is full the
//! notice is dropped and counted), one task per webhook posts them in order, each
//! retried with a doubling backoff a bounded number of times; what still fails is
//! counted ([`NotifyStats`], `capfleet_server_notify_*` on the server's `/metrics`).
//! At the end, [`Workers::finish`] gives what is queued a bounded grace and stops.

mod deliver;
pub mod notices;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Notices waiting per webhook, at most.
pub(crate) const QUEUE: usize = 256;

/// What a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A session waits for an answer (an ask, or a permission its policy left open).
    Waiting,
    /// A run ended (its outcome and exit code).
    RunEnded,
    /// A budget was crossed (the fleet's: the run stops; a session's: it stops).
    BudgetExceeded,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Waiting, Kind::RunEnded, Kind::BudgetExceeded];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Waiting => "waiting",
            Kind::RunEnded => "run_ended",
            Kind::BudgetExceeded => "budget_exceeded",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A webhook's shared secret; its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// The value of the variable `var` (set and not empty).
    pub(crate) fn from_env(var: &str) -> Result<Secret, String> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Secret(v.trim().as_bytes().into())),
            _ => Err(format!(
                "the webhook's secret: the variable {var} is not set (or empty)"
            )),
        }
    }

    /// The contents of the file `path` (trimmed; not empty).
    pub(crate) fn from_file(path: &Path) -> Result<Secret, String> {
        match std::fs::read_to_string(path) {
            Ok(v) if !v.trim().is_empty() => Ok(Secret(v.trim().as_bytes().into())),
            Ok(_) => Err(format!("the webhook's secret: {} is empty", path.display())),
            Err(e) => Err(format!("the webhook's secret: {}: {e}", path.display())),
        }
    }

    fn key(&self) -> ring::hmac::Key {
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0)
    }
}

/// One webhook.
#[derive(Debug, Clone)]
pub struct NotifySpec {
    pub url: String,
    pub secret: Secret,
    /// What it is sent (default: everything).
    pub events: Vec<Kind>,
}

/// `--notify URL` with its secret from `--notify-secret-env VAR` (default
/// `CAPFLEET_NOTIFY_SECRET`) or `--notify-secret-file PATH`.
#[derive(Debug, Clone, clap::Args)]
pub struct NotifyArgs {
    /// POST a signed JSON notice to URL when a session waits for an answer, when a
    /// run ends, when a budget is crossed (besides a fleet's own `[notify]`).
    #[arg(long, value_name = "URL")]
    pub notify: Option<String>,
    /// The variable holding the webhook's shared secret (HMAC-SHA256).
    #[arg(long, value_name = "VAR", default_value = "CAPFLEET_NOTIFY_SECRET")]
    pub notify_secret_env: String,
    /// A file holding the webhook's shared secret (instead of the variable).
    #[arg(long, value_name = "PATH")]
    pub notify_secret_file: Option<std::path::PathBuf>,
}

impl NotifyArgs {
    /// The webhook the flags name, if any (an error names the missing secret).
    pub fn spec(&self) -> Result<Option<NotifySpec>, String> {
        let Some(url) = &self.notify else {
            return Ok(None);
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("--notify {url}: not an http:// or https:// URL"));
        }
        let secret = match &self.notify_secret_file {
            Some(f) => Secret::from_file(f)?,
            None => Secret::from_env(&self.notify_secret_env)
                .map_err(|e| format!("--notify: {e} (or give --notify-secret-file PATH)"))?,
        };
        Ok(Some(NotifySpec {
            url: url.clone(),
            secret,
            events: Kind::ALL.to_vec(),
        }))
    }
}

/// What became of the notices, counted (shared by every webhook of a process).
#[derive(Debug, Clone, Default)]
pub struct NotifyStats {
    pub sent: Counter,
    pub failed: Counter,
    pub retries: Counter,
    pub dropped: Counter,
}

impl NotifyStats {
    /// Register the counters as `<prefix>_notify_*`.
    pub fn register(&self, registry: &mut Registry) {
        for (name, help, c) in [
            ("notify_sent", "Webhook notices delivered", &self.sent),
            (
                "notify_failed",
                "Webhook notices given up on after their retries (or refused by the receiver)",
                &self.failed,
            ),
            (
                "notify_retries",
                "Webhook delivery attempts retried",
                &self.retries,
            ),
            (
                "notify_dropped",
                "Webhook notices dropped because the webhook's queue was full",
                &self.dropped,
            ),
        ] {
            registry.register(name, help, c.clone());
        }
    }
}

/// One notice: its kind and its JSON body.
#[derive(Debug, Clone)]
pub struct Notice {
    pub kind: Kind,
    pub body: Value,
}

impl Notice {
    /// A notice of `kind` about run `run` of fleet `fleet`, with `fields` (an object).
    pub(crate) fn new(kind: Kind, run: &str, fleet: &str, fields: Value) -> Notice {
        let mut body = json!({
            "event": kind.as_str(),
            "run_id": run,
            "fleet": fleet,
            "ts_ms": capfleet_wire::clock::now_ms(),
        });
        if let (Some(b), Value::Object(f)) = (body.as_object_mut(), fields) {
            b.extend(f);
        }
        Notice { kind, body }
    }
}

struct Hook {
    tx: mpsc::Sender<Notice>,
    events: Vec<Kind>,
    stats: NotifyStats,
    /// Notices queued or being delivered.
    outstanding: Arc<AtomicU64>,
}

/// Where notices go: every webhook that wants them. Cheap to clone; sending never
/// waits.
#[derive(Clone, Default)]
pub struct Notifier {
    hooks: Arc<[Arc<Hook>]>,
}

/// The delivery tasks of a [`Notifier`]'s webhooks.
#[derive(Default)]
pub struct Workers {
    tasks: Vec<JoinHandle<()>>,
    closing: Option<watch::Sender<bool>>,
    /// Each task's notices not delivered yet (given up at the end: counted failed).
    outstanding: Vec<Arc<AtomicU64>>,
    stats: NotifyStats,
}

impl Notifier {
    /// One delivery task per webhook of `specs`.
    pub fn start(specs: Vec<NotifySpec>, stats: &NotifyStats) -> (Notifier, Workers) {
        let (closing, closed) = watch::channel(false);
        let mut hooks = Vec::new();
        let mut tasks = Vec::new();
        let mut outstanding = Vec::new();
        for spec in specs {
            let (tx, rx) = mpsc::channel(QUEUE);
            let count = Arc::new(AtomicU64::new(0));
            hooks.push(Arc::new(Hook {
                tx,
                events: spec.events.clone(),
                stats: stats.clone(),
                outstanding: count.clone(),
            }));
            tasks.push(tokio::spawn(deliver::run(
                spec,
                rx,
                stats.clone(),
                closed.clone(),
                count.clone(),
            )));
            outstanding.push(count);
        }
        let workers = Workers {
            closing: (!tasks.is_empty()).then_some(closing),
            tasks,
            outstanding,
            stats: stats.clone(),
        };
        (
            Notifier {
                hooks: hooks.into(),
            },
            workers,
        )
    }

    /// This notifier's webhooks and `other`'s.
    pub fn and(&self, other: &Notifier) -> Notifier {
        Notifier {
            hooks: self
                .hooks
                .iter()
                .chain(other.hooks.iter())
                .cloned()
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Queue `notice` for every webhook that wants its kind; a full queue drops it
    /// (counted), never waits.
    pub fn send(&self, notice: &Notice) {
        for hook in self
            .hooks
            .iter()
            .filter(|h| h.events.contains(&notice.kind))
        {
            hook.outstanding.fetch_add(1, Ordering::Relaxed);
            if hook.tx.try_send(notice.clone()).is_err() {
                hook.outstanding.fetch_sub(1, Ordering::Relaxed);
                hook.stats.dropped.inc();
                tracing::warn!(
                    event = notice.kind.as_str(),
                    "a webhook's queue is full: notice dropped"
                );
            }
        }
    }
}

impl Workers {
    /// Let the webhooks deliver what is queued for at most `grace` (retries cut
    /// short), then stop them.
    pub async fn finish(self, grace: Duration) {
        if let Some(c) = &self.closing {
            c.send_replace(true);
        }
        let mut tasks = self.tasks;
        let all = futures::future::join_all(tasks.iter_mut());
        if tokio::time::timeout(grace, all).await.is_err() {
            for t in &tasks {
                t.abort();
            }
            let left: u64 = self
                .outstanding
                .iter()
                .map(|o| o.load(Ordering::Relaxed))
                .sum();
            self.stats.failed.inc_by(left);
            tracing::warn!("{left} webhook notice(s) still queued at the end were given up");
        }
    }
}
