//! A chaos run's faults on this session: each turn attempt's seeded decision (taken
//! at its prompt, so the fault lands in the turn, whatever the timing) and the run's
//! timed faults sent here. An attempt's byte fault is armed just before its prompt is
//! written, so it meets the turn's first frames (and the prompt's write) whatever the
//! agent's speed — armed after, it met whichever frame came next, the turn's result
//! frame on a fast agent; every other fault once the prompt is out, the turn in
//! flight. A fault is journaled (a `chaos` record on the session's
//! stream, its current turn) and a span (a child of the turn's) before it is applied,
//! and applied only to this session's own agent: a signal fault by its driver, to the
//! process group the driver spawned; a byte fault through the session's interposer
//! (`LaunchSpec::byte_faults`), a connection fault through its A2A fault proxy
//! (`LaunchSpec::conn_faults`).

use super::machine::Core;
use crate::chaos::apply;
use capfleet_wire::chaos::SignalFault;
use capfleet_wire::chaos::{ByteFault, ByteFaults};
use capfleet_wire::chaos::{ConnFault, ConnFaults};
use capfleet_wire::chaos::{FaultKind, Reach};
use capfleet_wire::driver::DriverMsg;
use capfleet_wire::events::EventBody;

/// How a fault reaches the agent.
enum Apply {
    /// Through the driver, to its own process group.
    Signal(SignalFault),
    /// Through the session's interposer.
    Bytes(ByteFaults, ByteFault),
    /// Through the session's A2A fault proxy.
    Conn(ConnFaults, ConnFault),
}

/// Where an attempt is when its fault is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Moment {
    /// Its prompt is about to be written: a byte fault's moment.
    BeforePrompt,
    /// Its prompt is out: the other faults'.
    TurnInFlight,
}

impl Core {
    /// The seeded fault of attempt `attempt` of turn `turn`, if the run has one and
    /// this is its moment.
    pub(super) async fn chaos_on_attempt(&mut self, turn: u32, attempt: u32, now: Moment) {
        let Some(spec) = &self.spec.chaos else {
            return;
        };
        let Some(d) = spec.on_attempt(&self.spec.name, self.spec.binding, turn, attempt) else {
            return;
        };
        let moment = match d.kind.reach() {
            Reach::Bytes => Moment::BeforePrompt,
            _ => Moment::TurnInFlight,
        };
        if moment == now {
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
        let launch = self.slot.launch.clone();
        let mut group = None;
        let (apply, detail) = match fault.reach() {
            Reach::Signal => {
                let Some(signal) = apply::signal_fault(fault, &spec.params) else {
                    return;
                };
                let pgid = self.slot.group.load(std::sync::atomic::Ordering::Relaxed);
                group = (pgid > 0).then_some(pgid);
                let detail = signal.describe(group);
                (Apply::Signal(signal), detail)
            }
            Reach::Bytes => {
                let (Some(handle), Some((f, detail))) = (
                    launch.byte_faults.clone(),
                    apply::byte_fault(fault, &spec.params),
                ) else {
                    return;
                };
                (Apply::Bytes(handle, f), detail)
            }
            Reach::Connection => {
                let (Some(handle), Some((f, detail))) = (
                    launch.conn_faults.clone(),
                    apply::conn_fault(fault, &spec.params),
                ) else {
                    return;
                };
                (Apply::Conn(handle, f), detail)
            }
            Reach::Orchestrator => return,
        };
        self.spans.chaos(fault, seed_pos, &detail);
        self.publish(EventBody::Chaos {
            fault,
            target: self.spec.name.clone(),
            seed_pos,
            detail,
            group,
        })
        .await;
        // Whatever the attempt now fails of is the fault's doing, not the turn's.
        self.book.attempt_cut();
        match apply {
            Apply::Signal(signal) => self.slot.send(DriverMsg::Chaos(signal)),
            Apply::Bytes(handle, f) => handle.inject(f),
            Apply::Conn(handle, f) => handle.inject(f),
        }
    }
}
