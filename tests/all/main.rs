//! The root package's one integration-test binary: `capfleet` end to end (and the
//! engine through the library where a test needs the real binary as its agent).
//!
//! One module per area (`tests/all/<area>.rs`), one shared helper module
//! ([`common`]). nextest still runs every test in a process of its own, so tests
//! that install signal handlers or global state stay isolated. Select an area with
//! `cargo nextest run --test all <area>::` or `./tests/run.sh <area>`.

mod common;

mod a2a_peers;
mod a2a_sessions;
mod a2a_sim;
mod acp_agent;
mod acp_echo;
mod acp_peers;
mod artifacts;
mod audit_risk;
mod budget;
mod chaos_decoy;
mod chaos_exit;
mod chaos_io;
mod chaos_report;
mod chaos_seed;
mod chaos_self_kill;
mod chaos_soak;
mod chat_repl;
mod cli;
mod closed_stdout;
mod codex_exec;
mod console;
mod console_browser;
mod demo_story;
mod disk;
mod driver_shapes;
mod durable;
mod durable_checker;
mod durable_commit;
mod durable_journal;
mod durable_kills;
mod durable_native;
mod durable_resume;
mod fleet_config;
mod fleet_examples;
mod fleet_validation;
mod interop_claude_stream;
mod line_cap;
mod live_view;
mod log;
mod missing_agent;
mod nats_config;
mod nats_drain;
mod nats_runs;
mod nats_serve;
mod nested_fleet;
mod notify;
mod observability;
mod otel;
mod peers_smoke;
mod phoenix;
mod prometheus;
mod pty_driver;
mod pty_input;
mod pty_peers;
mod pty_turns;
mod rate_limit;
mod registry;
mod research;
mod router;
mod run_cli;
mod run_human;
mod serve;
mod serve_a2a;
mod serve_a2a_sdks;
mod serve_a2a_trace;
mod serve_artifacts;
mod serve_asks;
mod serve_inputs;
mod serve_openapi;
mod serve_submit;
mod session_chaos;
mod session_policy;
mod sim_acp;
mod sim_stream_json;
mod sim_tui;
mod speak;
mod speak_fleet;
mod stop_signals;
mod test_results;
mod tree;
mod wire_hostile;
mod workspaces;
