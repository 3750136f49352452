//! Sessions whose agent runs unattended (`tool_permission = "none"`, coding §7.2:
//! "Users MUST be warned prominently"): `run` and `chat` say so before the first
//! agent starts, and `run`'s summary repeats it with the count of audited actions.

use capfleet_engine::manifest::ToolPermission;
use capfleet_engine::session::SessionSpec;

use crate::style::Style;

/// Is this session's agent unattended?
pub fn is_unattended(spec: &SessionSpec) -> bool {
    let coding = spec.launch.manifest.capabilities.coding.as_ref();
    coding.is_some_and(|c| c.tool_permission == ToolPermission::None)
}

/// The warning for an unattended session, printed before anything runs.
pub fn warn(spec: &SessionSpec, style: Style) {
    let line = format!(
        "{} session {} (agent {}) has tool_permission = \"none\": its terminal commands and \
         file writes run without asking; each is journaled as an `audit` record",
        style.warn("UNATTENDED:"),
        spec.name,
        spec.launch.manifest.agent.name,
    );
    eprintln!(
        "{}",
        crate::human::fit::Fit::stderr_columns().wrap(&line, 4)
    );
}
