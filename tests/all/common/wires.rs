//! A fleet session on each of the simulator's wires (stream-json, ACP, PTY) whose
//! agent leaves a grandchild behind: the stop tests (`stop_signals`) and the
//! orphan tests (`durable`) check that none of it survives.

use crate::common::{self, EnvMarker};

/// The binding a session's simulator speaks.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire {
    StreamJson,
    Acp,
    Pty,
}

impl Wire {
    pub(crate) const ALL: [Wire; 3] = [Wire::StreamJson, Wire::Acp, Wire::Pty];
}

/// A `[[sessions]]` entry on `wire` following `script`, whose agent leaves a
/// grandchild behind (a `sleep` whose parent exited: re-parented, still in the
/// agent's group and marked).
pub(crate) fn session(name: &str, wire: Wire, script: &str, marker: &EnvMarker) -> String {
    let (k, v) = marker.pair();
    let (agent, mode) = match wire {
        Wire::StreamJson => ("sim".to_owned(), "stream-json"),
        Wire::Acp => (common::support("sim-acp.toml").display().to_string(), "acp"),
        Wire::Pty => ("sim-tui".to_owned(), "tui"),
    };
    // `"$@"`: the flags the binding appends (model, resume, …).
    let line = format!(
        "(sleep 300 &); exec {} sim --mode {mode} \\\"$@\\\"",
        common::BIN
    );
    format!(
        "[[sessions]]\nname = \"{name}\"\nagent = \"{agent}\"\nscript = \"{script}\"\n\
         argv = [\"sh\", \"-c\", \"{line}\", \"sh\"]\nenv = {{ {k} = \"{v}\" }}\n"
    )
}
