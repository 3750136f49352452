//! Deliveries as the journal keeps them: each keyed (`<to>#<n>`, the target's n-th
//! delivery of the run), on disk before the session gets it, and its end recorded
//! with the turn it ran (`delivered`).

use super::Core;
use crate::session::{SessionError, TurnResult};
use capfleet_wire::events::EventBody;

impl Core {
    /// The idempotency key of the next delivery to `to`: `<to>#<n>`, its n-th.
    pub(super) fn next_key(&mut self, to: &str) -> String {
        let n = self.keys.entry(to.to_owned()).or_default();
        *n += 1;
        format!("{to}#{n}")
    }

    /// Wait for everything recorded so far to be on disk.
    pub(super) async fn make_durable(&self) {
        if let Some(d) = &self.durable {
            d.sync().await;
        }
    }

    /// The delivery `key` to `session` ended: the turn it ran and how, or why none ran.
    pub(super) async fn record_delivered(
        &mut self,
        key: String,
        session: &str,
        result: &Result<TurnResult, SessionError>,
    ) {
        if let Some(r) = self.replay.as_mut()
            && r.delivered_on_disk(&key)
        {
            return;
        }
        let (turn, outcome, error) = match result {
            Ok(r) => (Some(r.turn), Some(r.outcome), None),
            Err(e) => (None, None, Some(e.to_string())),
        };
        self.record(EventBody::Delivered {
            key,
            to: session.to_owned(),
            turn,
            outcome,
            error,
        })
        .await;
    }
}
