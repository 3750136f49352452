//! What capfleet's verbs and its server share: a fleet loaded and checked ([`fleet`]),
//! launched ([`launch`], [`one_fleet`], [`one_session`]), resumed ([`resume`]), listed
//! ([`runs`]) and tallied ([`tally`]); a submission packed and validated
//! ([`submission`], [`enqueue`]); notifications ([`notify`]), distributed runs
//! ([`nats`]), the server's HTTP client ([`client`]); the terminal's output ([`human`],
//! [`style`], [`logging`]), signals ([`signals`]), the runtime ([`runtime`]) and the
//! span pipeline ([`telemetry`]).
//!
//! Its public surface is what the binary's verbs and `capfleet-server` use; the rest is
//! `pub(crate)`. It names neither the verbs nor the server, and depends on no HTTP
//! server (axum) or API document (utoipa): the server describes the app's types to its
//! document itself.

pub mod agents;
pub mod client;
pub mod enqueue;
pub mod fleet;
// The human at the terminal is, with the verbs, what prints to stdout.
#[allow(clippy::print_stdout)]
pub mod human;
pub mod launch;
pub mod logging;
pub mod nats;
pub mod notify;
pub mod one_fleet;
pub mod one_session;
pub mod orphans;
pub mod resume;
pub mod runs;
pub mod runtime;
pub mod sandboxing;
pub mod secrets;
pub mod shipped;
pub mod signals;
pub mod style;
pub mod submission;
pub mod tally;
pub mod telemetry;
pub mod unattended;
pub mod workspaces;
