//! One journal record as the line `capfleet log` (and `run`'s line mode) prints:
//! time, session, turn, kind and a one-line summary of what the record says, fit to
//! the terminal's width (`crate::human::fit`).

use serde_json::{Map, Value};

use crate::human::fit::Fit;
use crate::style::Style;

/// Longest summary printed per record.
const SUMMARY_MAX: usize = 120;

/// How a record is shown: styled, and fit to stdout's width.
pub type Look<'a> = (Style, &'a Fit);

/// One record as a readable line: time, session, turn, kind, summary; fit to
/// stdout's width as it is now.
pub fn line(rec: &Map<String, Value>, style: Style) -> String {
    line_at(rec, style, &Fit::stdout_columns())
}

/// One record as a readable line, fit to `fit`.
pub fn line_at(rec: &Map<String, Value>, style: Style, fit: &Fit) -> String {
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
pub fn row(
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
pub fn session_of(rec: &Map<String, Value>) -> &str {
    if let Some(urn) = rec.get("urn").and_then(Value::as_str) {
        return urn.rsplit('/').next().unwrap_or(urn);
    }
    rec.get("session").and_then(Value::as_str).unwrap_or("-")
}

/// `HH:MM:SS.mmm` (UTC) of a Unix time in milliseconds.
pub fn clock(ts_ms: u64) -> String {
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
        "routed" | "steered" => {
            let from = names(rec.get("from"));
            let into = if kind == "steered" {
                " into its running turn"
            } else {
                ""
            };
            let summary = format!(
                "{from} -> {}{into} via {} ({} bytes)",
                f("to"),
                f("via"),
                f("bytes")
            );
            (kind.into(), summary)
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
