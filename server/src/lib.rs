//! The headless server `capfleet serve` starts. Clients submit fleets over HTTP
//! (`POST /v1/runs`), which run on the engine `capfleet run` uses (the same
//! validation, journal, workspaces and artifacts, under `--data-dir/runs/`), watch
//! them (`GET /v1/runs/{id}`), answer what their policy leaves open ([`asks`]) and
//! cancel them, and read their artifacts and diffs ([`artifacts`]). No web page but
//! the console gets in ([`origin`]); bearer tokens ([`auth`], always: a server without
//! a token file makes one) guard every route but the probes; agents inherit none of
//! the server's secrets ([`capfleet_app::secrets`]); admission ([`state`]) bounds the runs
//! and sessions at once and queues the next ones; SIGTERM/SIGINT drain the server
//! ([`drain`]).
//!
//! ```text
//! routes (auth, metrics) -> submission (parse, write input/, validate)
//!                        -> state (admit | queue | 429) -> driver (run_fleet_stoppable)
//! ```
//!
//! Its public surface is what the binary's `serve` verb (`src/cmd/serve.rs`) and the
//! `run`/`worker`/`mcp` verbs use: [`ServeArgs`] and [`run`], [`mcp::stdio`], the token file's [`add_token`],
//! the stand-alone `/metrics` server ([`metrics_http`]), the fuzz crate's [`fuzzing`].
//!
//! # One file per concept
//!
//! | file | what it does |
//! |---|---|
//! | this file | flags checked (a non-loopback `--addr` needs `--token-file`, `--allow-root`s exist, `--notify`'s secret, `--public-url`), the token file (made with an admin token when none is named), the server's secrets withheld from agents (`app/src/secrets.rs`) and its files (token file, data dir, credentials) hidden from every sandbox it gives, the start sweep, bind, serve, the drain on SIGTERM/SIGINT |
//! | `origin.rs` | the checks every request passes first, before its body is read: `Host` one of the server's (its listening address, `localhost` on loopback, `--public-url`; else 421: DNS rebinding), `Origin` absent or the server's own (else 403: a page of another origin), a body only `application/json` or `application/toml` (else 415: what forms and `no-cors` fetches send) |
//! | `conns.rs`, `fds.rs` | the accept loop on hyper's HTTP/1 server (axum's router per request): header deadline, idle closing (a request is in flight until its response body ends), the connection cap (past it the oldest idle connection is evicted, or the new one refused with 503), each closing counted by why; the soft `RLIMIT_NOFILE` raised to the hard one and the cap kept below it, less a reserve per session |
//! | `queued.rs` | queued runs on disk (`queued.json` beside `input/`, synced before the `201`), left queued by the drain and taken up again, checked as a submission, by the next start |
//! | `sweep.rs` | at start: runs of the data dir whose capfleet died without ending them get `run_ended` (interrupted); their agents are killed by marker (`app/src/orphans.rs`) |
//! | `auth.rs` | the token file (`NAME ROLE SHA256-HEX`), `token add`, the server's file made at its first start (or refused with no token in it), constant-time check of every digest, roles by method and path, slowed failures per address |
//! | `mcp/` | MCP (`capfleet-mcp`'s tools over this server's runs): at `/mcp` over Streamable HTTP behind the auth (each tool checks the role its route would need), and `capfleet mcp`'s local server on stdio |
//! | `start.rs` | a fleet taken in (`POST /v1/runs`, MCP's `start_run`): written to `input/`, validated, kept queued on disk, admitted; a local fleet file by path (`capfleet mcp`) |
//! | `routes.rs` | the routes (each registered with `utoipa_axum::routes!` from its handler's `#[utoipa::path]`), the auth middleware, the `http.request` span and request count per route pattern (`MatchedPath`), submit / list / show / cancel / asks |
//! | `api.rs` | `GET /openapi.json`: the document the routes made, plus what `auth.rs` enforces (bearer scheme, `x-capfleet-role` from `Role::needed`, 401/403 answers); the probes and the document are open |
//! | `args.rs` | `ServeArgs`: the verb's flags, read here at the start (the binary's `serve` verb only parses them) |
//! | `schema.rs` | the app's `Submission` and `Finding` described to the API document (the app has no utoipa; unit tests hold the copies to what the app's types read and write) |
//! | `extract.rs` | typed query and path parameters and JSON bodies whose refusals are `ApiError`s (JSON with a `code`), not axum's plain text |
//! | `body.rs`, `app/src/submission.rs` | the body (`application/toml` or JSON with `files` and `cwd`) written to the run's `input/`, `cwd` checked inside the allowed roots, loaded with `fleet::load_submitted` (the dry run's findings; a session's own `cwd` inside the allowed roots too, `[notify]` signed only with a secret file of the submission; every session sandboxed, see below) |
//! | `state.rs` | the runs (`RunEntry`: progress under a std mutex never held across an await, a `watch` of its state, its stop channel) and admission: `max_runs`, `max_sessions`, a FIFO queue of `queue`, drain |
//! | `driver.rs` | one admitted run: workspaces, `run_fleet_stoppable`, the tally, the end; the queued runs that fit are started from here |
//! | `events.rs` | the SSE stream: the journal file tailed per subscriber (ids = record positions); raw PTY records left out unless `?include_raw=1` |
//! | `asks.rs` | the run's `HumanQuestion`s (the answerer's human channel) held open for the API and notified, answered with `remote:<token>` as the rule, or fail-safe at the fleet's `ask_timeout` (else `--ask-timeout`), withdrawn at the run's end |
//! | `answers.rs` | an ask's answer checked against its form (the JSON Schema subset of CAP §7.5: consts, `oneOf`, types, an object's questions, an array's items) before it reaches the agent: `422` with what it takes, the ask left open |
//! | `artifacts.rs` | the run's `artifacts/` listed and served (canonical paths checked inside it), the workspaces' `diff.patch` |
//! | `view.rs`, `error.rs`, `metrics.rs`, `metrics_http.rs` | the run's JSON, the errors' JSON (`code`), the server's own metrics |
//! | `graph.rs`, `changes.rs`, `validate.rs`, `overview.rs` | a run's fleet as a graph; each session's diff and vetting findings; a fleet checked without running; who the token is and every run's open questions (the web console's reads, below) |
//! | `console/` | the web console's page and assets (below) |
//! | `a2a/` | A2A expose (`--expose`, `--expose-fleet`; below) |
//!
//! Every submitted run is sandboxed (`Server::confinement`): a session that says
//! nothing runs under `sandbox = "workspace"`, and `sandbox = "none"` (in `[fleet]`
//! or on a session) is refused with `400 invalid_fleet` naming `fleet.toml`, the
//! line and the key — on submit, on `/v1/fleets/validate`, again for a queued run at
//! the next start, and in the message a NATS worker obeys. Only an `admin` token on
//! a server started with `--allow-unsandboxed` may ask for `"none"`: an unsandboxed
//! agent can write the token file and make itself admin, so no lesser role may. A
//! host with no sandbox backend answers `503 no_sandbox` (naming what is missing)
//! rather than run anything unconfined. The server's token file and data dir are
//! hidden from every sandbox it gives. Agents exposed over A2A (`--expose`,
//! `--expose-fleet`) run as their fleet or manifest says: the operator's, not a
//! submission.
//!
//! A run is stopped alone with `run::Stop::Cancel(reason)` on `run_fleet_stoppable`'s
//! channel: cooperative like SIGINT, and unlike a signal it leaves the process-wide
//! urgency (`process::halt`) alone, so cancelling one run never hurries another's
//! agents. The server's own signals never reach `run_fleet`: the drain cancels each run
//! with `cancelled by shutdown`, and only a signal during the drain raises the urgency.
//! The server's "human" is its clients: each run's `RunSpec.human` channel feeds
//! `asks.rs` (unless the fleet says `auto_answer`), so a question waits — its turn
//! suspended — for a `POST .../asks/{ask_id}` or its timeout.

mod a2a;
mod answers;
mod api;
mod args;
mod artifacts;
mod asks;
mod auth;
mod body;
mod changes;
mod conns;
mod console;
mod driver;
mod error;
mod events;
mod extract;
mod fds;
#[doc(hidden)]
pub mod fuzzing;
mod graph;
pub mod mcp;
mod metrics;
pub mod metrics_http;
mod origin;
mod overview;
mod queued;
mod remote;
mod routes;
mod schema;
mod start;
mod state;
mod sweep;
mod validate;
mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use args::{ServeArgs, ServeCommand, TokenCommand, duration as parse_duration};
pub use auth::{Role, TokenError, add as add_token};
use capfleet_engine::telemetry::metrics::FleetMetrics;
use capfleet_wire::process::halt::{self, Urgency};

use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::notify::{Notifier, Workers};
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;
use state::{Limits, Server};

/// How long open connections (event streams of ended runs, idle keep-alives) get to
/// close once the runs are over.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Serve as `args` say (`capfleet serve` without `token add`) until a signal has
/// drained the runs.
pub fn run(args: ServeArgs, color: ColorChoice) -> ExitCode {
    // Before any thread: the descriptors the server may hold.
    let nofile = fds::raise_nofile();
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(serve(args, nofile, color))
}

/// The connection limits for the open-file limit `nofile` (the cap said on stderr).
fn conn_limits(args: &ServeArgs, nofile: u64) -> conns::ConnLimits {
    let reserved = fds::reserve(args.max_sessions);
    let (max, lowered) = fds::connection_cap(args.max_connections, nofile, reserved);
    if let Some(why) = lowered {
        capfleet_app::logging::note(&format!("capfleet: {why}"));
    }
    eprintln!(
        "capfleet: at most {max} connections (open-file limit {nofile}, {reserved} kept for the runs); headers within {}s, idle ones closed after {}s",
        args.header_timeout.as_secs_f64(),
        args.idle_timeout.as_secs_f64()
    );
    conns::ConnLimits {
        max,
        header_timeout: args.header_timeout,
        idle_timeout: args.idle_timeout,
    }
}

async fn serve(args: ServeArgs, nofile: u64, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    // Before anything: signals drain the server instead of ending it.
    let signals = StopSignals::all();
    let telemetry = match Telemetry::start(color, &args.telemetry) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let code = match bind(&args, &telemetry).await {
        Ok((server, listener, serving, workers)) => {
            let data_dir = server
                .runs_dir
                .parent()
                .unwrap_or(&server.runs_dir)
                .to_owned();
            let exposed = a2a::expose(
                server.clone(),
                &args.expose,
                &args.expose_fleet,
                args.a2a_plain,
                a2a::Base::new(
                    args.public_url.as_deref(),
                    listener.local_addr().unwrap_or(args.addr),
                ),
                &data_dir,
                telemetry.traceparent(),
            )
            .await;
            let code = match exposed {
                Ok(exposed) => {
                    let limits = conn_limits(&args, nofile);
                    // Said once everything is up (tests and scripts wait for this line).
                    eprintln!("{serving}");
                    listen(
                        server,
                        listener,
                        limits,
                        signals,
                        args.drain_timeout,
                        exposed,
                    )
                    .await
                }
                Err(e) => {
                    eprintln!("{} {e}", err.err("error:"));
                    ExitCode::from(EXIT_INVALID)
                }
            };
            workers.finish(CLOSE_GRACE).await;
            code
        }
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            ExitCode::from(EXIT_INVALID)
        }
    };
    telemetry.finish().await;
    code
}

/// Why the server does not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("{0}")]
    Tokens(#[from] auth::TokenError),
    #[error("{0}")]
    PublicUrl(#[from] origin::PublicUrlError),
    #[error(
        "--addr {0} is not a loopback address: a server other machines reach needs --token-file (`capfleet serve token add NAME --role ROLE`)"
    )]
    Open(SocketAddr),
    #[error("--max-runs and --max-sessions must be at least 1")]
    Limits,
    #[error("the data dir: {0}")]
    DataDir(std::io::Error),
    #[error("--allow-root {}: {source}", path.display())]
    AllowRoot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Notify(String),
    #[error("{0}")]
    Nats(#[from] capfleet_app::nats::NatsError),
    #[error("--addr {addr}: cannot listen: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

async fn bind(
    args: &ServeArgs,
    telemetry: &Telemetry,
) -> Result<(Arc<Server>, tokio::net::TcpListener, String, Workers), StartError> {
    if args.token_file.is_none() && !args.addr.ip().is_loopback() {
        return Err(StartError::Open(args.addr));
    }
    if args.max_runs == 0 || args.max_sessions == 0 {
        return Err(StartError::Limits);
    }
    let origins = Arc::new(origin::Origins::new(
        args.addr.ip(),
        args.public_url.as_deref(),
    )?);
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(StartError::DataDir)?
            .join(".capfleet"),
    };
    let runs_dir: PathBuf = data_dir.join("runs");
    std::fs::create_dir_all(&runs_dir).map_err(StartError::DataDir)?;
    let runs_dir = std::fs::canonicalize(&runs_dir).map_err(StartError::DataDir)?;
    let tokens = server_tokens(args, &data_dir)?;
    capfleet_app::secrets::withhold(&[args.notify.notify_secret_env.as_str()]);
    let allow_roots = args
        .allow_roots
        .iter()
        .map(|p| {
            std::fs::canonicalize(p)
                .and_then(|c| {
                    c.is_dir().then_some(c).ok_or_else(|| {
                        std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory")
                    })
                })
                .map_err(|source| StartError::AllowRoot {
                    path: p.clone(),
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let hook = args.notify.spec().map_err(StartError::Notify)?;
    sweep::report(&runs_dir);
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|source| StartError::Listen {
            addr: args.addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: args.addr,
        source,
    })?;
    let serving = format!(
        "capfleet: serving on http://{addr} (bearer tokens); runs in {}",
        runs_dir.display()
    );
    let limits = Limits {
        max_runs: args.max_runs,
        max_sessions: args.max_sessions,
        queue: args.queue,
    };
    let metrics = Arc::new(FleetMetrics::new(
        telemetry.span_stats().unwrap_or_default(),
    ));
    let mut server = Server::new(runs_dir, tokens, limits, metrics);
    server.origins = origins;
    server.ask_timeout = args.ask_timeout;
    server.allow_roots = allow_roots;
    server.allow_unsandboxed = args.allow_unsandboxed;
    server.hidden = server_files(args, &data_dir);
    server.trace_ui = args
        .trace_ui
        .as_deref()
        .map(|u| u.trim_end_matches('/').to_owned());
    if let Some(urls) = &args.nats.urls {
        let nats = args.nats.connect(urls, "capfleet-serve").await?;
        nats.runs_stream(args.nats.replicas).await?;
        server.queue = Some((nats, args.nats.replicas));
    }
    let (notifier, workers) = Notifier::start(hook.into_iter().collect(), &server.metrics.notify);
    server.notifier = notifier;
    let server = Arc::new(server);
    queued::resume(&server).await;
    Ok((server, listener, serving, workers))
}

/// The token file (`--token-file`, else `<data dir>/tokens.txt`, made at the first
/// start with an admin token whose secret is printed here, once); refused without a
/// token in it.
// The first token's secret goes to stdout, once (as `serve token add` prints one).
#[allow(clippy::print_stdout)]
fn server_tokens(args: &ServeArgs, data_dir: &std::path::Path) -> Result<auth::Tokens, StartError> {
    let path = match &args.token_file {
        Some(p) => p.clone(),
        None => data_dir.join(TOKEN_FILE),
    };
    let (tokens, made) = auth::for_server(&path, args.token_file.is_none())?;
    if let Some(secret) = made {
        eprintln!(
            "capfleet: no --token-file: made {} with the admin token `{}`; its secret, shown this once:",
            path.display(),
            auth::FIRST_TOKEN
        );
        println!("{secret}");
    }
    Ok(tokens)
}

/// The token file in the data dir, when no `--token-file` names one.
const TOKEN_FILE: &str = "tokens.txt";

/// What every sandbox the server gives hides beside the usual roots: its token file
/// (which an agent could read, or write to make itself admin), its data dir (every
/// run's journal and input), and the files of its secrets (NATS credentials, the
/// webhook's secret). Absolute, so that they name the same files in every session.
fn server_files(args: &ServeArgs, data_dir: &std::path::Path) -> Vec<PathBuf> {
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| data_dir.join(TOKEN_FILE));
    [
        Some(token_file),
        Some(data_dir.to_owned()),
        args.nats.creds.clone(),
        args.notify.notify_secret_file.clone(),
    ]
    .into_iter()
    .flatten()
    .map(|p| std::path::absolute(&p).unwrap_or(p))
    .collect()
}

/// Serve until a signal has drained the runs, then close.
async fn listen(
    server: Arc<Server>,
    listener: tokio::net::TcpListener,
    limits: conns::ConnLimits,
    signals: StopSignals,
    drain_timeout: Duration,
    exposed: Arc<a2a::Exposed>,
) -> ExitCode {
    let (closing, closed) = tokio::sync::watch::channel(false);
    let app = routes::router(server.clone(), exposed.router());
    let mut served = tokio::spawn(conns::serve(listener, app, limits, server.clone(), closed));
    tokio::select! {
        () = drain(&server, &exposed, signals, drain_timeout) => {}
        stopped = &mut served => {
            tracing::error!("the server stopped: {stopped:?}");
            server.drain();
            server.cancel_all("shutdown");
            server.idle().await;
            exposed.shutdown().await;
            capfleet_mcp::late_calls_written().await;
            return ExitCode::FAILURE;
        }
    }
    // The runs are over: the exposed agents' sessions close, their agents with them.
    exposed.shutdown().await;
    closing.send_replace(true);
    if tokio::time::timeout(CLOSE_GRACE, &mut served)
        .await
        .is_err()
    {
        served.abort();
    }
    // The tool calls on ended runs, answered before the close, are on disk.
    capfleet_mcp::late_calls_written().await;
    eprintln!("capfleet: every run has ended; the server stopped");
    ExitCode::SUCCESS
}

/// The first signal stops admissions (the queued runs stay queued on disk for the
/// next start, [`queued`]; the exposed agents take no new message) and lets the running runs and A2A turns go on for
/// `timeout`; then, or at a second signal, they are cancelled (journaled as cancelled
/// by shutdown). A signal after that kills every agent now.
async fn drain(
    server: &Server,
    exposed: &a2a::Exposed,
    mut signals: StopSignals,
    timeout: Duration,
) {
    let first = signals.recv().await;
    capfleet_app::logging::note(&format!(
        "capfleet: {first}: draining: no new runs; the running ones have {}s to finish",
        timeout.as_secs_f64()
    ));
    server.drain();
    exposed.close();
    let idle = async {
        server.idle().await;
        exposed.idle().await;
    };
    tokio::select! {
        () = idle => return,
        () = tokio::time::sleep(timeout) => {
            capfleet_app::logging::note("capfleet: the drain timeout has passed: cancelling every run");
        }
        again = signals.recv() => {
            capfleet_app::logging::note(&format!("capfleet: {again} again: cancelling every run now"));
            halt::escalate(Urgency::Halt);
        }
    }
    server.cancel_all("shutdown");
    exposed.cancel_all();
    tokio::select! {
        () = server.idle() => {}
        again = signals.recv() => {
            capfleet_app::logging::note(&format!("capfleet: {again}: killing every agent now"));
            halt::escalate(Urgency::Force);
            server.idle().await;
        }
    }
}
