//! The root package's one integration-test binary: `capfleet` end to end (and the
//! engine through the library where a test needs the real binary as its agent).
//!
//! One module per area (`tests/all/<area>.rs`), one shared helper module
//! ([`common`]). nextest still runs every test in a process of its own, so tests
//! that install signal handlers or global state stay isolated. Select an area with
//! `cargo nextest run --test all <area>::` or `./tests/run.sh <area>`.
//!
//! The web console is tested in a real browser (`console_browser.rs`, the server its
//! tests share, and a module a concern under `console_browser/`: `runs`, `approvals`,
//! `keyboard`, `phone` — at 390 px no page overflows, the run's sessions are cards inside
//! their box, and nothing shifts while the page redraws — and `wrong_token`): Debian's
//! `chromium`, headless, driven over WebDriver by `chromedriver` (Debian's
//! `chromium-driver`; both installed by `.ci/run` and `tests/run.sh`, no browser
//! download) with the `thirtyfour` client (reqwest, plain HTTP to loopback).
//! `common/browser.rs` starts chromedriver on a port it picks (`--port=0`) in a process
//! group of its own with an environment marker every chromium process inherits, and
//! ends the session, the group and whatever still has the marker (chromium's crash
//! handler starts a session of its own) when the test ends or fails; `HOME`, `TMPDIR`
//! and the profile are a temporary directory. Screenshots of each page go to
//! `<target>/test-artifacts/console/` (`$CAPFLEET_TEST_ARTIFACTS`), a timed-out wait
//! saves one. `common/console.rs` knows the console's `data-testid`s and routes; both
//! files and `common/procs.rs` are shared with `benches/console.rs` by `#[path]`.
//! `benches/support/serve.rs` is `capfleet serve` for the `serve` and `console` benches.
//! `common/a2a_peer.rs` (an A2A peer process killed on drop, the simulator's `--mode
//! a2a`, the remote manifest naming it) is shared with the A2A and chaos benches the same
//! way, through `benches/support/`; `benches/support/figures.rs` is the benches' timing
//! arithmetic (fastest of passes, ms, ratios), included alone by the benches that need
//! nothing else of `support`. `common/fake_llm.rs`, `common/peers.rs` and
//! `common/codex_manifest.rs` are the codex bench's (`benches/codex/`) the same way:
//! the real Codex against the fake LLM. The fake LLM (`tests/support/fake_llm.py`, Python's
//! stdlib only) is its server and command line; `tests/support/fake_llm_wire/` its state,
//! its HTTP handler and one module per API it speaks (Anthropic, OpenAI, Gemini).

mod common;

mod a2a_peers;
mod a2a_sessions;
mod a2a_sim;
mod acp_agent;
mod acp_echo;
mod acp_peers;
mod architecture_doc;
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
mod claude_resume_cost;
mod cli;
mod closed_stdout;
mod codex_app_scripted;
mod codex_app_server;
mod codex_exec;
mod codex_fleet;
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
mod floors;
mod guide;
mod interop_claude_stream;
mod line_cap;
mod live_view;
mod log;
mod mcp_claude;
mod mcp_http;
mod mcp_stdio;
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
mod rate_limit_claude;
mod registry;
mod research;
mod router;
mod run_cli;
mod run_human;
mod sandbox_agents;
mod sandbox_escape;
mod sandbox_visible;
mod screen_width;
mod serve;
mod serve_a2a;
mod serve_a2a_conformance;
mod serve_a2a_sdks;
mod serve_a2a_trace;
mod serve_artifacts;
mod serve_asks;
mod serve_confine;
mod serve_hold;
mod serve_inputs;
mod serve_openapi;
mod serve_pages;
mod serve_restart;
mod serve_sandbox;
mod serve_submit;
mod session_chaos;
mod session_policy;
mod sim_acp;
mod sim_stream_json;
mod sim_tui;
mod span_after_panic;
mod speak;
mod speak_fleet;
mod steer_routed;
mod stop_signals;
mod test_results;
mod toolchain;
mod tree;
mod tree_deaths;
mod wire_hostile;
mod workspaces;
