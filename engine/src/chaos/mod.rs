//! Chaos runs (`[chaos]` in fleet.toml, `capfleet run --chaos SPEC`): faults injected
//! into a run on purpose, from a seed, so that a run's faults are reproducible. The
//! fault kinds and the injectors at the wire (bytes, connections, signals) are the
//! wire crate's (`capfleet_wire::chaos`); the engine's part:
//!
//! - [`spec`]: the faults as written (kinds, rates, targets, the seed), read from the
//!   fleet file's `[chaos]` table or the inline `--chaos` syntax into one
//!   [`spec::ChaosSpec`];
//! - [`schedule`]: the seeded decisions — which fault hits which session at which turn
//!   attempt, and the timed (per-minute, `at`) faults' sequence — pure functions of
//!   the seed and the fault's coordinates, never of wall-clock timing;
//! - [`apply`]: a spec's faults as the injectors take them, and the handles a session
//!   of a chaos run is given;
//! - [`report`]: the report of a chaos run, read back from its journal (it reads the
//!   journal and the process table).
//!
//! The run's task that fires the timed faults (and `self_kill`) is the run's
//! (`run/timed.rs`); the session's own part is `session/chaos.rs`. Every fault is an
//! `EventBody::Chaos` record, published (and so journaled) before the fault is
//! applied, and a `chaos` span.
//!
//! # The contract the injectors and the report build on
//!
//! - The record: `EventBody::Chaos { fault, target, seed_pos, detail, group }`, journaled
//!   before the fault is applied, on the target session's stream with its current turn
//!   (`{"seq":N,"urn":"cap://demo/worker-1","turn":3,"ts_ms":…,"type":"chaos",
//!   "fault":"kill","target":"worker-1","seed_pos":12884902144,"detail":"SIGKILL to group
//!   4242","group":4242}`: `group` only on a signal fault, the group as the driver shows
//!   it through `DriverArgs::group`; the report finds the fault that cut a sim's result in
//!   flight by it), or for `self_kill` on the router's stream with target `capfleet`,
//!   synced (`journal::Durable`) before the `SIGKILL`. `resume::recover` counts the
//!   router's chaos records apart from the records a replay derives again
//!   (`Recovered::self_kills`: how many, the last `seed_pos`).
//! - `seed_pos`: a per-turn fault's place in the lattice it was drawn from,
//!   `turn << 32 | attempt << 8 | kind index` (`FaultKind::ALL`'s order); a timed fault's
//!   index n in the run's merged timed sequence (0, 1, 2, …).
//! - [`spec`] (`ChaosSpec`, `FaultRule`, `Rate::{PerTurn, PerMinute, At}`,
//!   `Target::{Name, Glob, Binding}`, `Params`): one builder over flat dotted keys
//!   (`kill.target`) for both spellings; the fleet reader maps each `SpecError`'s key back
//!   to its file, line and key; names that are no session of the fleet are refused.
//! - Byte and connection faults go through the handles on a session's `LaunchSpec`
//!   (`ByteFaults::inject`, `ConnFaults::inject`): `run_fleet` (`run/chaos.rs`,
//!   `chaos::prepare`) gives a session the handles its faults need ([`apply::install`]:
//!   only when a byte or connection fault targets it; otherwise no interposer at all),
//!   and [`apply`] turns a kind and the spec's `Params` into the handle's fault and the
//!   record's `detail`.
//!
//! # The decisions
//!
//! A per-turn rate is drawn at each turn attempt's prompt (`session/book.rs`
//! `send_prompt` -> `Core::chaos_on_attempt`) from (seed, session name, turn, attempt,
//! kind) with SplitMix64 (names by FNV-1a: stable across builds), kinds in
//! `FaultKind::ALL` order, the first below its rate being the attempt's one fault — never
//! from timing, so one seed gives one (fault, target, turn) list as long as the agents
//! answer alike. An attempt's byte fault is armed just before its prompt is written (so
//! it meets the turn's first frames, and `stall_stdin` the prompt's write); every other
//! fault once the prompt is out. The timed faults (`N/min`: seeded exponential gaps; `at`
//! times) are merged in time order into a `Timeline`; each one's target is a seeded pick
//! among the targeted sessions, sorted by name. `run/timed.rs` is one task of the run
//! that sleeps until each is due and sends `SessionMsg::Chaos` to its target, or asks the
//! router (`RouterMsg::SelfKill`) to journal and sync a `self_kill` and then `SIGKILL`s
//! the process. A resumed run's timeline goes on after the journal's last `self_kill`
//! (`Timeline::skip_through`), and stops killing at `max_self_kills` in all.
//!
//! # Applying
//!
//! A fault with no agent to hit (the session starting, closing, ended) is skipped
//! unrecorded; otherwise the session (`session/chaos.rs`) opens a `chaos` span under the
//! turn's (else the session's) with `cap.chaos.*` attributes, publishes the record, then
//! sends a signal fault to its driver (`DriverMsg::Chaos`) or injects a byte or
//! connection fault into its handle. The driver applies a signal only to the
//! `ProcessGroup` it spawned and holds: `SIGKILL`, `SIGTERM`, `SIGSTOP` (with `hang_for`,
//! a `DriverMsg::ChaosContinue` for that agent's run number sends `SIGCONT`, only if that
//! agent is still the driver's: never to a reused pgid), and `exit` as the wire's `close`
//! (end of input) without marking the agent as ending on purpose, so the restart policy
//! decides. The metrics tap counts the records (`capfleet_chaos_faults_total{kind}`).
//! `--resume-on-crash` (`src/cmd/run/supervise.rs`) runs the run in a child capfleet
//! spawned with `PR_SET_PDEATHSIG` = `SIGKILL`, passes `SIGTERM`/`SIGHUP` on, and after a
//! child's death by a signal runs `run --resume <id>` (at most 10 times); `resume.json`
//! keeps `--chaos` so each resume goes on with the same faults. The soak
//! (`config/fleets/soak.toml`) runs sim agents `CAPFLEET_SIM_TIME_SCALE` times faster.

pub(crate) mod apply;
pub(crate) mod report;
pub(crate) mod schedule;
pub(crate) mod spec;

pub use report::events::{EMITTED, Events};
pub use report::metrics::SERIES;
pub use report::{Mttr, Report};
pub use spec::{ChaosSpec, Entry, Raw, Target};
