//! What a session of a resumed run is given to go on from: read from the journal by
//! the resume (`crate::resume`, a floor above), handed down in its spec.

use super::tools_run::ToolsRun;

/// Where a session of a resumed run goes on from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionRecovery {
    /// The last sequence number of its stream on disk.
    pub seq: u64,
    /// Its highest turn number.
    pub last_turn: u32,
    /// Its turns that ended and are replayed (a cut one is not: it runs again).
    pub ended: u32,
    /// The agent's session to resume.
    pub resume_id: Option<String>,
    /// Its last turn was cut (never ended, or ended by a stop): the assistant text
    /// it had produced.
    pub interrupted: Option<String>,
    /// The tool calls that cut turn had started (their changes may be in the
    /// worktree): named in its re-issued prompt where the agent cannot resume.
    pub interrupted_tools: ToolsRun,
}
