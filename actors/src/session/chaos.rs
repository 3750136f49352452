//! A chaos run's faults on this session: each turn attempt's seeded decision (taken
//! at its prompt, so the fault lands mid-turn, whatever the timing) and the run's
//! timed faults sent here. A fault is journaled (a `chaos` record on the session's
//! stream, its current turn) and a span (a child of the turn's) before it is applied,
//! and applied only to this session's own agent: a signal fault by its driver, to the
//! process group the driver spawned.

use super::SessionSpec;
use super::machine::Core;
use crate::chaos::conn::{ConnFault, ConnFaults};
use crate::chaos::interpose::metrics::IoMetrics;
use crate::chaos::interpose::{ByteFault, ByteFaults};
use crate::chaos::signals::SignalFault;
use crate::chaos::spec::ChaosSpec;
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
        let launch = &self.spec.launch;
        let apply = match fault.reach() {
            Reach::Signal => SignalFault::of(fault, &spec.params).map(Apply::Signal),
            Reach::Bytes => ByteFault::of(fault, &spec.params)
                .zip(launch.byte_faults.clone())
                .map(|(f, h)| Apply::Bytes(f, h)),
            Reach::Connection => ConnFault::of(fault, &spec.params)
                .zip(launch.conn_faults.clone())
                .map(|(f, h)| Apply::Conn(f, h)),
            Reach::Orchestrator => None,
        };
        let Some(apply) = apply else {
            return;
        };
        let detail = match &apply {
            Apply::Signal(signal) => signal.describe(None),
            Apply::Bytes(f, _) => format!("{f:?}"),
            Apply::Conn(f, _) => format!("{f:?}"),
        };
        self.spans.chaos(fault, seed_pos, &detail);
        self.publish(EventBody::Chaos {
            fault,
            target: self.spec.name.clone(),
            seed_pos,
            detail,
        })
        .await;
        match apply {
            Apply::Signal(signal) => self.slot.send(DriverMsg::Chaos(signal)),
            Apply::Bytes(f, handle) => handle.inject(f),
            Apply::Conn(f, handle) => handle.inject(f),
        }
    }
}

/// How a fault reaches this session's agent.
enum Apply {
    Signal(SignalFault),
    Bytes(ByteFault, ByteFaults),
    Conn(ConnFault, ConnFaults),
}

/// A chaos run's byte and connection faults on session `spec`: the handles its driver
/// installs (the interposer on its agent's pipes or terminal, the proxy before its
/// A2A peer), only when the run has faults of that reach for a session of its
/// binding; the byte faults seeded from the run's seed and the session's name.
pub fn install_chaos_io(spec: &mut SessionSpec, chaos: &ChaosSpec, metrics: Option<&IoMetrics>) {
    let has = |reach: Reach| {
        chaos
            .rules
            .iter()
            .any(|r| r.kind.reach() == reach && r.kind.hits(spec.binding))
    };
    let (bytes, conn) = (has(Reach::Bytes), has(Reach::Connection));
    let urn = spec.urn().to_owned();
    if bytes {
        let seed = chaos.byte_seed(&spec.name);
        spec.launch.byte_faults = Some(match metrics {
            Some(m) => ByteFaults::with_metrics(urn.clone(), seed, m.clone()),
            None => ByteFaults::new(urn.clone(), seed),
        });
    }
    if conn {
        spec.launch.conn_faults = Some(match metrics {
            Some(m) => ConnFaults::with_metrics(urn, m.clone()),
            None => ConnFaults::new(urn),
        });
    }
}
