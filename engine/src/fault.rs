//! Disk faults: a write of the run's record — the journal, a transcript, an artifact —
//! that failed (ENOSPC, EIO, a read-only file system). Nothing is lost silently: the
//! writer reports the fault (what, where, the OS error, what it kept) to whoever runs
//! the fleet, which fails the run with it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

/// How long a writer keeps retrying a write that failed for want of a descriptor
/// ([`out_of_descriptors`]) before it counts as a fault.
pub(crate) const DESCRIPTOR_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// `EMFILE` or `ENFILE`: no descriptor free now (the process's or the system's). A
/// transient want, not a broken disk: the write is tried again once one is free.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Faults reported at most this many at once (each writer reports once).
pub const FAULTS_CAPACITY: usize = 16;

/// A failed write.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot write the {what} {}: {error}", path.display())]
pub struct DiskFault {
    /// `journal`, `transcript` or `artifact`.
    pub what: &'static str,
    pub path: PathBuf,
    pub error: Arc<std::io::Error>,
    /// What is on disk despite it (e.g. "412 records, 96 KiB, synced").
    pub kept: String,
}

/// Where faults go.
pub(crate) type FaultSink = mpsc::Sender<DiskFault>;

/// Report `fault` to `sink` (if any) and the log.
pub(crate) fn report(sink: Option<&FaultSink>, fault: DiskFault) {
    tracing::error!(path = %fault.path.display(), kept = %fault.kept, "{fault}");
    if let Some(tx) = sink
        && tx.try_send(fault).is_err()
    {
        tracing::error!("the disk fault could not be reported to the run");
    }
}
