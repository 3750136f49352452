//! The contract between a session and its driver, written once.
//!
//! [`spawn`] starts the driver of a [`Binding`]: one actor type, the skeleton
//! [`actor::Driver`], generic over the binding's [`wire::Wire`] (stream-json,
//! `codex exec`, ACP-stdio, A2A and PTY in this build; gRPC is a binding this build
//! has no driver for, and [`SUPPORTED`] — which binding selection reads — says so
//! from the same table).
//! Every driver speaks [`DriverMsg`] in and [`DriverOutput`] out.
//!
//! A driver owns its agent's process group (or connection). It turns the agent's wire
//! into [`DriverOutput`]s that travel to the session through an [`OutputSink`]:
//! batches bounded by credits, so a flooding agent is slowed down (its pipe fills)
//! instead of growing a mailbox. When the agent dies the driver emits `cap.error`
//! and *fails* with an [`ExitCause`]; the session, its supervisor, applies the
//! restart policy. The agent is reached in one of three [`Shape`]s: one long-lived
//! process per session, one process per turn, or a connection with no process.
//!
//! # Adding a binding
//!
//! A binding is three places, and the compiler finds the rest:
//!
//! 1. its mapping, pure (no I/O, testable with plain values): `bindings/<name>/`,
//!    frames in, CAP events out;
//! 2. its driver: a [`wire::Wire`] in `driver/<name>.rs` (or `driver/<name>/`, with
//!    what only it needs, as `a2a::connect_shape`);
//! 3. its variant of [`Binding`] (`registry/binding.rs`: its name, its place in the
//!    spec's priority, what of a manifest selects it).
//!
//! The new variant then does not compile until each table of this contract has its
//! arm: `driver_of` (which driver; [`SUPPORTED`] follows), [`natural_shape`] (how
//! its agent is reached: a process per session, per turn, or a connection, worked out
//! from the manifest here, never by the app), [`spawns_process`] (which faults a
//! chaos run may give it), [`turn_ends_by_frame`] (whether a dropped line may hide
//! a turn's end) and [`steers_mid_turn`] (whether text can join a running turn).
//! Nothing above this crate names a binding but through these; a test of the binding's mapping beside it, and an end-to-end test of the
//! sim or a real peer in `tests/all/`, complete it.

pub(crate) mod a2a;
pub(crate) mod acp;
mod acp_conn;
#[cfg(test)]
mod acp_conn_tests;
mod acp_elicit;
mod acp_host;
mod acp_lines;
mod acp_perms;
pub(crate) mod actor;
pub(crate) mod codex_app;
mod codex_app_conn;
pub(crate) mod codex_exec;
pub(crate) mod death;
pub(crate) mod launch;
pub(crate) mod pty;
mod pump;
pub(crate) mod sink;
pub(crate) mod stream_json;
pub(crate) mod wire;

pub use a2a::{Discovery, connect_addr, crypto_provider, discover};
pub use sink::{DEFAULT_CREDITS, OutputBatch};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ractor::{ActorCell, ActorRef};
use serde_json::Value;

pub use launch::{LaunchError, LaunchSpec, Shape};
pub use sink::OutputSink;

use crate::protocol::{CapCode, CapEvent, Decision, ErrorKind};
use crate::registry::Binding;
pub use crate::supervision::ExitCause;

/// Start arguments of one driver generation.
pub struct DriverArgs {
    pub launch: Arc<LaunchSpec>,
    pub sink: OutputSink,
    /// The conversation to resume natively (`--resume <id>`), if any.
    pub resume_id: Option<String>,
    /// The cut turn may be taken up where the agent has it (A2A: its task); false
    /// after a hang, when the turn is tried afresh.
    pub retake: bool,
    /// Where the driver shows its agent's process group (0: none now), for what the
    /// session says of a chaos fault it sends (`SIGKILL to group 4242`).
    pub group: Arc<std::sync::atomic::AtomicI32>,
}

/// Why no driver could be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// This build has no driver for the binding.
    #[error("{urn}: no {binding} driver in this build ({})", CapCode::BindingUnavailable.symbol())]
    Unavailable { urn: String, binding: Binding },
    /// The binding's driver cannot reach an agent in the launch's shape.
    #[error("{urn}: the {binding} driver cannot reach {shape} ({})", CapCode::BindingUnavailable.symbol())]
    Shape {
        urn: String,
        binding: Binding,
        shape: Shape,
    },
    /// The driver failed to start (its agent could not be started or reached): said
    /// as what failed, not as ractor's "panicked during startup".
    #[error("{urn}: {}", startup_reason(.source))]
    Start {
        urn: String,
        #[source]
        source: ractor::SpawnErr,
    },
}

/// What a failed start says: the start's own error, when there is one.
fn startup_reason(err: &ractor::SpawnErr) -> String {
    match err {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

impl SpawnError {
    /// The registry's code for the error, when the spec names one: a binding that
    /// cannot be had is `cap_binding_unavailable`; a failed start has none (it is a
    /// crash, and restarted like one).
    pub fn code(&self) -> Option<CapCode> {
        match self {
            SpawnError::Unavailable { .. } | SpawnError::Shape { .. } => {
                Some(CapCode::BindingUnavailable)
            }
            SpawnError::Start { .. } => None,
        }
    }

    /// The failure as a driver exit, for the session's restart policy: the start's
    /// own cause when it gave one ([`ExitCause::CannotStart`] for a missing program),
    /// else a driver error saying what failed.
    pub fn exit_cause(&self) -> ExitCause {
        match self {
            SpawnError::Start {
                source: ractor::SpawnErr::StartupFailed(inner),
                ..
            } => ExitCause::from_error(inner.as_ref()),
            other => ExitCause::DriverError {
                message: other.to_string(),
            },
        }
    }
}

type Spawned = Result<ActorRef<DriverMsg>, SpawnError>;
/// Starts the driver of one binding.
type Starter = fn(Binding, DriverArgs, ActorCell) -> Pin<Box<dyn Future<Output = Spawned> + Send>>;

/// The one table of this build's drivers: every binding has an arm, so a new
/// [`Binding`] does not compile until it has a driver or says it has none here.
const fn driver_of(binding: Binding) -> Option<Starter> {
    match binding {
        Binding::StreamJson => Some(start::<stream_json::StreamJsonWire>),
        Binding::CodexExec => Some(start::<codex_exec::CodexExecWire>),
        Binding::CodexAppServer => Some(start::<codex_app::CodexAppWire>),
        Binding::AcpStdio => Some(start::<acp::AcpWire>),
        Binding::Pty => Some(start::<pty::PtyWire>),
        Binding::A2a => Some(start::<a2a::A2aWire>),
        // Not in this build.
        Binding::Grpc => None,
    }
}

fn start<W: wire::Wire>(
    binding: Binding,
    args: DriverArgs,
    supervisor: ActorCell,
) -> Pin<Box<dyn Future<Output = Spawned> + Send>> {
    Box::pin(async move {
        let shape = args.launch.shape;
        // Per turn the skeleton is ready between agents: only a wire ready at start fits.
        if !W::admits(&shape) || (shape == Shape::PerTurn && !W::READY_AT_START) {
            let urn = args.launch.urn.clone();
            return Err(SpawnError::Shape {
                urn,
                binding,
                shape,
            });
        }
        let driver = actor::Driver::<W>::default();
        let urn = args.launch.urn.clone();
        let (driver, _join) = ractor::Actor::spawn_linked(None, driver, args, supervisor)
            .await
            .map_err(|source| SpawnError::Start { urn, source })?;
        Ok(driver)
    })
}

/// Start the driver of `binding`, linked to `supervisor` (the session).
pub async fn spawn(binding: Binding, args: DriverArgs, supervisor: ActorCell) -> Spawned {
    match driver_of(binding) {
        Some(start) => start(binding, args, supervisor).await,
        None => Err(SpawnError::Unavailable {
            urn: args.launch.urn.clone(),
            binding,
        }),
    }
}

/// The shape a binding's agent (declared by `manifest`) is reached in when nothing
/// else says: one process per turn for `codex exec`, a connection to the peer the
/// manifest's URL names for A2A ([`a2a::connect_shape`]), one process per session
/// for the rest. An arm per binding: a new one does not compile until it says.
pub fn natural_shape(binding: Binding, manifest: &crate::manifest::Manifest) -> Shape {
    match binding {
        Binding::CodexExec => Shape::PerTurn,
        Binding::A2a => a2a::connect_shape(manifest),
        Binding::StreamJson
        | Binding::CodexAppServer
        | Binding::AcpStdio
        | Binding::Pty
        | Binding::Grpc => Shape::LongLived,
    }
}

/// Whether a session on `binding` runs an agent process of ours (signal and byte
/// faults can hit it) or only holds a connection to a peer (A2A: connection faults).
pub const fn spawns_process(binding: Binding) -> bool {
    match binding {
        Binding::A2a => false,
        Binding::StreamJson
        | Binding::CodexAppServer
        | Binding::CodexExec
        | Binding::AcpStdio
        | Binding::Pty => true,
        Binding::Grpc => true,
    }
}

/// Whether a turn on `binding` ends by a frame the agent sends (a result, a
/// completion, a prompt's response), which a line dropped past the line cap can hide:
/// the session then watches for the agent going quiet. A PTY turn ends by the screen,
/// an A2A turn is read back from its task: nothing to watch.
pub const fn turn_ends_by_frame(binding: Binding) -> bool {
    match binding {
        Binding::StreamJson | Binding::CodexAppServer | Binding::CodexExec | Binding::AcpStdio => {
            true
        }
        Binding::A2a | Binding::Pty | Binding::Grpc => false,
    }
}

/// Whether text can join a turn already running on `binding` (CAP queued input,
/// core §7.7): the Codex app-server's `turn/steer`. The session also needs the
/// manifest's `capabilities.queued_input`. Stream-json, ACP and the PTY would each
/// take a prompt mid-turn as a turn of its own, which the session's turn book does
/// not expect: not yet.
pub const fn steers_mid_turn(binding: Binding) -> bool {
    match binding {
        Binding::CodexAppServer => true,
        Binding::StreamJson
        | Binding::CodexExec
        | Binding::AcpStdio
        | Binding::Pty
        | Binding::A2a
        | Binding::Grpc => false,
    }
}

/// Whether a session of `manifest`'s agent over `binding` takes text mid-turn (CAP
/// queued input, core §7.7): the manifest says `queued_input` over that binding
/// ([`crate::manifest::Capabilities::queued_input_over`]) and capfleet steers a turn
/// there ([`steers_mid_turn`]). `Err` says why not. Whoever has a prompt for a
/// session that is mid-turn (the router's mentions, `chat`'s typed lines, A2A
/// expose) steers where this says so, else waits for the turn's end.
pub fn queued_input(manifest: &crate::manifest::Manifest, binding: Binding) -> Result<(), String> {
    if !manifest.capabilities.queued_input_over(binding.as_str()) {
        return Err(format!(
            "the manifest says queued_input = false over {binding} (capabilities.queued_input, \
             or capabilities.x-binding.{binding}.queued_input)"
        ));
    }
    if !steers_mid_turn(binding) {
        return Err(format!("capfleet steers no turn over {binding}"));
    }
    Ok(())
}

/// Whether this build has a driver for `binding`.
pub(crate) const fn supported(binding: Binding) -> bool {
    driver_of(binding).is_some()
}

const fn supported_count() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < Binding::PRIORITY.len() {
        if supported(Binding::PRIORITY[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The bindings this build has drivers for, in the spec's priority order (what
/// [`crate::registry::select_binding`] is given; selection always ends at PTY).
pub const SUPPORTED: &[Binding] = &{
    let mut out = [Binding::Pty; supported_count()];
    let (mut i, mut j) = (0, 0);
    while i < Binding::PRIORITY.len() {
        if supported(Binding::PRIORITY[i]) {
            out[j] = Binding::PRIORITY[i];
            j += 1;
        }
        i += 1;
    }
    out
};

/// A `cap.error` whose code is one of the registry's (`cap_*`), not retryable.
pub(crate) fn registry_error(code: CapCode, message: impl Into<String>) -> CapEvent {
    CapEvent::error(ErrorKind::Cap(code), message, false)
}

/// The `cap.error` `parse_failed` of a line over the cap (`LaunchSpec::max_line`),
/// dropped unread: the one report of an oversize line, whatever the binding.
/// `terminated`: its newline came (false: the output ended inside it).
pub(crate) fn oversize_line(len: u64, max: usize, terminated: bool) -> CapEvent {
    let end = if terminated { "" } else { ", unterminated" };
    let mut event = CapEvent::error(
        ErrorKind::ParseFailed,
        format!(
            "agent line of {len} bytes{end} exceeds the line cap of {max} bytes \
             ({MAX_LINE_KEY} in the agent's manifest); dropped"
        ),
        false,
    );
    if let CapEvent::Error(e) = &mut event {
        e.details = Some(serde_json::json!({
            "line_bytes": len, "max_line_bytes": max, "terminated": terminated,
        }))
        .into();
    }
    event
}

/// The manifest key that raises the line cap, as messages name it.
pub(crate) const MAX_LINE_KEY: &str = "`[limits] max_line_bytes`";
/// The `cap.error` code of a turn failed because its end was lost in a dropped line.
pub(crate) const LINE_TOO_LONG: &str = "line_too_long";

/// The `cap.error` failing a turn whose end was (most likely) in a line of `len`
/// bytes dropped over the cap of `max` bytes, said when the agent then went quiet or
/// its output ended (`after`): naming the cap and the manifest key that raises it.
pub fn lost_turn_end(len: u64, max: u64, after: &str) -> CapEvent {
    let mut event = CapEvent::error(
        ErrorKind::Other(LINE_TOO_LONG.into()),
        format!(
            "turn failed: the agent {after} after a line of {len} bytes was dropped for \
             exceeding the line cap of {max} bytes, so the turn's end was in it; raise \
             {MAX_LINE_KEY} in the agent's manifest to read such lines"
        ),
        false,
    );
    if let CapEvent::Error(e) = &mut event {
        e.details = Some(serde_json::json!({
            "line_bytes": len, "max_line_bytes": max, "manifest_key": "limits.max_line_bytes",
        }))
        .into();
    }
    event
}

/// Whether `event` is a [`lost_turn_end`] report.
pub fn is_lost_turn_end(event: &CapEvent) -> bool {
    matches!(event, CapEvent::Error(e) if matches!(&e.code, ErrorKind::Other(c) if c == LINE_TOO_LONG))
}

/// The line length and the cap of a `cap.error` [`oversize_line`] report.
pub fn oversize_of(event: &CapEvent) -> Option<(u64, u64)> {
    let CapEvent::Error(e) = event else {
        return None;
    };
    if e.code != ErrorKind::ParseFailed {
        return None;
    }
    let d = e.details.get()?;
    Some((d["line_bytes"].as_u64()?, d["max_line_bytes"].as_u64()?))
}

/// What a session asks of its driver.
#[derive(Debug)]
pub enum DriverMsg {
    /// Start a turn with this prompt.
    Prompt { text: String },
    /// Add this text to the running turn (only where [`steers_mid_turn`]); `taken`
    /// hears `true` once the agent took it (dropped unsent: it did not, e.g. the turn
    /// had ended).
    Steer {
        text: String,
        taken: tokio::sync::oneshot::Sender<bool>,
    },
    /// Answer an open `cap.permission.request`.
    Permission {
        req_id: String,
        decision: Decision,
        /// Why (shown to the agent on deny).
        message: Option<String>,
    },
    /// Answer an open `cap.ask_user`; `None` declines it.
    Answer {
        ask_id: String,
        value: Option<Value>,
    },
    /// Cancel the current turn the binding's native way (the session falls back to
    /// [`DriverMsg::Kill`] when that does not end the turn in time).
    Interrupt,
    /// Kill the agent's process group now; the driver then fails with `cause`.
    Kill { cause: ExitCause },
    /// End the agent gracefully (close its input, wait, then kill the group); the
    /// driver stops normally.
    Shutdown,
    /// The user's terminal was resized (SIGWINCH): pass the size on (PTY only).
    Resize { rows: u16, cols: u16 },
    /// Internal: the output of the driver's agent number `run` reached its end.
    OutputClosed { run: u64 },
    /// A chaos fault for the agent's own process group (`crate::chaos::signals`);
    /// nothing for a connection.
    Chaos(crate::chaos::signals::SignalFault),
    /// Internal: `SIGCONT` to the agent number `run` a chaos `hang` stopped, if it
    /// is still this driver's.
    ChaosContinue { run: u64 },
}

/// What a driver tells its session, in stream order.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // `Event` is nearly every output; boxing costs an allocation each.
pub enum DriverOutput {
    /// The agent can take a prompt. `resume_id` is the binding's native session id
    /// when known (stream-json learns it from `system/init`, later); `resumed` says
    /// the agent was started on the previous conversation (a native resume).
    Ready {
        resume_id: Option<String>,
        resumed: bool,
        /// `_meta` for the session's `cap.session.ready`: what the binding negotiated.
        meta: Option<crate::protocol::Meta>,
    },
    /// The binding learned (or re-learned) the id to resume this conversation with.
    ResumeId(String),
    /// A CAP event.
    Event(CapEvent),
    /// The agent ended the current turn.
    TurnEnd(TurnEnd),
    /// The agent withdrew an open permission request / ask (e.g. on interrupt).
    Withdrawn { req_id: String },
    /// The reverse RPC acted (or refused to act) on the agent's behalf.
    Audit(crate::rpc::Audited),
}

pub use crate::bindings::STRAY_FRAME;
/// How a turn ended, as the binding reports it.
pub(crate) use crate::bindings::TurnEnd;
pub use crate::bindings::codex_app::frames::SERVER_OVERLOADED_CODE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_is_the_driver_table_in_priority_order() {
        assert_eq!(
            SUPPORTED,
            [
                Binding::StreamJson,
                Binding::CodexAppServer,
                Binding::CodexExec,
                Binding::AcpStdio,
                Binding::A2a,
                Binding::Pty
            ]
        );
        for b in Binding::PRIORITY {
            assert_eq!(supported(b), SUPPORTED.contains(&b), "{b}");
        }
    }

    #[test]
    fn only_frame_ended_bindings_have_a_turn_end_a_dropped_line_can_hide() {
        for b in [
            Binding::StreamJson,
            Binding::CodexAppServer,
            Binding::CodexExec,
            Binding::AcpStdio,
        ] {
            assert!(turn_ends_by_frame(b), "{b}");
        }
        assert!(!turn_ends_by_frame(Binding::Pty));
        assert!(!turn_ends_by_frame(Binding::A2a));
    }
}
