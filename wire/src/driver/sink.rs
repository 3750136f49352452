//! The bounded path from a driver to its session.
//!
//! ractor mailboxes are unbounded, so agent output never goes into one freely: every
//! batch holds a credit (a semaphore permit) until the session has handled it. With
//! all credits taken, the driver's reader waits, the agent's pipe fills and the agent
//! blocks on write — memory stays flat however much it prints.
//!
//! The sink reaches its session through a narrow handle (ractor's `DerivedActorRef`
//! of [`OutputBatch`]): a driver can send its session outputs and nothing else, and
//! knows no session type.

use std::sync::Arc;

use ractor::DerivedActorRef;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::DriverOutput;

/// Batches in flight between one driver and its session.
pub const DEFAULT_CREDITS: usize = 32;
/// Outputs per batch at most (a reader sends what one read produced, up to this).
pub(crate) const MAX_BATCH: usize = 512;

/// A credit-bounded sender of output batches, tagged with the driver generation so a
/// session ignores what a replaced driver still had in flight.
#[derive(Clone)]
pub struct OutputSink {
    generation: u64,
    session: DerivedActorRef<OutputBatch>,
    credits: Arc<Semaphore>,
}

/// Outputs of the driver of `generation`, holding a flow-control credit until the
/// session has handled them. Only a sink makes one (a [`Credit`] comes from nowhere
/// else).
#[derive(Debug)]
pub struct OutputBatch {
    pub generation: u64,
    pub outputs: Vec<DriverOutput>,
    pub credit: Credit,
}

/// Proof that a batch holds a credit; dropping it returns the credit.
#[derive(Debug)]
pub struct Credit {
    _permit: OwnedSemaphorePermit,
}

impl OutputSink {
    /// A sink for the driver of `generation`, sending to `session` (its actor's
    /// `get_derived()`) within `credits`.
    pub fn new(
        generation: u64,
        session: DerivedActorRef<OutputBatch>,
        credits: Arc<Semaphore>,
    ) -> Self {
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
            .cast(OutputBatch {
                generation: self.generation,
                outputs: batch,
                credit: Credit { _permit: permit },
            })
            .is_ok()
    }

    /// Send one output.
    pub async fn send_one(&self, output: DriverOutput) -> bool {
        self.send(vec![output]).await
    }
}
