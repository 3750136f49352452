//! The session's hooks on its agent's events, before they are recorded and
//! published: usage reported without a cost gets an estimate from the session's
//! prices (marked in `_meta`), an artifact's large content leaves the event for a
//! file in the run's artifact store (a file URI in its place), and a permission
//! request's risk is raised to what its content warrants ([`capfleet_wire::bindings::risk`]).

use std::path::PathBuf;
use std::sync::Arc;

use super::SessionSpec;
use crate::pricing::Pricing;
use crate::protocol::CapEvent;
use crate::workspace::ArtifactStore;

/// The hooks a session runs on every agent event.
pub(super) struct Hooks {
    /// The session's name (its artifacts' directory).
    name: String,
    pricing: Option<Arc<Pricing>>,
    artifacts: Option<Arc<ArtifactStore>>,
    /// The session's workspace, resolved: paths outside it raise a request's risk.
    workspace: PathBuf,
}

impl Hooks {
    pub(super) fn new(spec: &SessionSpec) -> Self {
        Hooks {
            name: spec.name.clone(),
            pricing: spec.pricing.clone(),
            artifacts: spec.artifacts.clone(),
            workspace: std::fs::canonicalize(&spec.launch.config.cwd)
                .unwrap_or_else(|_| PathBuf::from(&spec.launch.config.cwd)),
        }
    }

    /// Run the hooks on `event` of the session `urn`. A store failure is logged (and
    /// reported to the run by the store): the event still goes out, content inline.
    pub(super) fn apply(&self, urn: &str, event: &mut CapEvent) {
        capfleet_wire::bindings::risk::rate(event, &self.workspace);
        match (event, &self.pricing, &self.artifacts) {
            (CapEvent::Usage(u), Some(pricing), _) => {
                pricing.estimate(u);
            }
            (CapEvent::Artifact(a), _, Some(store)) => {
                if let Err(e) = store.keep(&self.name, a) {
                    tracing::error!(urn = %urn, "cannot store the agent's artifact: {e}");
                }
            }
            _ => {}
        }
    }
}
