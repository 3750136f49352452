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

use serde_json::{Map, Value};

use crate::fleet::run_dir::{LATEST, Orchestrator, Owner, RunDir};
use crate::human::fit::Fit;
use crate::style::{ColorChoice, Style};

/// How often `--follow` looks for new records.
const POLL: Duration = Duration::from_millis(200);
/// Longest summary printed per record.
const SUMMARY_MAX: usize = 120;

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
    pub nats: crate::nats::NatsArgs,
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

/// How a record is shown: styled, and fit to stdout's width.
pub(crate) type Look<'a> = (Style, &'a Fit);

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
    if !stream.ends_with("/router") && !stream.ends_with("/workspace") && session != "-" {
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
    let runtime = match crate::cmd::one_session::runtime() {
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

/// One record as a readable line: time, session, turn, kind, summary; fit to
/// stdout's width as it is now.
pub(crate) fn line(rec: &Map<String, Value>, style: Style) -> String {
    line_at(rec, style, &Fit::stdout_columns())
}

/// One record as a readable line, fit to `fit`.
pub(crate) fn line_at(rec: &Map<String, Value>, style: Style, fit: &Fit) -> String {
    let kind = rec.get("type").and_then(Value::as_str).unwrap_or("?");
    let ts_ms = rec.get("ts_ms").and_then(Value::as_u64);
    let turn = rec.get("turn").and_then(Value::as_u64);
    let session = session_of(rec);
    let (kind, summary) = describe(kind, rec);
    row(ts_ms, session, turn, &kind, &summary, (style, fit))
}

/// The printed line of one record, from its parts (`run`'s line mode prints an
/// agent's text through this without building the record). With a width, a summary
/// that does not fit goes on under itself (or, when too little room is left there,
/// under the session), broken between words.
pub(crate) fn row(
    ts_ms: Option<u64>,
    session: &str,
    turn: Option<u64>,
    kind: &str,
    summary: &str,
    (style, fit): Look<'_>,
) -> String {
    let time = ts_ms.map_or_else(|| "--:--:--.---".to_owned(), clock);
    let turn = turn.map_or_else(|| "-".to_owned(), |t| format!("t{t}"));
    // Padded before it is styled: the escapes take no column.
    let head = format!(
        "{}  {session:<12} {turn:<4} {} ",
        style.dim(&time),
        style.bold(&format!("{kind:<24}")),
    );
    let summary = shorten(summary, fit.width().is_some());
    fit.hang(&head, &summary, time.len() + 2)
}

/// The session a record belongs to: the last URN segment, a `session` field, or `-`.
fn session_of(rec: &Map<String, Value>) -> &str {
    if let Some(urn) = rec.get("urn").and_then(Value::as_str) {
        return urn.rsplit('/').next().unwrap_or(urn);
    }
    rec.get("session").and_then(Value::as_str).unwrap_or("-")
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds.
pub(crate) fn clock(ts_ms: u64) -> String {
    let (secs, ms) = (ts_ms / 1000, ts_ms % 1000);
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{ms:03}",
        day / 3600,
        day % 3600 / 60,
        day % 60
    )
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// A list of names (`from`, `cancelled`) joined with ` + `.
fn names(v: Option<&Value>) -> String {
    v.and_then(Value::as_array).map_or(String::new(), |a| {
        a.iter()
            .map(|v| text(Some(v)))
            .collect::<Vec<_>>()
            .join(" + ")
    })
}

/// A record's kind (the CAP kind for agent events) and a one-line summary.
fn describe(kind: &str, rec: &Map<String, Value>) -> (String, String) {
    let f = |k: &str| text(rec.get(k));
    match kind {
        "cap" => {
            let event = rec.get("event").and_then(Value::as_object);
            let cap_kind = event
                .and_then(|e| e.get("kind"))
                .map_or("cap".into(), |k| text(Some(k)));
            (cap_kind, event.map_or_else(String::new, cap_summary))
        }
        "state" => ("state".into(), format!("{} -> {}", f("from"), f("to"))),
        "turn_started" => (
            "turn_started".into(),
            format!(
                "attempt {}, prompt {} bytes",
                f("attempt"),
                f("prompt_bytes")
            ),
        ),
        "turn_ended" => (
            "turn_ended".into(),
            format!(
                "{} ({}) in {} ms",
                f("outcome"),
                f("stop_reason"),
                f("duration_ms")
            ),
        ),
        "restart" => (
            "restart".into(),
            format!(
                "attempt {} in {} ms: {}",
                f("attempt"),
                f("delay_ms"),
                f("cause")
            ),
        ),
        "paused" => (
            "paused".into(),
            format!(
                "pause {} until {} UTC ({}): {}",
                f("pause"),
                rec.get("until_ms")
                    .and_then(Value::as_u64)
                    .map_or_else(|| "?".into(), clock),
                f("source"),
                f("reason")
            ),
        ),
        "failed" => ("failed".into(), f("reason")),
        "audit" => {
            let what = match f("action").as_str() {
                "terminal_create" => format!("run {:?} in {}", f("command"), f("cwd")),
                "terminal_kill" => format!("kill {} ({})", f("terminal_id"), f("signal")),
                "fs_write" => format!("write {} ({} bytes)", f("path"), f("bytes")),
                "fs_delete" => format!("delete {}", f("path")),
                other => other.to_owned(),
            };
            let error = rec
                .get("error")
                .map_or(String::new(), |e| format!(": {}", text(Some(e))));
            let summary = format!("{} {what} by {}{error}", f("outcome"), f("rule"));
            ("audit".into(), summary)
        }
        "routed" => {
            let from = names(rec.get("from"));
            let summary = format!(
                "{from} -> {} via {} ({} bytes)",
                f("to"),
                f("via"),
                f("bytes")
            );
            ("routed".into(), summary)
        }
        "refused" => (
            "refused".into(),
            format!("{} -> {}: {}", f("from"), f("to"), f("reason")),
        ),
        "cancel_requested" => ("cancel_requested".into(), f("reason")),
        "race_won" => {
            let cancelled = names(rec.get("cancelled"));
            let also = match cancelled.as_str() {
                "" => String::new(),
                names => format!("; cancelled {names}"),
            };
            let summary = format!("{} won routes[{}]{also}", f("winner"), f("route"));
            ("race_won".into(), summary)
        }
        // No `route` when what failed is no route (a rejected master plan).
        "route_failed" => {
            let summary = match rec.get("route") {
                Some(_) => format!("routes[{}]: {}", f("route"), f("reason")),
                None => f("reason"),
            };
            ("route_failed".into(), summary)
        }
        "plan_entry" => (
            "plan_entry".into(),
            format!("{} ({}) {}", f("id"), f("assigned_to"), f("status")),
        ),
        _ => (
            kind.to_owned(),
            rest(rec, &["type", "ts_ms", "urn", "turn", "seq"]),
        ),
    }
}

fn cap_summary(event: &Map<String, Value>) -> String {
    if event.get("kind").and_then(Value::as_str) == Some("cap.artifact") {
        return artifact_summary(event);
    }
    for key in ["text", "prompt", "message", "tool", "title"] {
        if let Some(Value::String(s)) = event.get(key) {
            return s.clone();
        }
    }
    rest(event, &["kind"])
}

/// `name (mime, N bytes) for session: uri`.
fn artifact_summary(a: &Map<String, Value>) -> String {
    let f = |k: &str| text(a.get(k));
    let owner = a
        .get("_meta")
        .and_then(|m| m.get("capfleet.session"))
        .and_then(Value::as_str)
        .map(|u| format!(" of {}", u.rsplit('/').next().unwrap_or(u)))
        .unwrap_or_default();
    let place = match a.get("uri").and_then(Value::as_str) {
        Some(uri) => uri.to_owned(),
        None => "inline".to_owned(),
    };
    format!(
        "{}{owner} ({}, {} bytes): {place}",
        f("name"),
        f("mime_type"),
        f("size")
    )
}

/// The object without `skip`, as compact JSON.
fn rest(obj: &Map<String, Value>, skip: &[&str]) -> String {
    let kept: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept).to_string()
}

/// One line, at most [`SUMMARY_MAX`] characters (and `…`); with `whole_words`, cut
/// after the last whole word (or JSON field) within them (mid-word only for a
/// single longer word).
fn shorten(s: &str, whole_words: bool) -> String {
    let flat = s.replace('\n', "⏎");
    let Some((mut cut, _)) = flat.char_indices().nth(SUMMARY_MAX) else {
        return flat;
    };
    if whole_words && !flat[cut..].starts_with(' ') {
        // After the last space, or the last comma of a JSON value.
        let space = flat[..cut].rfind(' ');
        let comma = flat[..cut].rfind(',').map(|at| at + 1);
        cut = space.max(comma).filter(|&at| at > 0).unwrap_or(cut);
    }
    let kept = if whole_words {
        flat[..cut].trim_end()
    } else {
        &flat[..cut]
    };
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_shortened_at_a_word_when_fitted() {
        let long = "word ".repeat(40);
        let cut = shorten(&long, true);
        assert!(cut.ends_with("word…"), "{cut:?}");
        assert!(cut.chars().count() <= SUMMARY_MAX + 1);
        let as_before = shorten(&"abcdefghij".repeat(20), false);
        assert_eq!(as_before.chars().count(), SUMMARY_MAX + 1);
        assert_eq!(shorten("a\nb", true), "a⏎b");
    }

    #[test]
    fn a_row_fits_its_width_or_is_as_it_always_was() {
        let summary = "Plan: worker-a writes the /health handler and worker-b its tests, then the reviewer reads both";
        let style = Style::for_stdout(crate::style::ColorChoice::Never);
        let whole = row(
            Some(0),
            "planner",
            Some(1),
            "cap.text_chunk",
            summary,
            (style, &Fit::default()),
        );
        assert_eq!(
            whole,
            format!("00:00:00.000  planner      t1   cap.text_chunk           {summary}")
        );
        for width in [80, 120] {
            let fitted = row(
                Some(0),
                "planner",
                Some(1),
                "cap.text_chunk",
                summary,
                (style, &Fit::columns(width)),
            );
            assert!(
                fitted.lines().all(|l| l.chars().count() <= width),
                "{fitted}"
            );
            let words: Vec<&str> = fitted.split_whitespace().skip(4).collect();
            assert_eq!(words, summary.split(' ').collect::<Vec<_>>(), "{fitted}");
        }
    }
}
