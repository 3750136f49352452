//! `capfleet log <run-id>|latest`: a run's journal, one line per record — time,
//! session, turn, kind, summary — or the raw lines (`--json`); `--follow` tails it
//! until the run has ended (its `run_ended` record, then the sessions' last records),
//! its orchestrator died without ending it (the run's lock is free: the run was
//! abandoned, said with the command that starts it again), or Ctrl-C. A torn last
//! record (a writer stopped mid-line, even inside a UTF-8 character) is reported and
//! everything before it printed.

use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use capfleet_app::fleet::run_dir::{LATEST, Orchestrator, Owner, RunDir};
use capfleet_app::human::fit::Fit;
use capfleet_app::style::{ColorChoice, Style};

use capfleet_app::human::event_line::{Look, line_at, session_of};

/// How often `--follow` looks for new records.
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet log latest
      the most recent run, readably
  capfleet log 20261130T121500Z-3fa9 -f
      follow a run until it ends
  capfleet log latest --session worker-a
      one session's records
  capfleet log latest --json | jq .
      the raw JSONL records")]
pub(crate) struct LogArgs {
    /// The run id (a directory of .capfleet/runs) or `latest`.
    #[arg(default_value = LATEST)]
    pub run: String,
    /// Keep printing records as they are written, until the run ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only this session's records (its name or URN).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Print the raw JSONL records.
    #[arg(long)]
    pub json: bool,
    /// The directory the run was started from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Read the run's journal from NATS JetStream (a run queued with `submit --nats`),
    /// from any host.
    #[command(flatten)]
    pub nats: capfleet_app::nats::NatsArgs,
}

pub(crate) fn run(args: LogArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    if let Some(urls) = args.nats.urls.clone() {
        return from_nats(&args, &urls, color);
    }
    let run = match super::find_run(args.dir.as_deref(), &args.run, color) {
        Ok(run) => run,
        Err(code) => return code,
    };
    let fit = Fit::stderr();
    let say = |line: String| eprintln!("{}", fit.wrap(&line, 4));
    match print_journal(&run, &args, Style::for_stdout(color)) {
        Ok(end) => {
            if end.torn > 0 {
                say(format!(
                    "{} {}: the last record is torn ({} bytes without an end of line, the \
                     writer stopped mid-record); every record before it is printed",
                    err.warn("warning:"),
                    fit.path(&run.journal()),
                    end.torn
                ));
            }
            if let Some(want) = args.session.as_deref()
                && end.seen.matched == 0
                && end.abandoned.is_none()
            {
                let known: Vec<&str> = end.seen.sessions.iter().map(String::as_str).collect();
                say(format!(
                    "{} run {} has no session `{want}` (sessions: {})",
                    err.err("error:"),
                    run.id,
                    if known.is_empty() {
                        "none yet".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
                return ExitCode::from(2);
            }
            match end.abandoned {
                None => ExitCode::SUCCESS,
                Some(owner) => {
                    say(format!(
                        "{} the run's orchestrator (pid {}) is gone and the run never ended: \
                         it was abandoned. capfleet cannot resume a run; start it again with \
                         `cd {} && capfleet run {}`",
                        err.err("error:"),
                        owner.pid,
                        owner.cwd.display(),
                        owner.fleet.display()
                    ));
                    ExitCode::FAILURE
                }
            }
        }
        // The reader went away (`| head`): nothing more to say.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            say(format!(
                "{} {}: {e}",
                err.err("error:"),
                fit.path(&run.journal())
            ));
            ExitCode::FAILURE
        }
    }
}

/// How printing a journal ended.
#[derive(Debug, Default)]
struct End {
    /// Bytes of a last record without its end of line (never printed).
    torn: usize,
    /// Following, the orchestrator died before the run ended.
    abandoned: Option<Owner>,
    /// What the `--session` filter saw.
    seen: Seen,
}

/// The sessions a journal names, and how many records passed `--session`.
#[derive(Debug, Default)]
struct Seen {
    sessions: std::collections::BTreeSet<String>,
    matched: u64,
}

fn print_journal(run: &RunDir, args: &LogArgs, style: Style) -> std::io::Result<End> {
    let path = run.journal();
    let mut offset = 0u64;
    // Bytes of a record not ended yet (being written, or torn); lines are bytes until
    // complete, so a record cut inside a UTF-8 character is no read error.
    let mut pending = Vec::new();
    let mut out = std::io::stdout().lock();
    // Seen `run_ended`: the sessions' last records (closing) may still follow; stop
    // once a poll finds nothing new.
    let mut ended = false;
    // Following, the orchestrator was seen gone: one more poll reads what it wrote
    // last, then the run counts as abandoned.
    let mut gone = None;
    let mut seen = Seen::default();
    let fit = Fit::stdout();
    loop {
        let mut fresh = false;
        match std::fs::File::open(&path) {
            Ok(mut file) => {
                file.seek(SeekFrom::Start(offset))?;
                let mut reader = BufReader::new(file);
                loop {
                    let n = reader.read_until(b'\n', &mut pending)?;
                    if n == 0 {
                        break;
                    }
                    offset += n as u64;
                    fresh = true;
                    if pending.last() != Some(&b'\n') {
                        continue; // a record being written: wait for the rest
                    }
                    let line = std::mem::take(&mut pending);
                    ended |= print_line(&line, args, (style, &fit), &mut seen, &mut out)?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && args.follow => {}
            Err(e) => return Err(e),
        }
        out.flush()?;
        if !args.follow || (ended && !fresh) {
            return Ok(End {
                torn: pending.len(),
                abandoned: None,
                seen,
            });
        }
        if !fresh && !ended {
            if let Some(owner) = gone.take() {
                return Ok(End {
                    torn: pending.len(),
                    abandoned: Some(owner),
                    seen,
                });
            }
            if let Orchestrator::Gone(owner) = run.orchestrator() {
                gone = Some(owner);
                continue;
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Print one complete line of the journal; true when it ends the run.
fn print_line(
    line: &[u8],
    args: &LogArgs,
    look: Look<'_>,
    seen: &mut Seen,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    let style = look.0;
    match std::str::from_utf8(line) {
        Ok(text) => print_record(text.trim_end(), args, look, seen, out),
        Err(_) => {
            let lossy = String::from_utf8_lossy(line);
            writeln!(
                out,
                "{} {}",
                style.warn("(unreadable record, not UTF-8)"),
                lossy.trim_end()
            )?;
            Ok(false)
        }
    }
}

/// Print one record (if it passes the filter); true when it ends the run.
fn print_record(
    raw: &str,
    args: &LogArgs,
    (style, fit): Look<'_>,
    seen: &mut Seen,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    if raw.is_empty() {
        return Ok(false);
    }
    let Ok(Value::Object(rec)) = serde_json::from_str::<Value>(raw) else {
        writeln!(out, "{} {raw}", style.warn("(unreadable record)"))?;
        return Ok(false);
    };
    let kind = rec.get("type").and_then(Value::as_str).unwrap_or("?");
    let ended = kind == "run_ended";
    let session = session_of(&rec);
    let stream = rec.get("urn").and_then(Value::as_str).unwrap_or("");
    let not_session = ["/router", "/workspace", "/mcp"];
    if !not_session.iter().any(|s| stream.ends_with(s)) && session != "-" {
        seen.sessions.insert(session.to_owned());
    }
    if let Some(want) = &args.session {
        let urn = rec.get("urn").and_then(Value::as_str);
        // A workspace record (artifact, vetting warning) names its session in `_meta`.
        let owner = rec
            .get("event")
            .and_then(|e| e.get("_meta"))
            .and_then(|m| m.get("capfleet.session"))
            .and_then(Value::as_str);
        let owned = owner.is_some_and(|o| o == want || o.rsplit('/').next() == Some(want));
        if session != want.as_str() && urn != Some(want.as_str()) && !owned {
            return Ok(ended);
        }
        seen.matched += 1;
    }
    if args.json {
        writeln!(out, "{raw}")?;
        return Ok(ended);
    }
    writeln!(out, "{}", line_at(&rec, style, fit))?;
    Ok(ended)
}

/// `capfleet log --nats URL RUN`: the run's journal as JetStream has it (what its
/// workers have published so far), printed as a local one is.
fn from_nats(args: &LogArgs, urls: &str, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    if args.follow || args.session.is_some() {
        eprintln!(
            "{} --nats reads the journal as published so far: without --follow or --session",
            err.err("error:")
        );
        return ExitCode::from(2);
    }
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let replayed = runtime.block_on(async {
        let nats = args.nats.connect(urls, "capfleet-log").await?;
        nats.replay(&args.run, args.nats.replicas).await
    });
    let records = match replayed {
        Ok((records, _)) => records,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(1);
        }
    };
    if records.is_empty() {
        eprintln!(
            "{} no journal of run `{}` in NATS (not started yet, or no such run)",
            err.err("error:"),
            args.run
        );
        return ExitCode::from(2);
    }
    let style = Style::for_stdout(color);
    let fit = Fit::stdout();
    let mut out = std::io::stdout().lock();
    for r in &records {
        let text = String::from_utf8_lossy(r);
        let printed = if args.json {
            writeln!(out, "{text}")
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(rec)) => writeln!(out, "{}", line_at(&rec, style, &fit)),
                _ => writeln!(out, "{text}"),
            }
        };
        if printed.is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}
