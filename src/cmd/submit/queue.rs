//! `capfleet submit --nats URL`: the run queued in NATS JetStream ([`capfleet_app::enqueue`])
//! for a `capfleet worker`, its id printed. Its sessions run sandboxed on the worker
//! (`sandbox = "none"` is refused here, as `serve` refuses it).

use std::process::ExitCode;

use serde_json::{Value, json};

use super::SubmitArgs;
use capfleet_app::enqueue::{QueueError, enqueue};
use capfleet_app::launch::{EXIT_INVALID, EXIT_SESSION_FAILED};
use capfleet_app::nats::NatsArgs;
use capfleet_app::sandboxing::SandboxRule;
use capfleet_app::style::Style;
use capfleet_app::submission::{Submission, SubmissionError};

/// `capfleet submit --nats URL`: the run queued, its id printed.
pub(super) async fn submit(args: &SubmitArgs, urls: &str, body: Value, err: Style) -> ExitCode {
    let queued = match Submission::from_json(body) {
        Ok(submission) => match args.nats.connect(urls, "capfleet-submit").await {
            Ok(nats) => {
                let traceparent = std::env::var("TRACEPARENT").ok().filter(|t| !t.is_empty());
                enqueue(
                    &nats,
                    args.nats.replicas,
                    &submission,
                    &args.labels,
                    traceparent,
                    // A run queued straight in NATS is a submitted run: sandboxed.
                    SandboxRule::Workspace,
                )
                .await
            }
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(QueueError::Invalid(e)),
    };
    let q = match queued {
        Ok(q) => q,
        Err(QueueError::Invalid(SubmissionError::InvalidFleet(findings))) => {
            for f in findings {
                eprintln!("{} {}", err.err("error:"), f.message);
            }
            return ExitCode::from(EXIT_INVALID);
        }
        Err(e @ (QueueError::Invalid(_) | QueueError::Labels(_))) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
        Err(e @ QueueError::Nats(_)) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_SESSION_FAILED);
        }
    };
    for w in &q.warnings {
        eprintln!("{} {w}", err.warn("warning:"));
    }
    eprintln!(
        "capfleet: run {} queued in NATS ({}, {})",
        q.id,
        NatsArgs::shown(urls),
        q.subject
    );
    if args.json {
        println!(
            "{}",
            json!({ "id": q.id, "fleet": q.fleet, "state": "queued", "subject": q.subject })
        );
    } else {
        println!("{}", q.id);
    }
    ExitCode::SUCCESS
}
