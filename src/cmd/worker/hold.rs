//! One run held by this worker, from its pull to its ack: the lease claimed first
//! (only its holder runs the run; a run whose lease another worker holds goes back
//! to the queue, offered again after half a TTL), then a heartbeat every third of
//! the TTL that renews the lease and tells JetStream the run is in progress, the
//! run itself ([`super::execute`]), and at its end the ack (waiting for the server's
//! confirmation) and the lease given up.
//!
//! Fencing: a renewal refused because the lease's revision moved (another worker
//! claimed the run), or no renewal confirmed for a whole TTL (this worker cut off,
//! or stopped), fences the run here: its replica publishes nothing more, its agents
//! are stopped (`Stop::Cancel`), and it is neither acked nor handed back (it is the
//! other worker's now).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, AckKind};
use capfleet_engine::run::Stop;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};

use super::Worker;
use super::execute::{self, Outcome};
use capfleet_app::nats::lease::Lease;
use capfleet_app::nats::queue::RunMessage;

/// A handed-back run is offered again this long after the other lease's lapse
/// (JetStream removes an expired key within a moment).
const LAPSE_SLACK: Duration = Duration::from_millis(200);
/// A run handed back by a draining worker is offered again after this (its lease
/// given up at once).
const HAND_BACK_DELAY: Duration = Duration::from_secs(1);

/// Hold `message`'s run to its end; the slot is freed at the end.
pub(super) async fn hold(
    worker: Arc<Worker>,
    message: jetstream::Message,
    _slot: OwnedSemaphorePermit,
) {
    let run: RunMessage = match serde_json::from_slice(&message.payload) {
        Ok(r) => r,
        Err(e) => {
            // Not a run any worker could read: taken off the queue, said.
            tracing::error!("a queued message is not a run ({e}): dropped");
            if let Err(e) = message.ack_with(AckKind::Term).await {
                tracing::error!("dropping it: {e}");
            }
            return;
        }
    };
    let ttl = worker.leases.ttl;
    let lease = match worker.leases.claim(&run.id, &worker.name).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            // Offered again once that lease would lapse (it is renewed if its holder
            // lives: then this repeats, a TTL apart).
            let lapse = match worker.leases.remaining(&run.id).await {
                Ok(Some(d)) => d,
                Ok(None) => Duration::ZERO,
                Err(e) => {
                    tracing::warn!(run = %run.id, "{e}");
                    ttl / 2
                }
            };
            let delay = (lapse + LAPSE_SLACK).min(ttl);
            tracing::info!(run = %run.id, ?delay, "another worker holds the run's lease: handed back");
            worker.metrics.ran("passed");
            back(&message, &run.id, delay).await;
            return;
        }
        Err(e) => {
            tracing::error!(run = %run.id, "{e}");
            back(&message, &run.id, ttl / 2).await;
            return;
        }
    };
    worker.hold(&run.id, true);
    worker.metrics.leases_held.inc();
    let (fence, fenced) = watch::channel(false);
    let (stop, stops) = mpsc::channel(2);
    let (end_beat, beat_ended) = oneshot::channel();
    let beat = tokio::spawn(heartbeat(
        worker.clone(),
        lease,
        message.clone(),
        fence.clone(),
        beat_ended,
    ));
    // A fence, from the heartbeat or the replica, stops the run's agents; so does
    // the end of the drain's grace (the run is handed back).
    let stopper = {
        let mut fenced = fenced.clone();
        let mut hand_back = worker.hand_back.subscribe();
        tokio::spawn(async move {
            let why = tokio::select! {
                Ok(_) = fenced.wait_for(|f| *f) => "lease lost",
                Ok(_) = hand_back.wait_for(|h| *h) => "drained: handed back",
                else => return,
            };
            let _run_ended = stop.send(Stop::Cancel(why.into())).await;
        })
    };
    let outcome = execute::execute(&worker, &run, stops, fence).await;
    stopper.abort();
    let _beat_gone = end_beat.send(());
    let lease = beat.await.ok().flatten();
    worker.hold(&run.id, false);
    if *fenced.borrow() || lease.is_none() {
        tracing::warn!(run = %run.id, "fenced: the run is another worker's now; nothing more is written for it here");
        worker.metrics.ran("fenced");
        if lease.is_some() {
            worker.metrics.leases_held.dec();
        }
        execute::set_aside(&worker, &run.id);
        return;
    }
    match outcome {
        Outcome::Journaled => {
            ack(&worker, &message, &run.id).await;
        }
        Outcome::Ran(dir) => {
            if ack(&worker, &message, &run.id).await {
                execute::put_artifacts(&worker, &dir).await;
            }
        }
        // Its outcome could not be written: another worker may do better.
        Outcome::NotJournaled => {
            worker.metrics.ran("retried");
            back(&message, &run.id, ttl).await;
        }
        Outcome::HandedBack => {
            tracing::info!(run = %run.id, "handed back: the drain's grace is over");
            worker.metrics.ran("handed_back");
            back(&message, &run.id, HAND_BACK_DELAY).await;
        }
    }
    if let Some(lease) = lease {
        worker.metrics.leases_held.dec();
        if let Err(e) = worker.leases.release(&lease).await {
            tracing::warn!(run = %run.id, "{e}");
        }
    }
}

/// Ack `message` (the server confirms): whether it was.
async fn ack(worker: &Worker, message: &jetstream::Message, run: &str) -> bool {
    match message.double_ack().await {
        Ok(()) => {
            tracing::info!(run = %run, "run acked");
            worker.metrics.ran("acked");
            true
        }
        Err(e) => {
            tracing::error!(run = %run, "acking the run: {e}");
            false
        }
    }
}

/// Hand `message` back to the queue, offered again after `delay`.
async fn back(message: &jetstream::Message, run: &str, delay: Duration) {
    if let Err(e) = message.ack_with(AckKind::Nak(Some(delay))).await {
        tracing::error!(run = %run, "handing the run back: {e}");
    }
}

/// Renew `lease` and say "in progress" every third of its TTL until `ended`; the
/// lease at the end, or none once lost (then `fence` is set).
async fn heartbeat(
    worker: Arc<Worker>,
    mut lease: Lease,
    message: jetstream::Message,
    fence: watch::Sender<bool>,
    mut ended: oneshot::Receiver<()>,
) -> Option<Lease> {
    let leases = &worker.leases;
    let mut tick = tokio::time::interval(leases.ttl / 3);
    tick.tick().await;
    let mut confirmed = Instant::now();
    loop {
        tokio::select! {
            _ = &mut ended => return Some(lease),
            _ = tick.tick() => {}
        }
        // Past a TTL since the last confirmed renewal, another worker may hold the
        // run already: fenced, whatever NATS says now (this also catches a worker
        // that was stopped and has just been let go on).
        if confirmed.elapsed() > leases.ttl {
            tracing::error!(run = %lease.run, "no renewal of the lease confirmed for {:?}: fenced", leases.ttl);
            fence.send_replace(true);
            worker.metrics.leases_held.dec();
            return None;
        }
        match leases.renew(&mut lease).await {
            Ok(()) => {
                worker.metrics.renewed("ok");
                confirmed = Instant::now();
                if let Err(e) = message.ack_with(AckKind::Progress).await {
                    tracing::warn!(run = %lease.run, "telling JetStream the run is in progress: {e}");
                }
            }
            Err(Ok(lost)) => {
                tracing::error!("{lost}: fenced");
                worker.metrics.renewed("lost");
                worker.metrics.leases_held.dec();
                fence.send_replace(true);
                return None;
            }
            Err(Err(e)) => {
                worker.metrics.renewed("failed");
                tracing::warn!(run = %lease.run, "{e} (retried)");
            }
        }
    }
}
