//! The bounded path from a driver to its session.
//!
//! ractor mailboxes are unbounded, so agent output never goes into one freely: every
//! batch holds a credit (a semaphore permit) until the session has handled it. With
//! all credits taken, the driver's reader waits, the agent's pipe fills and the agent
//! blocks on write — memory stays flat however much it prints.

use std::sync::Arc;

use ractor::ActorRef;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::DriverOutput;
use crate::session::SessionMsg;

/// Batches in flight between one driver and its session.
pub const DEFAULT_CREDITS: usize = 32;
/// Outputs per batch at most (a reader sends what one read produced, up to this).
pub const MAX_BATCH: usize = 512;

/// A credit-bounded sender of output batches, tagged with the driver generation so a
/// session ignores what a replaced driver still had in flight.
#[derive(Clone)]
pub struct OutputSink {
    generation: u64,
    session: ActorRef<SessionMsg>,
    credits: Arc<Semaphore>,
}

/// Proof that a batch holds a credit; dropping it returns the credit.
#[derive(Debug)]
pub struct Credit {
    _permit: OwnedSemaphorePermit,
}

impl OutputSink {
    pub fn new(generation: u64, session: ActorRef<SessionMsg>, credits: Arc<Semaphore>) -> Self {
        OutputSink {
            generation,
            session,
            credits,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Send one batch, waiting for a credit. `false` when the session is gone.
    pub async fn send(&self, batch: Vec<DriverOutput>) -> bool {
        if batch.is_empty() {
            return true;
        }
        let Ok(permit) = self.credits.clone().acquire_owned().await else {
            return false;
        };
        self.session
            .cast(SessionMsg::Output {
                generation: self.generation,
                batch,
                credit: Credit { _permit: permit },
            })
            .is_ok()
    }

    /// Wait (up to `max`) until the session has handled every batch sent so far:
    /// a driver about to fail calls it so its last events (`cap.error`) reach the
    /// session before the supervision event does (ractor delivers those first).
    pub async fn flushed(&self, max: std::time::Duration) {
        let all = u32::try_from(DEFAULT_CREDITS).unwrap_or(u32::MAX);
        let _permits = tokio::time::timeout(max, self.credits.acquire_many(all)).await;
    }

    /// Send one output.
    pub async fn send_one(&self, output: DriverOutput) -> bool {
        self.send(vec![output]).await
    }
}
