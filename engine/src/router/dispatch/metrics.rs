//! What the router tells the run's metrics: the deliveries waiting.

use super::Core;
use crate::telemetry::metrics::MailboxLabels;

impl Core {
    /// Deliveries waiting (queues and admission), for the metrics.
    pub(in crate::router) fn note_pending(&self) {
        if let Some(m) = &self.telemetry.metrics {
            let queued: usize = self.slots.values().map(|s| s.queue.len()).sum();
            let pending = queued + self.admission.len();
            m.mailbox_depth
                .get_or_create(&MailboxLabels {
                    mailbox: "router_pending".into(),
                })
                .set(i64::try_from(pending).unwrap_or(i64::MAX));
        }
    }
}
