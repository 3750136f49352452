//! `capfleet run` arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use capfleet_app::telemetry::TelemetryArgs;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet run config/fleets/demo.toml
      run the demo fleet (simulator agents, no API key)
  capfleet run --dry-run config/fleets/*.toml
      validate fleets and print their plans
  capfleet run fleet.toml --task @task.md
      replace the fleet's task (`@` reads a file)
  capfleet run --resume latest
      continue the last run where it was cut (capfleet killed, a signal, a reboot)

Validation happens before anything spawns; every error names file, line and key. \
Each run records its journal in .capfleet/runs/<run-id>/journal.jsonl under the current \
directory (`capfleet log latest`), its artifacts beside it (artifacts/<session>/).

Traces: --otlp URL (or OTEL_EXPORTER_OTLP_ENDPOINT) exports one trace per run, rooted at \
`fleet.run`; --trace-file writes the same spans as JSON lines. Metrics: --metrics-addr. \
See observability/README.md for Jaeger, Prometheus and Grafana. The fleet file, routes and \
output: docs/guide/fleets.md; --resume: docs/guide/durability.md; --chaos: docs/guide/chaos.md.

Sessions of coding agents each work in their own git worktree, \
<repo>/.cap-worktrees/<run-id>/<session> on branch capfleet/<run-id>/<session> (off \
[fleet].base, default HEAD; a plain directory outside git). Worktrees stay after the run: \
`capfleet diff`, `capfleet merge`, `capfleet clean`. A workspace that cannot be made \
fails the run (exit 1) before any agent starts.

Resuming (--resume RUN, a run id or `latest`): the run goes on in place, same id, same \
journal, same worktrees. Completed turns are not run again (their recorded results are \
replayed: routes, joins, plan entries and mentions follow from them as before, and no \
delivery is made twice), the budget counts what was spent, a turn cut mid-way is \
re-issued (resumed natively where the agent can, else with its partial output). A run \
that had ended says so and changes nothing; one whose orchestrator still runs is refused \
(its pid named); a fleet file changed since the run is refused with the change named \
(--force: resume anyway, the change journaled).

Chaos runs (--chaos SPEC, or the fleet's [chaos] table, which --chaos replaces): faults \
injected from a seed, the same seed giving the same faults. SPEC is key=value pairs \
separated by commas, lists inside a value by semicolons: \
`seed=7,kill=0.2/turn,hang=1/min,term=@30s;2m,target=worker-*`. A fault kind (kill, term, \
hang, exit, slow, garble, truncate, stall_stdin; latency, drop, http_5xx, refuse for A2A \
sessions; self_kill) takes a rate: P/turn (a probability per turn attempt), N/min, or \
@TIME;TIME (after the run's start). target (names, globs, binding:<name>; per fault: \
kill.target=...) says whom; hang_for, slow_bytes_per_sec, slow_for, garble_fraction, \
garble_frames, truncate_frames, stall_for, latency, latency_for, http_status, refuse_for, \
max_self_kills tune them. Every fault is a `chaos` journal record and a span. \
--resume-on-crash runs the run in a child capfleet and resumes it (run --resume) each time \
that child dies by a signal (a self_kill, a crash), at most 10 times.

Exit codes: 0 completed, 1 a session failed, 2 invalid config (or bad usage), \
3 budget exceeded, 130 interrupted (Ctrl-C), 143 / 129 stopped by SIGTERM / SIGHUP \
(every agent's process group is killed first; a second signal cuts the kill grace \
short). A disk fault (a journal, transcript or artifact write that failed) is exit 1 \
too.")]
pub(crate) struct RunArgs {
    /// The fleet file(s); more than one only with --dry-run.
    #[arg(
        required_unless_present = "resume",
        conflicts_with = "resume",
        value_name = "FLEET.toml"
    )]
    pub fleets: Vec<PathBuf>,
    /// Continue run RUN (its id, or `latest`) from its journal, in place.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["dry_run", "task", "commit"])]
    pub resume: Option<String>,
    /// With --resume: go on although the fleet file changed since the run started.
    #[arg(long, requires = "resume")]
    pub force: bool,
    /// Validate and print the plan (sessions, routes, budget); spawn nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable output: the plan as JSON (--dry-run), NDJSON events (run),
    /// ending with one `run_totals` record (outcome, exit code, turns, tokens, cost).
    #[arg(long)]
    pub json: bool,
    /// Replace the fleet's task (`@path` reads the task from a file).
    #[arg(long, short = 't')]
    pub task: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics while the run lasts
    /// (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    #[command(flatten)]
    pub notify: capfleet_app::notify::NotifyArgs,
    /// Inject faults from a seed: the `[chaos]` keys inline, e.g.
    /// `seed=7,kill=0.2/turn,hang=1/min,target=worker-*` (replaces the fleet's [chaos]).
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["resume", "dry_run"])]
    pub chaos: Option<String>,
    /// Supervise the run: run it in a child capfleet and resume it (`run --resume`)
    /// whenever that child dies by a signal, until the run ends.
    #[arg(long, conflicts_with = "dry_run")]
    pub resume_on_crash: bool,
    /// Write the run's id to this file once its directory is made (the supervisor of
    /// `--resume-on-crash` reads it).
    #[arg(long, hide = true, value_name = "PATH")]
    pub run_id_file: Option<std::path::PathBuf>,
    /// At the end, commit each coding session's work on its branch
    /// (capfleet/<run-id>/<session>); a likely secret keeps it uncommitted.
    #[arg(long)]
    pub commit: bool,
}
