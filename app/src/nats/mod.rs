//! Runs distributed over NATS JetStream (issue 22): the connection every NATS verb
//! shares (`worker`, `submit --nats`, `serve --nats`), and the queue of runs
//! ([`queue`]). NATS is the distributed engine; capfleet adds no consensus of its own.
//!
//! A secret never reaches a log: the token is read from the environment
//! ([`TOKEN_ENV`]), the credentials from a file (`--nats-creds`), and the URLs are
//! said without their user part ([`NatsArgs::shown`]).
//!
//! # How a run travels
//!
//! ```
//! submit --nats / serve --nats --(validated RunMessage)--> stream CAPFLEET_RUNS (work queue)
//!                                                           capfleet.runs.<labels|any>
//! worker --label L <--pull (a consumer per label subject, shared; ack_wait = lease TTL)--
//!   claim lease      KV CAPFLEET_LEASES  run id -> {worker, since, beat}   (max_age = TTL)
//!   heartbeat TTL/3  update at the revision last written + "in progress" ack
//!   run              .capfleet/runs/<id>/ as `capfleet run`; journal lines published to
//!                    CAPFLEET_JOURNALS capfleet.journal.<id> (expected last subject seq)
//!   end              double ack (the server confirms), lease deleted at its revision
//!   artifacts        object store CAPFLEET_ARTIFACTS <id>/<n>, <id>.manifest (once acked)
//! presence TTL/3     KV CAPFLEET_WORKERS worker -> {labels, runs, draining, beat}
//! serve --nats       KV CAPFLEET_SUBMITTED id -> {fleet, labels, submitted}; reads
//!                    the lease, the journal (replay / ordered consumer), the artifacts
//! ```
//!
//! | file | what it does |
//! |---|---|
//! | this module | `NatsArgs` (`--nats URL[,URL...]`, `--nats-creds FILE`, `--nats-replicas N`; a token only from `CAPFLEET_NATS_TOKEN`), the connection (bounded wait, reconnecting for ever after), URLs shown without their user part |
//! | `app/src/nats/queue.rs` | the runs stream (work-queue retention, file storage, `replicas`), `RunMessage` (the run id, required labels, the submitter's `traceparent`, `POST /v1/runs`'s JSON body, the sandbox rule the worker obeys: missing = every session sandboxed), a subject per sorted label set, the durable pull consumers of every subset of a worker's labels, `Nats-Msg-Id` = run id (a retried submission is queued once) |
//! | `app/src/nats/lease.rs` | leases: claim = KV create (only when absent), renew = update at the last revision (compare-and-set; `WrongLastRevision` = lost), release = delete at that revision; the time left on another worker's lease |
//! | `app/src/nats/replica.rs` | the journal's replica: a publisher per run that follows the `ReplicaHook` (and polls every 250 ms: the app's own `run_ended` lines are written beside the engine's journal), reads the file's new whole lines from its offset and publishes each with `Nats-Expected-Last-Subject-Sequence` (and a `Nats-Msg-Id` per worker and offset, so a retried publish is stored once); `replay` reads a run's records back in order |
//! | `app/src/nats/presence.rs` | each worker's presence (labels, runs, draining, last beat) for `capfleet workers` |
//! | `app/src/nats/status.rs` | a run as any host reads it: the submission's note (KV `CAPFLEET_SUBMITTED`, put before the run is queued), its lease's holder, `follow` (an ordered consumer of the run's journal subject: each record once, in order, live) |
//! | `app/src/nats/artifacts.rs` | the object store `CAPFLEET_ARTIFACTS`: a run's artifacts (the `n`th file as `<id>/<n>`, then `<id>.manifest` = `[[path, bytes], …]`, so any path and a listed file is always there), and journal records over 512 KiB (`<id>.journal.<offset>`; the stream carries a `{"cap_nats_object": …}` pointer that `replay` and `follow` resolve) |
//! | `server/src/remote.rs` | `serve --nats`'s view of a run it does not have: `GET /v1/runs/{id}` (`runs::JournalRead` over the replicated journal: ended when its last `run_ended` is followed by no `lease_taken` / `resumed` / `handed_back`; else running while a lease is held, queued while none is) and the SSE stream (ids = positions in the journal; `end` once a `run_ended` is followed by nothing for 1 s); artifacts come through `artifacts::Source` |
//! | `src/cmd/worker/metrics.rs` | `capfleet_worker_*`: runs and leases held, queue depth (read with each presence beat), takeovers, runs let go of by how (`acked`, `handed_back`, `fenced`, `retried`, `passed`), lease renewals by result; served with the runs' metrics by `--metrics-addr` |
//! | `app/src/enqueue.rs` | `enqueue`: the submission validated in a scratch directory as a worker will (`Submission::load_fleet`: the findings with line and key; agents are the workers' to have), then queued; shared by `capfleet submit --nats` and `serve --nats`'s `POST /v1/runs` (201, state `queued`) |
//! | `src/cmd/worker/mod.rs` | the worker: a slot per `--max-runs` (a semaphore; it pulls only when a slot is free, so the consumers' own `max_ack_pending` is a wide bound over all workers), the consumers polled in turn (`fetch`, no wait; 200 ms pause after an empty round), the presence task, its telemetry (`--otlp`, `--trace-file`, `--metrics-addr`), the drain on SIGTERM/SIGINT/SIGHUP (no more pulls; the held runs get `--drain-grace` to finish, then `hand_back` is set) |
//! | `src/cmd/worker/hold.rs` | one run from pull to ack: the lease claimed (held elsewhere: handed back with a delay of the time left on that lease), the heartbeat, the fence, the hand-back at the drain's grace (`Stop::Cancel`, then a nak with a 1 s delay), the ack or nak, the lease released |
//! | `src/cmd/worker/execute.rs` | one run: the stream's copy of its journal read first; a new run gets `RunDir::create_named` with the submitter's id, `serve`'s `Submission` written and validated, `resume::remember_fleet`; a run the stream has records of is taken over (the records written as the local journal, then `resume::open_in` / `check`, a `lease_taken` record), one that had ended (delivered again: an ack lost in a leader election) is acked and its replayed copy removed; then `launch::in_process` with the replica's hook; the replica finished (what is left retried for up to 30 s, until fenced, so a run's end reaches the stream through an election); `Outcome::Ran` has its artifacts put once acked (`put_artifacts`, 30 s at most); an unrunnable submission gets `run_refused` and `run_ended` (exit 2) |
//! | `src/cmd/workers.rs`, `src/cmd/log.rs` | `capfleet workers --nats` (the presence bucket, the queue's depth); `capfleet log --nats URL RUN` prints the replicated journal |
//!
//! `launch::in_process` is what `serve`'s driver and the worker share: the
//! workspaces (provisioned, or reused when the run provisioned them here before), the
//! `RunSpec` (with the replica hook on its `JournalSpec`), `run_fleet_stoppable`, and a
//! failure before the router ran ending the journal (`run_ended`, exit 1).
//!
//! Why one consumer per label subject rather than per worker: a work-queue stream
//! allows only one consumer per subject (no overlap), so workers with the same label
//! sets share consumers and each bounds its own share. A run requiring `{big, gpu}` is
//! on `capfleet.runs.big.gpu`; a worker with labels `{big, gpu}` pulls from `any`,
//! `big`, `gpu` and `big.gpu` (at most 4 labels: 16 consumers).
//!
//! Failover. The consumers' `ack_wait` is the lease TTL and the heartbeat renews the
//! lease before it says "in progress", so a worker that dies (SIGKILL, host loss) has
//! its lease lapse no later than JetStream hands its run to another worker; that
//! worker's claim succeeds, it replays the journal from the stream into its own run
//! directory and resumes with `run --resume`'s recovery (no route twice, the budget
//! kept). Its workspaces are provisioned afresh: what the dead host had not committed
//! is gone with it; each session keeps its journaled sandbox (confined, its network,
//! its backend) with this host's paths, never the dead worker's (the engine's
//! `run::preamble`, journaled in the `resumed` record). A record the dead worker had
//! written but not yet published is lost
//! as a torn tail is on one host (the resume re-issues what it cut).
//!
//! Fencing. A renewal refused because the revision moved, or no renewal confirmed for a
//! whole TTL (a partition, or the process stopped and let go on), sets the run's fence:
//! the replica publishes nothing more, the run is cancelled (`Stop::Cancel("lease
//! lost")`: its agents stop), and the run is neither acked nor handed back. The new
//! holder's first published record (`lease_taken`) moves the subject's last sequence,
//! so a stale worker's publish is refused by JetStream itself even before its own
//! heartbeat notices. The fenced worker then sets its copy of the run aside
//! (`.capfleet/fenced/<id>-<ms>`): it may hold records JetStream never took (a
//! `run_ended` written while the cluster elected a leader), so it is never resumed from
//! (should the run come back to this worker, its journal is replayed from the stream)
//! nor listed as the run. A worker handed a run whose stream journal has ended (its
//! ack was lost, say) acks it and keeps no copy of it.
//!
//! JetStream calls a submission depends on are retried through a cluster's leader
//! election (`nats::retrying`, 30 s); a pull is bounded (2 s). The bench is
//! `benches/nats.rs` (dispatch with 1-3 workers, takeover time, publish overhead).
//!
//! Drain. SIGTERM stops the pulls; the runs held get `--drain-grace`. Past it the
//! worker's `hand_back` is set: each run is cancelled (`interrupted`), a `handed_back`
//! record follows its `run_ended` in the journal (so readers know it goes on), the
//! replica publishes both, the message is nak'ed with a 1 s delay and the lease
//! released, so another worker claims it at once and resumes from the replicated
//! journal (`resume` goes on after an `interrupted` end).
//!
//! Trace. `RunMessage::traceparent` (the submitter's) is adopted by each worker's
//! `worker.run` span; a worker that takes the run over (death, fence, hand-back) gets
//! the same message, so every worker's spans of the run are in the one trace.

pub(crate) mod artifacts;
pub mod lease;
pub mod presence;
pub mod queue;
pub mod replica;
pub(crate) mod status;

use std::path::PathBuf;

/// The environment variable a NATS token is read from (never from the command line).
pub(crate) const TOKEN_ENV: &str = "CAPFLEET_NATS_TOKEN";

/// How a verb reaches NATS.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// The NATS servers, comma-separated (nats://host:4222,nats://other:4222).
    #[arg(long = "nats", value_name = "URL[,URL...]")]
    pub urls: Option<String>,
    /// A NATS credentials file (JWT and NKey seed); a token is read from CAPFLEET_NATS_TOKEN.
    #[arg(long = "nats-creds", value_name = "FILE", requires = "urls")]
    pub creds: Option<PathBuf>,
    /// Copies JetStream keeps of capfleet's streams when it makes them (3 on a cluster).
    #[arg(
        long = "nats-replicas",
        value_name = "N",
        default_value_t = 1,
        requires = "urls"
    )]
    pub replicas: usize,
}

/// Why NATS could not be reached or used.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("--nats-creds {}: {source}", path.display())]
    Creds {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot connect to NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
    #[error("JetStream: {what}: {message}")]
    JetStream { what: String, message: String },
}

impl NatsError {
    /// A JetStream call that failed, said with what it was for.
    pub(crate) fn js(what: impl Into<String>, e: impl std::fmt::Display) -> NatsError {
        NatsError::JetStream {
            what: what.into(),
            message: e.to_string(),
        }
    }
}

/// A connection's JetStream context.
#[derive(Clone)]
pub struct Nats {
    pub js: async_nats::jetstream::Context,
}

impl Nats {
    /// The key-value bucket `name` (one value per key, each lapsing `ttl` after its
    /// last write), made when missing; an existing bucket keeps the TTL it was made
    /// with (returned beside it).
    pub(crate) async fn bucket(
        &self,
        name: &str,
        ttl: std::time::Duration,
        replicas: usize,
    ) -> Result<(async_nats::jetstream::kv::Store, std::time::Duration), NatsError> {
        let what = || format!("the bucket {name}");
        if let Ok(store) = self.js.get_key_value(name).await {
            let status = store.status().await.map_err(|e| NatsError::js(what(), e))?;
            return Ok((store, status.max_age()));
        }
        let store = self
            .js
            .create_key_value(async_nats::jetstream::kv::Config {
                bucket: name.to_owned(),
                history: 1,
                max_age: ttl,
                num_replicas: replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| NatsError::js(what(), e))?;
        Ok((store, ttl))
    }
}

impl NatsArgs {
    /// The URLs as they may be logged: each without a `user:password@` part.
    pub fn shown(urls: &str) -> String {
        urls.split(',')
            .map(|u| match (u.find("://"), u.rfind('@')) {
                (Some(s), Some(at)) if at > s => format!("{}{}", &u[..s + 3], &u[at + 1..]),
                (None, Some(at)) => u[at + 1..].to_owned(),
                _ => u.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Connect to `urls` as `name` (the client name the server lists).
    pub async fn connect(&self, urls: &str, name: &str) -> Result<Nats, NatsError> {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .retry_on_initial_connect()
            .max_reconnects(None);
        if let Some(path) = &self.creds {
            options = options
                .credentials_file(path)
                .await
                .map_err(|source| NatsError::Creds {
                    path: path.clone(),
                    source,
                })?;
        } else if let Some(token) = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()) {
            options = options.token(token);
        }
        let shown = Self::shown(urls);
        let servers = urls
            .split(',')
            .map(|u| {
                u.trim()
                    .parse::<async_nats::ServerAddr>()
                    .map_err(|e| NatsError::Connect {
                        urls: shown.clone(),
                        message: format!("`{}`: {e}", Self::shown(u.trim())),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let client = tokio::time::timeout(CONNECT_TIMEOUT, options.connect(servers))
            .await
            .map_err(|_| NatsError::Connect {
                urls: shown.clone(),
                message: format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            })?
            .map_err(|e| NatsError::Connect {
                urls: shown.clone(),
                message: e.to_string(),
            })?;
        // The first connection is made in the background (`retry_on_initial_connect`):
        // wait for it, within the same bound.
        let flushed = tokio::time::timeout(CONNECT_TIMEOUT, client.flush()).await;
        if !matches!(flushed, Ok(Ok(()))) {
            return Err(NatsError::Connect {
                urls: shown,
                message: format!("no server answered within {}s", CONNECT_TIMEOUT.as_secs()),
            });
        }
        Ok(Nats {
            js: async_nats::jetstream::new(client),
        })
    }
}

/// Retry `attempt` while JetStream does not answer (a cluster electing a new leader
/// after losing a node takes seconds), pausing 250 ms doubling to 2 s, for at most
/// [`RETRY_FOR`]; the last error if it never succeeds.
pub(crate) async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, NatsError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, NatsError>>,
{
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(250);
    loop {
        match attempt().await {
            Ok(t) => return Ok(t),
            Err(e) if start.elapsed() + pause > RETRY_FOR => return Err(e),
            Err(e) => {
                tracing::warn!("{e} (retried)");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
}

/// How long [`retrying`] goes on.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a verb waits for NATS to answer its connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::NatsArgs;

    #[test]
    fn urls_are_shown_without_their_secrets() {
        assert_eq!(
            NatsArgs::shown("nats://u:secret@a:4222,nats://b:4222,tok@c:1"),
            "nats://a:4222,nats://b:4222,c:1"
        );
    }
}
