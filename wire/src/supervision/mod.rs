//! Supervision: the restart strategy of a session, written once.
//!
//! # Decision: our own strategy on ractor's built-in supervision, not `ractor-supervisor`
//!
//! `ractor-supervisor` 0.2.0 (read from its source) has the right vocabulary: per-child
//! `Restart::{Permanent, Transient, Temporary}`, a `DynamicSupervisor` that takes children at
//! run time, a meltdown log (`max_restarts` within `max_window`, plus `reset_after`) and a
//! per-child `ChildBackoffFn`. It does not fit capfleet:
//!
//! - **No restart events.** A restart is only written to the `log` crate; nothing tells the
//!   caller the cause, the attempt or the delay, and the backoff hook gets
//!   `(child_id, restart_count, last_fail, reset_after)` but not the cause. Every restart must
//!   be a journal event and a span, so we would have to wrap it anyway.
//! - **Meltdown is an untyped failure of the supervisor itself.** It returns
//!   `SupervisorError::Meltdown { reason: String }` from `handle_supervisor_evt`, so the parent
//!   sees `ActorFailed` with a string. And the `DynamicSupervisor`'s meltdown log is shared by
//!   all its children: one supervisor with one child per session would let one flapping session
//!   melt the whole fleet. We want "this session failed (meltdown)" as a typed message to the
//!   fleet, whose `on_error` decides the rest.
//! - **"Abnormal" is actor-level only** (`ActorFailed` vs `ActorTerminated`): our causes (exit
//!   code, signal, hang past the turn timeout, driver error) would travel as boxed errors that
//!   it never looks at.
//! - **Latency and counters.** Every restart sleeps a hard-coded 10 ms inside the supervisor's
//!   handler (a fifth of the 50 ms crash-to-ready budget, mailbox blocked meanwhile); the
//!   meltdown window is checked at respawn time (after the backoff), while the backoff counts
//!   failures with a separate `reset_after` counter: two clocks that can disagree.
//! - **Build rules.** Its default feature turns on `ractor/async-trait`, which our dependency
//!   table forbids (usable only with `default-features = false`); it adds `log`, `uuid`,
//!   `if_chain`, and registers every child in ractor's global registry under its id.
//! - **Restart is not just respawn.** A session restart re-sends `cap.session.config` and
//!   resumes the agent or re-issues the interrupted turn (spec §10.6): session logic that
//!   belongs in our session actor, not in a generic spawn closure.
//!
//! So the strategy is [`policy`]: a pure, deterministic [`RestartTracker`] (one per session)
//! that the session actor calls from ractor's own `handle_supervisor_evt`:
//! `ActorFailed(_, err)` gives [`ExitCause::from_error`] (a driver fails with an
//! [`ExitCause`] after emitting `cap.error`), `ActorTerminated` gives [`ExitCause::Normal`].
//! The session re-queues the exit behind the driver's last outputs, then (in
//! `session/slot.rs`, `on_driver_exit`) [`Decision::Restart`] becomes a `restart` event
//! (cause, attempt, delay) and a respawn of the driver after the delay, and
//! [`Decision::Stop`] either a normal close (the agent ended by itself and the policy does
//! not bring it back) or a failed session (`failed`, with the reason: a meltdown) — which
//! the fleet learns as the session actor's end and reports to the router.
//! No other restart loop exists anywhere in capfleet. A turn whose attempts failed
//! twice in a row the same way is not re-issued a third time ([`poison`]).
//!
//! ```text
//! // the session's handle_supervisor_evt and its exit handling (sketch):
//! let cause = match evt {
//!     SupervisionEvent::ActorFailed(_, err) => ExitCause::from_error(err.as_ref()),
//!     SupervisionEvent::ActorTerminated(..) => ExitCause::Normal,
//!     _ => return Ok(()),
//! };
//! match tracker.on_exit(Instant::now(), &cause) {
//!     Decision::Restart { attempt, delay } => { publish(Restart { cause, attempt, delay }); start_driver_after(delay) }
//!     Decision::Stop { .. } if cause.is_abnormal() => fail(reason),   // the fleet sees the session end
//!     Decision::Stop { .. } => close(),
//! }
//! ```
//!
//! Measured: the [`crate::process::lines::LineReader`] reads 200 MiB of 63-byte NDJSON lines at about
//! 1.5 GiB/s in a release build (about 100 MiB/s unoptimised).

pub(crate) mod poison;
pub(crate) mod policy;
pub mod rate_limit;

pub use poison::{AttemptFailure, AttemptLog, POISON_TURN, Verdict, poison_event};

pub use policy::{Decision, ExitCause, Restart, RestartPolicy, RestartTracker};
