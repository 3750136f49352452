//! A chaos run's `self_kill` (capfleet killing itself at a seeded moment, to test
//! resume): its record goes on the router's stream, synced before the kill.

use super::Core;
use capfleet_wire::events::EventBody;

impl Core {
    /// A chaos `self_kill`'s record, synced before the kill. It is no decision of the
    /// router's: a replay never derives it again, so it is never skipped (and
    /// `resume::recover` does not count it among the records to skip).
    pub(in crate::router) async fn record_self_kill(&mut self, seed_pos: u64, detail: String) {
        let body = EventBody::Chaos {
            fault: capfleet_wire::chaos::FaultKind::SelfKill,
            target: capfleet_wire::chaos::SELF_TARGET.into(),
            seed_pos,
            detail,
            group: None,
        };
        self.bus.publish(None, body).await;
        if let Some(d) = &self.durable {
            d.sync().await;
        }
    }
}
