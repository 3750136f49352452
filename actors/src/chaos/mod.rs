//! Chaos runs: faults injected into a run on purpose, from a seed.
//!
//! - [`interpose`]: the byte-level interposer between an agent's pipes or terminal
//!   and its driver (`garble`, `truncate`, `slow`, `stall_stdin`);
//! - [`conn`]: the connection faults of an A2A peer, through a loopback proxy
//!   (`latency`, `drop`, `http_5xx`, `refuse`).

pub mod conn;
pub mod interpose;
