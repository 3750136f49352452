//! `capfleet workers --nats URL`: the workers present (their presence in NATS:
//! labels, the runs they hold, their last heartbeat, whether they drain) and how
//! many runs wait in the queue.

use std::process::ExitCode;

use capfleet_app::nats::NatsArgs;
use capfleet_app::nats::presence;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_wire::clock::now_ms;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet workers --nats nats://10.0.0.5:4222
      each worker: labels, runs held of its --max-runs, last heartbeat; the queue's depth
  capfleet workers --nats nats://10.0.0.5:4222 --json
      one JSON object per worker")]
pub(crate) struct WorkersArgs {
    #[command(flatten)]
    pub nats: NatsArgs,
    /// One JSON object per worker.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(args: WorkersArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let Some(urls) = args.nats.urls.clone() else {
        eprintln!(
            "{} `capfleet workers` needs --nats URL[,URL...]",
            err.err("error:")
        );
        return ExitCode::from(2);
    };
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let read = runtime.block_on(async {
        let nats = args.nats.connect(&urls, "capfleet-workers").await?;
        // A presence lapses after three lease TTLs; any TTL reads the bucket.
        let store = nats
            .presence(std::time::Duration::from_secs(30), args.nats.replicas)
            .await?;
        let workers = presence::all(&store).await?;
        let depth = nats.queue_depth(args.nats.replicas).await?;
        Ok::<_, capfleet_app::nats::NatsError>((workers, depth))
    });
    let (workers, depth) = match read {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(1);
        }
    };
    if args.json {
        for w in &workers {
            println!("{}", serde_json::to_string(w).unwrap_or_default());
        }
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<28} {:<16} {:>6} {:>10}  runs",
        "worker", "labels", "held", "heartbeat"
    );
    let now = now_ms();
    for w in &workers {
        let labels = if w.labels.is_empty() {
            "-".to_owned()
        } else {
            w.labels.join(",")
        };
        let age = format!("{:.1}s ago", now.saturating_sub(w.beat_ms) as f64 / 1000.0);
        let state = if w.draining { " (draining)" } else { "" };
        println!(
            "{:<28} {:<16} {:>6} {:>10}  {}{state}",
            w.worker,
            labels,
            format!("{}/{}", w.runs.len(), w.max_runs),
            age,
            if w.runs.is_empty() {
                "-".to_owned()
            } else {
                w.runs.join(" ")
            }
        );
    }
    println!("{} worker(s); {depth} run(s) queued or held", workers.len());
    ExitCode::SUCCESS
}
