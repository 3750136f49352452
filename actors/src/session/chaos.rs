//! A chaos run's faults on this session: each turn attempt's seeded decision (taken
//! at its prompt, so the fault lands mid-turn, whatever the timing) and the run's
//! timed faults sent here. A fault is journaled (a `chaos` record on the session's
//! stream, its current turn) and a span (a child of the turn's) before it is applied,
//! and applied only to this session's own agent: a signal fault by its driver, to the
//! process group the driver spawned.

use super::machine::Core;
use crate::chaos::signals::SignalFault;
use crate::chaos::{FaultKind, Reach};
use crate::driver::DriverMsg;
use crate::events::EventBody;

impl Core {
    /// The seeded fault of attempt `attempt` of turn `turn`, if the run has one.
    pub(super) async fn chaos_on_attempt(&mut self, turn: u32, attempt: u32) {
        let Some(spec) = &self.spec.chaos else {
            return;
        };
        if let Some(d) = spec.on_attempt(&self.spec.name, self.spec.binding, turn, attempt) {
            self.inject(d.kind, d.seed_pos).await;
        }
    }

    /// Journal fault `fault` (number `seed_pos` of the seeded sequence), then apply
    /// it to this session's agent. Nothing without an agent (it is starting): the
    /// fault had nobody to hit.
    pub(super) async fn inject(&mut self, fault: FaultKind, seed_pos: u64) {
        let Some(spec) = self.spec.chaos.clone() else {
            return;
        };
        if self.slot.driver.is_none() || self.state.is_terminal() || self.closing {
            tracing::debug!(urn = %self.bus.urn(), %fault, seed_pos, "no agent to hit; chaos fault skipped");
            return;
        }
        let apply = match fault.reach() {
            Reach::Signal => SignalFault::of(fault, &spec.params),
            Reach::Bytes | Reach::Connection | Reach::Orchestrator => None,
        };
        let Some(signal) = apply else {
            return;
        };
        let pgid = self.slot.group.load(std::sync::atomic::Ordering::Relaxed);
        let detail = signal.describe((pgid > 0).then_some(pgid));
        self.spans.chaos(fault, seed_pos, &detail);
        self.publish(EventBody::Chaos {
            fault,
            target: self.spec.name.clone(),
            seed_pos,
            detail,
        })
        .await;
        self.slot.send(DriverMsg::Chaos(signal));
    }
}
