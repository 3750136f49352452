//! `capfleet worker --nats URL`: a host's share of the runs queued in NATS
//! JetStream (`capfleet_app::nats::queue`). The worker pulls a run only when it has a free
//! slot (`--max-runs`), from the consumers of every subset of its labels in turn,
//! holds it under a lease ([`hold`]: heartbeats, fencing, the ack once the outcome
//! is journaled) and runs it as `capfleet run` would ([`execute`]: its directory under
//! this worker's `.capfleet/runs/`, the engine `serve` runs submissions on, the
//! journal replicated in JetStream). A run whose worker died (its lease lapsed, so
//! JetStream hands it out again after the same TTL) is taken over from the
//! replicated journal.
//!
//! `SIGTERM`, `SIGINT` or `SIGHUP` drain the worker: it pulls no more runs, lets the
//! ones it holds finish (each acked) within `--drain-grace`, stops those still
//! running then and hands them back to the queue (a `handed_back` record published
//! after their `run_ended`, a nak with a delay, the lease given up), and exits;
//! another worker goes on with each from its journal.

mod execute;
mod hold;
mod metrics;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer};
use futures::StreamExt as _;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use capfleet_engine::telemetry::metrics::{FleetMetrics, Metrics};

use self::metrics::WorkerMetrics;
use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::nats::lease::Leases;
use capfleet_app::nats::presence::{Presence, announce};
use capfleet_app::nats::queue;
use capfleet_app::nats::{Nats, NatsArgs};
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::{Telemetry, TelemetryArgs};
use capfleet_server::metrics_http::MetricsServer;
use capfleet_wire::clock::now_ms;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet worker --nats nats://10.0.0.5:4222 --max-runs 4
      run up to 4 queued runs at once, under ./.capfleet/runs/
  capfleet worker --nats nats://a:4222,nats://b:4222,nats://c:4222 --label gpu
      also take the runs that require the label `gpu` (`capfleet submit --label gpu`)

The token for NATS is read from CAPFLEET_NATS_TOKEN (or --nats-creds names a \
credentials file); neither is ever logged. SIGTERM drains the worker: it takes no more \
runs, lets the ones it holds finish within --drain-grace, hands the others back to the \
queue for another worker, and exits. The guide: docs/guide/nats.md.")]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
    /// At most this many runs at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_runs: usize,
    /// A capability of this worker; runs that require labels go to workers that have them all.
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Where the runs are kept (`DIR/.capfleet/runs/<run-id>/`). Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// A directory a submission's `cwd` may name (or any directory inside it).
    #[arg(long = "allow-root", value_name = "DIR")]
    pub allow_roots: Vec<PathBuf>,
    /// The worker's name (its NATS client name, its leases' holder). Default: host-pid.
    #[arg(long)]
    pub name: Option<String>,
    /// A run's lease lapses this long after its holder's last heartbeat (every third
    /// of it); then another worker takes the run over. Set when the bucket is made.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub lease_ttl: u64,
    /// On SIGTERM, the runs held get this long to finish; then each is stopped and
    /// handed back to the queue (nak with a delay) for another worker to go on with.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub drain_grace: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics: the runs' and the worker's own
    /// (runs and leases held, queue depth, takeovers).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// After a round over every consumer finds nothing, this long until the next.
const IDLE_PAUSE: Duration = Duration::from_millis(200);
/// A pull (no wait: JetStream answers at once, with a run or with none) is given up
/// after this.
const PULL_TIMEOUT: Duration = Duration::from_secs(2);

/// What every run of this worker shares.
pub(super) struct Worker {
    pub name: String,
    pub dir: PathBuf,
    pub allow_roots: Vec<PathBuf>,
    /// The worker's own files, hidden from every sandbox it gives: its runs
    /// (`.capfleet`), its NATS credentials.
    pub hidden: Vec<PathBuf>,
    pub nats: Nats,
    /// Copies JetStream keeps of the streams it makes.
    pub replicas: usize,
    pub leases: Leases,
    /// The runs it holds now (never locked across an await).
    pub held: Mutex<BTreeSet<String>>,
    /// Set when the drain's grace is over: every run held is stopped and handed back.
    pub hand_back: watch::Sender<bool>,
    pub metrics: WorkerMetrics,
    /// The runs' metrics (one registry across them).
    pub fleet_metrics: Metrics,
}

impl Worker {
    /// The runs it holds now.
    pub(super) fn held(&self) -> Vec<String> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Note `run` as held (`true`) or not.
    pub(super) fn hold(&self, run: &str, held: bool) {
        let mut runs = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held {
            runs.insert(run.to_owned());
        } else {
            runs.remove(run);
        }
        self.metrics
            .runs_held
            .set(i64::try_from(runs.len()).unwrap_or(i64::MAX));
    }
}

pub(crate) fn run(args: WorkerArgs, color: ColorChoice) -> ExitCode {
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(work(args, color))
}

/// Why the worker does not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("`capfleet worker` needs --nats URL[,URL...]")]
    NoUrl,
    #[error("--max-runs must be at least 1")]
    NoRuns,
    #[error("--lease-ttl must be at least 1 (second)")]
    NoTtl,
    #[error("{0}")]
    Labels(#[from] queue::LabelError),
    #[error("{0}")]
    Nats(#[from] capfleet_app::nats::NatsError),
    #[error("{}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
}

async fn work(args: WorkerArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    // Before anything: signals drain the worker instead of ending it.
    let mut signals = StopSignals::all();
    let telemetry = match Telemetry::start(color, &args.telemetry) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let started = start(&args, &telemetry).await;
    let (worker, consumers, shown) = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let metrics_server = match args.metrics_addr {
        Some(addr) => {
            let registry = Some(worker.metrics.registry.clone());
            match MetricsServer::start_with(addr, worker.fleet_metrics.clone(), registry).await {
                Ok(s) => {
                    eprintln!("capfleet: metrics on http://{}/metrics", s.local_addr());
                    Some(s)
                }
                Err(e) => {
                    eprintln!("{} {e}", err.err("error:"));
                    return ExitCode::from(EXIT_INVALID);
                }
            }
        }
        None => None,
    };
    // Said once the consumers exist (tests and scripts wait for this line).
    eprintln!(
        "capfleet: worker {} pulling runs from {shown} (labels: {}; at most {} at once; runs in {})",
        worker.name,
        if args.labels.is_empty() {
            "none".to_owned()
        } else {
            args.labels.join(", ")
        },
        args.max_runs,
        worker.dir.display()
    );
    let worker = Arc::new(worker);
    let labels = queue::labels(&args.labels).unwrap_or_default();
    let (draining, drain_seen) = tokio::sync::watch::channel(false);
    let present = tokio::spawn(presence(worker.clone(), labels, args.max_runs, drain_seen));
    let slots = Arc::new(Semaphore::new(args.max_runs));
    let mut running = JoinSet::new();
    let mut next = 0usize;
    loop {
        tokio::select! {
            signal = signals.recv() => {
                eprintln!(
                    "capfleet: {signal}: draining: no more runs taken; {} to finish",
                    running.len()
                );
                draining.send_replace(true);
                break;
            }
            Some(_done) = running.join_next() => {}
            Ok(permit) = slots.clone().acquire_owned() => {
                match pull(&consumers, &mut next).await {
                    Some(message) => {
                        running.spawn(hold::hold(worker.clone(), message, permit));
                    }
                    None => {
                        drop(permit);
                        tokio::time::sleep(IDLE_PAUSE).await;
                    }
                }
            }
        }
    }
    let grace = Duration::from_secs(args.drain_grace);
    let finished = tokio::time::timeout(grace, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        eprintln!(
            "capfleet: the drain's grace ({}s) is over: {} runs stopped and handed back",
            args.drain_grace,
            running.len()
        );
        worker.hand_back.send_replace(true);
        while running.join_next().await.is_some() {}
    }
    present.abort();
    if let Some(m) = metrics_server {
        m.stop().await;
    }
    telemetry.finish().await;
    eprintln!("capfleet: worker {} drained", worker.name);
    ExitCode::SUCCESS
}

async fn start(
    args: &WorkerArgs,
    telemetry: &Telemetry,
) -> Result<(Worker, Vec<PullConsumer>, String), StartError> {
    let urls = args.nats.urls.as_deref().ok_or(StartError::NoUrl)?;
    if args.max_runs == 0 {
        return Err(StartError::NoRuns);
    }
    if args.lease_ttl == 0 {
        return Err(StartError::NoTtl);
    }
    let labels = queue::labels(&args.labels)?;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|source| StartError::Dir {
            path: PathBuf::from("."),
            source,
        })?,
    };
    let canonical = |p: &PathBuf| {
        std::fs::create_dir_all(p)
            .and_then(|()| std::fs::canonicalize(p))
            .map_err(|source| StartError::Dir {
                path: p.clone(),
                source,
            })
    };
    let dir = canonical(&dir)?;
    capfleet_app::secrets::withhold(&[]);
    let allow_roots = args
        .allow_roots
        .iter()
        .map(|p| {
            std::fs::canonicalize(p).map_err(|source| StartError::Dir {
                path: p.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = args.name.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_or_else(|_| "host".to_owned(), |h| h.trim().to_owned());
        format!("{host}-{}", std::process::id())
    });
    let nats: Nats = args.nats.connect(urls, &name).await?;
    let replicas = args.nats.replicas;
    let leases = nats
        .leases(Duration::from_secs(args.lease_ttl), replicas)
        .await?;
    nats.journal_stream(replicas).await?;
    let consumers = nats.run_consumers(&labels, replicas, leases.ttl).await?;
    let hidden = [Some(dir.join(".capfleet")), args.nats.creds.clone()]
        .into_iter()
        .flatten()
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect();
    let worker = Worker {
        name,
        dir,
        allow_roots,
        hidden,
        nats,
        replicas,
        leases,
        held: Mutex::default(),
        hand_back: watch::Sender::new(false),
        metrics: WorkerMetrics::new(),
        fleet_metrics: Arc::new(FleetMetrics::new(
            telemetry.span_stats().unwrap_or_default(),
        )),
    };
    Ok((worker, consumers, NatsArgs::shown(urls)))
}

/// One run from the first consumer, in turn, that has one waiting.
async fn pull(consumers: &[PullConsumer], next: &mut usize) -> Option<jetstream::Message> {
    for _ in 0..consumers.len() {
        let consumer = &consumers[*next % consumers.len()];
        *next = next.wrapping_add(1);
        // A pull whose answer is lost never ends by itself: bounded.
        let pulled = tokio::time::timeout(PULL_TIMEOUT, async {
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .messages()
                .await
                .map_err(|e| e.to_string())?;
            batch.next().await.transpose().map_err(|e| e.to_string())
        })
        .await;
        match pulled {
            Ok(Ok(Some(message))) => return Some(message),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!("pulling a run: {e}"),
            Err(_) => tracing::warn!("pulling a run: no answer within {PULL_TIMEOUT:?}"),
        }
    }
    None
}

/// Say this worker's presence (labels, runs, whether it drains) every third of the
/// lease TTL, and at once when it starts to drain.
async fn presence(
    worker: Arc<Worker>,
    labels: Vec<String>,
    max_runs: usize,
    mut draining: tokio::sync::watch::Receiver<bool>,
) {
    let store = match worker
        .nats
        .presence(worker.leases.ttl * 3, worker.replicas)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}: `capfleet workers` will not list this worker");
            return;
        }
    };
    let mut tick = tokio::time::interval(worker.leases.ttl / 3);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = draining.changed() => if changed.is_err() { return },
        }
        match worker.nats.queue_depth(worker.replicas).await {
            Ok(depth) => {
                worker
                    .metrics
                    .queue_depth
                    .set(i64::try_from(depth).unwrap_or(i64::MAX));
            }
            Err(e) => tracing::warn!("{e}"),
        }
        let p = Presence {
            worker: worker.name.clone(),
            labels: labels.clone(),
            max_runs,
            runs: worker.held(),
            draining: *draining.borrow(),
            beat_ms: now_ms(),
        };
        if let Err(e) = announce(&store, &p).await {
            tracing::warn!("{e}");
        }
    }
}
