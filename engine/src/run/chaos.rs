//! A chaos run's part of a fleet run (`[chaos]`, `--chaos`): each session given the
//! spec (its per-turn faults) and the interposer's handles its faults need, and the
//! task of the timed faults, aborted when the run ends.

use std::sync::Arc;

use ractor::ActorRef;
use tracing::Instrument;

use super::timed::{self, Targets};
use crate::chaos::spec::ChaosSpec;
use crate::resume::SelfKills;
use crate::router::RouterMsg;
use crate::session::SessionSpec;
use crate::telemetry::metrics::Metrics;
use capfleet_wire::registry::Binding;

/// The chaos of one run, its sessions prepared, before the run's task starts.
pub(super) struct RunChaos {
    spec: Arc<ChaosSpec>,
    /// Every session's name and binding: the timed faults' targets.
    names: Vec<(String, Binding)>,
    /// The sessions that are up (a fault due before its session is up is not sent).
    up: Targets,
    /// The `self_kill`s of the run so far (a resumed run goes on after them).
    self_kills: SelfKills,
}

/// Give each of `sessions` the spec and its interposer's handles (counted in
/// `metrics` when the run serves them); `None` for a run without chaos.
pub(super) fn prepare(
    spec: Option<Arc<ChaosSpec>>,
    sessions: &mut [SessionSpec],
    metrics: Option<&Metrics>,
    self_kills: SelfKills,
) -> Option<RunChaos> {
    let spec = spec?;
    for s in sessions.iter_mut() {
        let who = (s.name.as_str(), s.binding);
        crate::chaos::apply::install(&spec, who, &mut s.launch, metrics.map(|m| &m.chaos_io));
        s.chaos = Some(spec.clone());
    }
    Some(RunChaos {
        names: sessions
            .iter()
            .map(|s| (s.name.clone(), s.binding))
            .collect(),
        spec,
        up: Targets::default(),
        self_kills,
    })
}

impl RunChaos {
    /// Where the sessions' start registers each session as it comes up.
    pub(super) fn targets(&self) -> Targets {
        self.up.clone()
    }

    /// Start the timed faults (and `self_kill`) under the run's `span`: they go until
    /// the returned guard is dropped with the run.
    pub(super) fn start(self, router: ActorRef<RouterMsg>, span: &tracing::Span) -> AbortOnDrop {
        let timed = timed::drive(self.spec, self.names, self.up, router, self.self_kills);
        AbortOnDrop(tokio::spawn(timed.instrument(span.clone())))
    }
}

/// A task aborted when this is dropped.
pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
