//! `capfleet serve` arguments, and `capfleet serve token add`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::Role;
use capfleet_app::telemetry::TelemetryArgs;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
#[command(after_help = "\
Examples:
  capfleet serve
      serve on http://127.0.0.1:7878, runs under ./.capfleet/runs; the first start makes
      .capfleet/tokens.txt with an admin token and prints its secret, once
  capfleet serve token add ci --role run --token-file tokens.txt
      add a token named `ci` (its secret is printed once; the file keeps its SHA-256)
  capfleet serve --addr 0.0.0.0:7878 --token-file tokens.txt --max-runs 4 --queue 32
      listen on every interface (tokens required), 4 runs at a time, 32 waiting
  curl -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/toml' \\
       --data-binary @fleet.toml http://127.0.0.1:7878/v1/runs
      submit a fleet: 201 with the run's id and links, 400 with every finding
  curl -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:7878/v1/runs/RUN
      a run's state, sessions (state, turns, tokens, cost, restarts), budget, outcome
  curl -N -H \"Authorization: Bearer $TOKEN\" http://127.0.0.1:7878/v1/runs/RUN/events
      follow its journal live (Server-Sent Events; reconnect with Last-Event-ID)
  curl -H \"Authorization: Bearer $APPROVER\" -d '{\"decision\":\"allow_once\"}' \\
       -H 'Content-Type: application/json' http://127.0.0.1:7878/v1/runs/RUN/asks/worker.perm-1
      approve a waiting permission from anywhere (an `approve` token)

API (JSON; every error is {\"code\", \"message\"}, a fleet's findings with line and key):
  POST /v1/runs                 a fleet.toml (application/toml), or JSON
                                {\"fleet\": \"<toml>\", \"task\": \"...\", \"files\": {\"path\": \"text\"},
                                 \"cwd\": \"<a dir inside an --allow-root>\"}
  GET  /v1/runs                 ?state=running&limit=50&after=RUN
  GET  /v1/runs/{id}            POST /v1/runs/{id}/cancel
  GET  /v1/runs/{id}/events     ?after=SEQ&session=NAME&include_raw=1 (or Last-Event-ID)
  GET  /v1/runs/{id}/artifacts[/{session}/{name}]   GET /v1/runs/{id}/diff[/{session}]
  GET  /v1/runs/{id}/asks       open permission requests and asks (the turn waits)
  POST /v1/runs/{id}/asks/{ask_id}  {\"decision\": \"allow_once\"|\"allow_always\"|\"deny\"}
                                or {\"answer\": ...} / {\"decline\": true}; 422 with what it
                                takes when it does not fit; 409 once closed
  GET  /v1/runs/{id}/fleet      the fleet's sessions and routes (a graph)
  GET  /v1/runs/{id}/changes    each coding session's diff and its vetting findings
  GET  /v1/asks                 the open questions of every run    GET /v1/me  the token's name, role
  POST /v1/fleets/validate      a fleet checked as a submission would be; nothing runs
  GET  /healthz  /readyz  /metrics  /openapi.json (the whole API, OpenAPI 3.1)
  GET  /                        the web console (log in with a token; docs/guide/console.md)

Auth: every route but /healthz, /readyz and /openapi.json needs `Authorization: Bearer \
<token>`; a line of the token file is `NAME ROLE SHA256-HEX`. Roles: read (GET), run \
(+ submit, cancel), approve (+ answer asks), admin (everything). A missing or wrong token \
is 401, a role too low 403. Without --token-file the file is --data-dir/tokens.txt, made \
at the first start with an admin token `admin` whose secret is printed once (stdout), and \
the server listens only on a loopback address; a token file with no token is refused at \
start. Tokens never reach the logs, journals or traces.

Web pages: no page but the console's gets anything, whatever it holds. Before its body \
is read, a request whose `Origin` is not the server's own (`http://<Host>`, or \
--public-url's) is 403, one whose `Host` is neither an address the server listens on \
(`localhost` too on loopback) nor --public-url's host is 421 (a DNS-rebinding page), and a \
body is taken only as application/json or application/toml, never text/plain, \
multipart/form-data or application/x-www-form-urlencoded (415).

Agents inherit the server's environment without its secrets: $CAPFLEET_NOTIFY_SECRET \
(and the --notify-secret-env variable), $CAPFLEET_NATS_TOKEN, $CAPFLEET_TOKEN, \
$OTEL_EXPORTER_OTLP_HEADERS and $OTEL_EXPORTER_OTLP_TRACES_HEADERS are removed (a fleet's \
`env` sets its own). A submitted fleet's `[notify]` signs with a secret_file it submits \
(in `files`); secret_env, a variable of the server, is refused.

Sandboxed runs: every submitted session runs under sandbox = \"workspace\" (its \
agent, what it spawns, its terminals and test command confined to its workspace; \
bubblewrap, else Landlock), whether its fleet says so or nothing. A fleet saying \
sandbox = \"none\" ([fleet] or a session) is refused, 400 invalid_fleet with the line \
and key, unless the server was started with --allow-unsandboxed and the token is \
admin: an unsandboxed agent runs as the server's user and can write the token file \
and make itself admin, so no lesser role may ask for it. A host with neither \
backend answers 503 no_sandbox and runs nothing unconfined. The token file, the data \
dir and the secrets' files are hidden from every sandbox. Queued runs are checked \
again at the next start; with --nats the rule travels with the run to the worker.
  capfleet serve --token-file tokens.txt --allow-unsandboxed
      an admin token's fleet may say sandbox = \"none\" (trusted fleets only)

Runs are the engine `capfleet run` drives: the same validation (before anything spawns), \
journal, workspaces and artifacts, under --data-dir/runs/<run-id>/ (the submitted fleet \
and its files in input/; sessions' cwd defaults to the server's working directory; a \
`cwd`, the request's or a session's, resolved with its symlinks, must be inside an \
--allow-root, and without one a submission names none). At \
most --max-runs run at once and --max-sessions sessions live; the next ones wait in a \
FIFO queue of --queue (their position reported), beyond it 429 with Retry-After.

A2A (spec §11.2): --expose AGENT publishes /a2a/<name>/.well-known/agent-card.json \
(the manifest's name, the `cap-protocol/v1` extension, the bearer scheme when there are \
tokens; public) and A2A JSON-RPC at /a2a/<name>/ in the 1.0 and 0.3 spellings \
(SendMessage / message/send, SendStreamingMessage / message/stream, GetTask / \
tasks/get, CancelTask / tasks/cancel, SubscribeToTask / tasks/resubscribe). A new \
context starts a session of the agent, each message is its next turn; permissions \
and asks the client answers through `input-required`. --expose-fleet runs the fleet \
once per message (the message is its task; the answer is the start session's final \
text). Roles: read to get or resubscribe, run to send or cancel, approve to answer an \
input-required. An inbound `traceparent` parents the session's (or run's) span. A \
client must activate the `cap-protocol/v1` extension (its A2A-Extensions header; \
capfleet's own A2A binding does): without it a request is refused with -32008, unless \
--a2a-plain serves it as plain A2A.
  capfleet serve --expose claude-code --expose-fleet review.toml --token-file tokens.txt
      two A2A peers: /a2a/claude-code/ and /a2a/<review's fleet name>/

Distributed runs: with --nats URL[,URL...] a submission is validated here and queued in \
NATS JetStream (201, state `queued`, the run's id at once) for `capfleet worker`s to \
run; its `cwd` is a directory on the worker.

Stopping: SIGTERM or SIGINT stops accepting (submit 503, /readyz 503), lets the runs \
finish for --drain-timeout, then cancels them (journaled as cancelled by shutdown) and \
exits 0 with no agent left; a second signal cancels them at once. The queued runs \
stay queued on disk: the next `capfleet serve` on the data dir runs them first.

Connections: --header-timeout for a request's headers, --idle-timeout for a \
connection with no request in flight, at most --max-connections open (past it the \
oldest idle one is closed for the new one, or, every one busy, the new one is refused \
with 503). The soft open-file limit is raised to the hard one at start.

Notifications: --notify URL (or a fleet's [notify]) POSTs JSON when a session waits for \
an answer, when a run ends, when a budget is crossed, signed `X-Capfleet-Signature: \
sha256=<HMAC-SHA256 of the body>` with the secret in $CAPFLEET_NOTIFY_SECRET (or \
--notify-secret-file); retried with backoff, never holding a run up.

At start, runs of the data dir a dead server (or capfleet run) left marked running are \
ended as interrupted, and the agents they left are killed.")]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Where to listen. A non-loopback address needs --token-file.
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR")]
    pub addr: SocketAddr,
    /// Runs, journals and artifacts (runs/<run-id>/); default .capfleet/ here.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The bearer tokens (`capfleet serve token add`); without it
    /// --data-dir/tokens.txt, made at the first start with an admin token (loopback
    /// only).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// The URL clients reach this server at when it is not --addr (behind a proxy,
    /// e.g. https://fleet.example.com): its host is taken in `Host` and its origin in
    /// `Origin`.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Runs at once, at most.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_runs: usize,
    /// Live sessions (all runs together), at most; a fleet with more is refused.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_sessions: usize,
    /// Runs waiting for admission, at most (beyond: 429).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub queue: usize,
    /// How long an ask or permission request waits for a client's answer before it
    /// is answered fail-safe (deny, or decline).
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = duration)]
    pub ask_timeout: Duration,
    /// Connections open at once, at most: past it the oldest idle one is closed for
    /// the new one, or (none idle) the new one is refused at once with 503. Default:
    /// half the open-file limit (which capfleet raises to its hard limit at start),
    /// and never more than leaves the runs their descriptors.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// How long a client has to send a request's headers before its connection is closed.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = duration)]
    pub header_timeout: Duration,
    /// How long a connection with no request in flight (a keep-alive between
    /// requests, or one that never sent any) stays open.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = duration)]
    pub idle_timeout: Duration,
    /// How long runs may go on after SIGTERM/SIGINT before they are cancelled.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = duration)]
    pub drain_timeout: Duration,
    /// Publish this agent (a registry name or a manifest path) as an A2A peer at
    /// /a2a/<name>/ (repeatable): one session per A2A context, one turn per task.
    #[arg(long = "expose", value_name = "AGENT")]
    pub expose: Vec<String>,
    /// Publish this fleet as one A2A agent at /a2a/<fleet name>/ (repeatable): each
    /// message is a run with the message as its task.
    #[arg(long = "expose-fleet", value_name = "FLEET.toml")]
    pub expose_fleet: Vec<PathBuf>,
    /// Serve exposed agents to A2A clients that do not activate the `cap-protocol/v1`
    /// extension too (as plain A2A: text, task states, artifacts; still authenticated).
    /// Without it they are refused with A2A's ExtensionSupportRequired (-32008), as the
    /// CAP spec asks (§13.5), and the card marks the extension required.
    #[arg(long = "a2a-plain")]
    pub a2a_plain: bool,
    /// A directory a submission's `cwd` may be in, the request's or a session's
    /// (repeatable); without one, a submission names no `cwd` and its sessions work in
    /// the server's directory.
    #[arg(long = "allow-root", value_name = "DIR")]
    pub allow_roots: Vec<PathBuf>,
    /// Let an `admin` token's submission run sessions unsandboxed (`sandbox =
    /// "none"` in its fleet). Without it every submitted session is sandboxed and
    /// `"none"` is refused. Only `admin`: an unsandboxed agent runs as the server's
    /// user and can write the token file, making itself admin.
    #[arg(long = "allow-unsandboxed")]
    pub allow_unsandboxed: bool,
    /// The Jaeger UI the runs' traces are in (e.g. http://localhost:16686): a run's
    /// view (and the web console) links to its trace there, `<URL>/trace/<trace id>`.
    /// Needs traces exported (`--otlp`).
    #[arg(long = "trace-ui", value_name = "URL")]
    pub trace_ui: Option<String>,
    /// With --nats, `POST /v1/runs` queues the run in NATS JetStream for `capfleet
    /// worker`s instead of running it here.
    #[command(flatten)]
    pub nats: capfleet_app::nats::NatsArgs,
    #[command(flatten)]
    pub notify: capfleet_app::notify::NotifyArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ServeCommand {
    /// Manage the token file.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Append a new token to the file and print its secret (once: the file keeps
    /// only its SHA-256).
    Add {
        /// The token's name (journaled with what it does).
        name: String,
        /// What it may do: read, run, approve, admin.
        #[arg(long, value_enum)]
        role: Role,
        /// The token file (made when missing, mode 0600).
        #[arg(long, default_value = "tokens.txt", value_name = "PATH")]
        token_file: PathBuf,
    },
}

/// `30s`, `5m`, `1h`, `250ms`, or plain seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("not a duration: `{s}`"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit in `{s}` (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert!(duration("3d").is_err());
        assert!(duration("x").is_err());
    }
}
