//! The wire's part of chaos runs (`[chaos]` in fleet.toml, `capfleet run --chaos
//! SPEC`): the kinds of fault a run injects and the injectors at the wire. The spec,
//! the seeded schedule and the report are the engine's (`capfleet_engine::chaos`).
//!
//! - [`FaultKind`] and where each kind is applied ([`Reach`]);
//! - [`signals`]: how a signal fault reaches an agent: only the process group the
//!   session's own driver spawned (never a pid found by name);
//! - [`interpose`]: the byte-level interposer between an agent's pipes or terminal
//!   and its driver (`garble`, `truncate`, `slow`, `stall_stdin`), a
//!   [`interpose::ByteFaults`] handle per session;
//! - [`conn`]: an A2A session's connection faults through a loopback proxy
//!   (`latency`, `drop`, `http_5xx`, `refuse`), a [`conn::ConnFaults`] handle per
//!   session.
//!
//! `signals` is pure, `interpose` and `conn` import nothing but `sync` (the drivers
//! install them). Every fault is an [`EventBody::Chaos`](crate::events::EventBody::Chaos)
//! record, published (and so journaled) before the fault is applied, and a `chaos` span.
//!
//! # The byte interposer
//!
//! `ByteFaults` (`ByteFault::{Slow, Garble, Truncate, StallStdin}`) is installed where
//! agent I/O is set up: `LaunchSpec::spawn_piped` (every pipe driver: stream-json, `codex
//! app-server`, `codex exec`, ACP; the interposer's `Reader` / `Writer` over the child's pipes) and the PTY
//! wire's start. `Reader`/`Writer` are enums: `Direct` (the bare pipe, one `match` per
//! poll) or `Interposed`; with nothing armed an interposed reader reads one atomic flag
//! and passes the bytes. Armed:
//!
//! | fault | what the driver reads (or writes) |
//! |---|---|
//! | `garble { fraction, frames }` | each byte of the next N frames replaced with probability `fraction` by a random byte (never itself, never `\n`: each garbled line is one malformed frame, `parse_failed`) |
//! | `truncate { frames }` | the next N frames cut at a random point (a line keeps its `\n`) |
//! | `slow { bytes_per_sec, for_ms }` | reads bounded to about 50 ms' worth, each followed by the pause the rate gives |
//! | `stall_stdin { for_ms }` | the driver's writes wait (as on a full pipe); the end of input is never held |
//!
//! A frame is a line for the pipe bindings and one read for the terminal. The randomness
//! is a ChaCha8 stream from the handle's seed, drawn in the order the bytes pass. Each
//! injection is a `chaos.byte_fault` span that ends when the fault is spent.
//!
//! # The connection faults
//!
//! `ConnFaults` (`ConnFault::{Latency, Drop, Http5xx, Refuse}`) is a loopback TCP proxy
//! per session, Toxiproxy-like: the A2A wire's start asks the handle for a `Route` to the
//! peer's base URL; every request whose authority is the peer's goes through it
//! (`Route::redirect`): plain `http://` to the proxy with the peer's `Host`; `https://`
//! keeps the host name, its port set to the proxy's and the name resolved to loopback, so
//! TLS is never terminated and the peer's certificate is still checked.
//!
//! | fault | effect |
//! |---|---|
//! | `latency { ms, for_ms }` | each chunk, each way, delayed |
//! | `drop` | the open connections closed now (the driver resubscribes); with none open, the next response cut after its first chunk |
//! | `http_5xx { status }` | the next request answered by the proxy with that status; on a TLS peer the connection is closed instead (`applied_as = "drop"`) |
//! | `refuse { for_ms }` | as a peer going down: connections and listener closed, listening again on the same port after |
//!
//! Each injection is a `chaos.conn_fault` span; metrics
//! `capfleet_chaos_io_faults_total{session,fault}`,
//! `capfleet_chaos_bytes_garbled_total{session}`,
//! `capfleet_chaos_frames_truncated_total{session}`. The driver treats each as the same
//! trouble from a real agent or network. The interposer's cost with nothing armed is part
//! 6 of `cargo bench --bench session`.

pub(crate) mod conn;
pub(crate) mod interpose;
pub(crate) mod signals;

pub use conn::{ConnFault, ConnFaults};
pub use interpose::metrics::IoMetrics;
pub use interpose::{ByteFault, ByteFaults};
pub use signals::SignalFault;

use serde::{Deserialize, Serialize};

/// A kind of fault. Agent faults hit a session's agent (signals, or the byte
/// interposer between its pipes/PTY and the driver); connection faults an A2A
/// session's connection; `self_kill` capfleet itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `SIGKILL` to the agent's process group.
    Kill,
    /// `SIGTERM` to the agent's process group.
    Term,
    /// `SIGSTOP` to the agent's group, `SIGCONT` after `hang_for` (or never).
    Hang,
    /// A clean exit (status 0) mid-turn: the agent's input is closed (see
    /// [`signals`]).
    Exit,
    /// The agent's output throttled to `slow_bytes_per_sec` for `slow_for`.
    Slow,
    /// A fraction of the agent's next frames (or PTY bytes) corrupted.
    Garble,
    /// The agent's next frames cut short.
    Truncate,
    /// The agent's stdin stops being written for `stall_for`.
    StallStdin,
    /// A2A: each request delayed.
    Latency,
    /// A2A: the connection dropped mid-stream.
    Drop,
    /// A2A: the peer answers with an HTTP 5xx.
    #[serde(rename = "http_5xx")]
    Http5xx,
    /// A2A: connections refused for a while.
    Refuse,
    /// capfleet `SIGKILL`s itself (`--resume-on-crash` resumes the run).
    SelfKill,
}

impl FaultKind {
    /// Every kind, in the order the seeded decisions draw them.
    pub const ALL: [FaultKind; 13] = [
        FaultKind::Kill,
        FaultKind::Term,
        FaultKind::Hang,
        FaultKind::Exit,
        FaultKind::Slow,
        FaultKind::Garble,
        FaultKind::Truncate,
        FaultKind::StallStdin,
        FaultKind::Latency,
        FaultKind::Drop,
        FaultKind::Http5xx,
        FaultKind::Refuse,
        FaultKind::SelfKill,
    ];

    /// As written in a spec and journaled (`kill`, `stall_stdin`, `http_5xx`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Term => "term",
            FaultKind::Hang => "hang",
            FaultKind::Exit => "exit",
            FaultKind::Slow => "slow",
            FaultKind::Garble => "garble",
            FaultKind::Truncate => "truncate",
            FaultKind::StallStdin => "stall_stdin",
            FaultKind::Latency => "latency",
            FaultKind::Drop => "drop",
            FaultKind::Http5xx => "http_5xx",
            FaultKind::Refuse => "refuse",
            FaultKind::SelfKill => "self_kill",
        }
    }

    /// The kind written `name`.
    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Its position in [`FaultKind::ALL`].
    pub fn index(self) -> usize {
        FaultKind::ALL
            .iter()
            .position(|k| *k == self)
            .unwrap_or(FaultKind::ALL.len())
    }

    /// Which part of the run the fault hits.
    pub fn reach(self) -> Reach {
        match self {
            FaultKind::Kill | FaultKind::Term | FaultKind::Hang | FaultKind::Exit => Reach::Signal,
            FaultKind::Slow | FaultKind::Garble | FaultKind::Truncate | FaultKind::StallStdin => {
                Reach::Bytes
            }
            FaultKind::Latency | FaultKind::Drop | FaultKind::Http5xx | FaultKind::Refuse => {
                Reach::Connection
            }
            FaultKind::SelfKill => Reach::Orchestrator,
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a fault kind is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A signal to (or the closed input of) the agent's process group.
    Signal,
    /// The byte interposer between the agent's pipes/PTY and its driver.
    Bytes,
    /// An A2A session's connection.
    Connection,
    /// capfleet itself.
    Orchestrator,
}

/// The `target` of a `self_kill` record (published on the router's stream).
pub const SELF_TARGET: &str = "capfleet";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_serialized() {
        for k in FaultKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_eq!(FaultKind::parse(k.as_str()), Some(k));
            assert_eq!(FaultKind::ALL[k.index()], k);
        }
    }
}
