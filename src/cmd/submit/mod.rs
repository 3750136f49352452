//! `capfleet submit fleet.toml --server URL`: the CI client of `capfleet serve`. The
//! fleet goes with the files it references, wherever they are ([`bundle`]: scripts,
//! manifests, nested fleets, an `@file` task, any `--file`); with `--wait` the run's events follow (as
//! `capfleet log` prints them, or NDJSON with `--json`), the stream resumed with
//! `Last-Event-ID` whenever it drops, and the exit code is the run's.

mod bundle;
mod queue;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::Method;
use serde_json::{Map, Value, json};

use capfleet_app::client::{Client, ClientError, failed, token};
use capfleet_app::launch::{EXIT_INVALID, EXIT_SESSION_FAILED};
use capfleet_app::nats::NatsArgs;
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet submit fleet.toml --nats nats://10.0.0.5:4222 --label gpu
      queue the run in NATS JetStream for a `capfleet worker` with the label gpu; \
prints the run id at once
  CAPFLEET_TOKEN=... capfleet submit fleet.toml --server http://build:7878 --wait
      submit, follow the run's events, exit with the run's exit code
  capfleet submit fleet.toml --server http://127.0.0.1:7878 --json
      print the server's answer (id, state, links) and return at once
  capfleet runs --server http://127.0.0.1:7878
      the server's runs

Every file the fleet references goes with it, wherever it is on this machine: its \
sessions' `script`s, manifests given by path (`agent`), nested fleets (`fleet`, with \
what they reference) and an `@file` task; --file adds others. In the upload each takes \
its path from the fleet's directory (a step up spelled `_up`, so `../sim/a.toml` is \
`_up/sim/a.toml`), and the references are rewritten to match. The token is read from \
the environment variable --token-env names (default CAPFLEET_TOKEN), never from the \
command line.

A submitted run is sandboxed: each session runs under sandbox = \"workspace\" on the \
server or the NATS worker, and a fleet saying sandbox = \"none\" is refused (only an \
admin token, on a server started with --allow-unsandboxed, may ask for it).

Exit codes (with --wait, the run's): 0 completed, 1 a session failed (or the server \
could not be reached), 2 invalid fleet or bad usage (or a refused token), 3 budget \
exceeded, 130 interrupted or cancelled. Without --wait: 0 once the run is accepted.")]
pub(crate) struct SubmitArgs {
    /// The fleet file.
    #[arg(value_name = "FLEET.toml")]
    pub fleet: PathBuf,
    /// The server's base URL (e.g. http://127.0.0.1:7878).
    #[arg(
        long,
        value_name = "URL",
        required_unless_present = "urls",
        conflicts_with = "urls"
    )]
    pub server: Option<String>,
    /// Queue the run in NATS JetStream instead, for `capfleet worker`s to take.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// A label the worker that runs it must have (with --nats).
    #[arg(long = "label", value_name = "LABEL", requires = "urls")]
    pub labels: Vec<String>,
    /// The environment variable holding the bearer token.
    #[arg(long, value_name = "VAR", default_value = "CAPFLEET_TOKEN")]
    pub token_env: String,
    /// Replace the fleet's task (`@path` reads it from a file here).
    #[arg(long, short = 't')]
    pub task: Option<String>,
    /// Another file to send with the fleet (relative to its directory).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// Where on the server the sessions that name no `cwd` work: a directory inside a
    /// root the server allows (`serve --allow-root`).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Follow the run to its end and exit with its exit code.
    #[arg(long, conflicts_with = "urls")]
    pub wait: bool,
    /// Machine-readable output: the server's answers and every record as NDJSON.
    #[arg(long)]
    pub json: bool,
}

/// A dropped event stream is resumed after this pause, at most this many times in a row.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
const RECONNECTS: u32 = 120;

pub(crate) fn run(args: SubmitArgs, color: ColorChoice) -> ExitCode {
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(submit(args, color))
}

async fn submit(args: SubmitArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let body = match submission(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let server = match (&args.server, &args.nats.urls) {
        (Some(server), _) => server,
        (None, Some(urls)) => return queue::submit(&args, urls, body, err).await,
        (None, None) => return ExitCode::from(EXIT_INVALID),
    };
    let client = match Client::new(server, token(&args.token_env)) {
        Ok(c) => c,
        Err(e) => return failed(&e, err),
    };
    let created = match client.call(Method::POST, "/v1/runs", Some(&body)).await {
        Ok(c) => c,
        Err(e) => return failed(&e, err),
    };
    let id = created["id"].as_str().unwrap_or_default().to_owned();
    let position = created["queue_position"]
        .as_u64()
        .map_or_else(String::new, |p| format!(", position {p} in the queue"));
    eprintln!(
        "capfleet: run {id} submitted to {server} ({}{position})",
        created["state"].as_str().unwrap_or("?")
    );
    if args.json {
        println!("{created}");
    } else if !args.wait {
        println!("{id}");
    }
    if !args.wait {
        return ExitCode::SUCCESS;
    }
    if let Err(e) = follow(&client, &id, args.json, Style::for_stdout(color)).await {
        return failed(&e, err);
    }
    match client
        .call(Method::GET, &format!("/v1/runs/{id}"), None)
        .await
    {
        Ok(run) => {
            if args.json {
                println!("{run}");
            }
            let code = run["exit_code"]
                .as_u64()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(EXIT_SESSION_FAILED);
            eprintln!(
                "capfleet: run {id}: {} ({}), exit code {code}",
                run["state"].as_str().unwrap_or("?"),
                run["outcome"].as_str().unwrap_or("no outcome")
            );
            ExitCode::from(code)
        }
        Err(e) => failed(&e, err),
    }
}

/// Print the run's records until its stream's `end`, resuming after the last one
/// seen whenever the stream drops.
async fn follow(client: &Client, id: &str, json: bool, style: Style) -> Result<(), ClientError> {
    let mut last = 0u64;
    let mut drops = 0;
    loop {
        let mut events = match client.events(id, last).await {
            Ok(s) => s,
            Err(ClientError::Transport { .. }) if drops < RECONNECTS => {
                drops += 1;
                tokio::time::sleep(RECONNECT_PAUSE).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            if event.event == "end" {
                return Ok(());
            }
            if event.data.is_empty() {
                continue;
            }
            if let Ok(seq) = event.id.parse::<u64>() {
                last = seq;
            }
            drops = 0;
            if json {
                println!("{}", event.data);
            } else if let Ok(Value::Object(record)) = serde_json::from_str::<Value>(&event.data) {
                println!("{}", capfleet_app::human::event_line::line(&record, style));
            }
        }
        drops += 1;
        if drops > RECONNECTS {
            return Err(ClientError::Client(format!(
                "the event stream of run {id} kept dropping ({RECONNECTS} reconnections)"
            )));
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// Why a submission could not be put together.
#[derive(Debug, thiserror::Error)]
enum SubmissionError {
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    #[error("--task {}: {source}", path.display())]
    Task {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The JSON body: the fleet, the task, the files it references ([`bundle`]).
fn submission(args: &SubmitArgs) -> Result<Value, SubmissionError> {
    let bundle = bundle::pack(&args.fleet, &args.files)?;
    let task = match args.task.as_deref() {
        Some(t) => Some(match t.strip_prefix('@') {
            Some(file) => {
                std::fs::read_to_string(file).map_err(|source| SubmissionError::Task {
                    path: PathBuf::from(file),
                    source,
                })?
            }
            None => t.to_owned(),
        }),
        None => None,
    };
    let mut body = Map::new();
    body.insert("fleet".into(), json!(bundle.fleet));
    if let Some(t) = task {
        body.insert("task".into(), json!(t));
    }
    body.insert("files".into(), json!(bundle.files));
    if let Some(cwd) = &args.cwd {
        body.insert("cwd".into(), json!(cwd));
    }
    Ok(Value::Object(body))
}
