//! Printing a session's events: streamed text, tool lines, restarts, errors — or
//! NDJSON. Output is buffered and flushed whenever the event channel runs dry, so a
//! flood of small chunks costs few writes. A turn's text ends its line when the turn
//! ends.

use std::io::Write;

use capfleet_engine::protocol::{CapEvent, Channel};
use capfleet_wire::events::{EventBody, Published};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::Totals;
use capfleet_app::style::Style;

pub(super) struct Mode {
    json: bool,
    thoughts: bool,
    style: Style,
}

impl Mode {
    pub(super) fn new(json: bool, thoughts: bool, style: Style) -> Self {
        Mode {
            json,
            thoughts,
            style,
        }
    }
}

/// Print until every publisher is gone; return the totals seen. Each turn's end is
/// printed (a line ended, stdout flushed) before `turns_shown` counts it, so the REPL
/// prompts on a line of its own.
pub(super) async fn print_events(
    mut rx: mpsc::Receiver<Published>,
    mode: Mode,
    turns_shown: watch::Sender<u32>,
) -> Totals {
    // Not `stdout().lock()`: the guard cannot cross awaits on another thread.
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout());
    let mut totals = Totals::default();
    let mut at_line_start = true;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(event) = next {
            totals.events += 1;
            totals.urn.get_or_insert_with(|| event.urn.clone());
            count(&event.body, &mut totals);
            let written = if mode.json {
                serde_json::to_writer(&mut out, &*event)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"))
            } else {
                text(&mut out, &event.body, &mode, &mut at_line_start)
            };
            if written.is_err() {
                return totals; // stdout closed (a pipe to `head`): stop printing
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            return totals;
        }
        turns_shown
            .send_if_modified(|shown| std::mem::replace(shown, totals.turns) != totals.turns);
    }
    if !at_line_start {
        writeln!(out).ok();
    }
    out.flush().ok();
    totals
}

fn count(body: &EventBody, totals: &mut Totals) {
    match body {
        EventBody::Cap {
            event: CapEvent::Usage(u),
        } => totals.usage.add(u),
        EventBody::TurnEnded { .. } => totals.turns += 1,
        EventBody::Restart { .. } => totals.restarts += 1,
        _ => {}
    }
}

fn text(
    out: &mut impl Write,
    body: &EventBody,
    mode: &Mode,
    at_line_start: &mut bool,
) -> std::io::Result<()> {
    let s = mode.style;
    let mut line = |out: &mut dyn Write, text: String| -> std::io::Result<()> {
        if !*at_line_start {
            out.write_all(b"\n")?;
        }
        writeln!(out, "{text}")?;
        *at_line_start = true;
        Ok(())
    };
    match body {
        EventBody::Cap { event } => match event {
            CapEvent::TextChunk(t) if t.channel.is_none_or(|c| c == Channel::Assistant) => {
                out.write_all(t.text.as_bytes())?;
                *at_line_start = t.text.ends_with('\n');
            }
            CapEvent::Thought(t) if mode.thoughts => line(out, s.dim(&format!("✻ {}", t.text)))?,
            CapEvent::ToolCallStart(t) => line(
                out,
                format!(
                    "{} {}{}",
                    s.bold("⏺"),
                    t.name,
                    t.input.get().map(brief).unwrap_or_default()
                ),
            )?,
            CapEvent::ToolCallEnd(t) => {
                let output = t.output.get().map(first_line).unwrap_or_default();
                let mark = if t.is_error.get().copied().unwrap_or(false) {
                    s.err("⎿")
                } else {
                    s.dim("⎿")
                };
                line(out, format!("  {mark} {}", s.dim(&output)))?;
            }
            CapEvent::PermissionResponse(p) => {
                let rule = p
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("capfleet.rule"))
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                line(
                    out,
                    s.dim(&format!(
                        "  permission {}: {} ({rule})",
                        p.req_id, p.decision
                    )),
                )?;
            }
            CapEvent::PtyRawBytes(raw) => {
                // `--raw`: the agent's screen bytes, in arrival order.
                if let Ok(bytes) = raw.bytes() {
                    out.write_all(&bytes)?;
                    *at_line_start = bytes.ends_with(b"\n");
                }
            }
            CapEvent::Error(e) => {
                line(out, format!("{} {}: {}", s.err("error"), e.code, e.message))?
            }
            _ => {}
        },
        EventBody::Restart {
            cause,
            attempt,
            delay_ms,
        } => line(
            out,
            s.warn(&format!(
                "↻ agent {cause}; restart {attempt} in {delay_ms} ms"
            )),
        )?,
        EventBody::Paused { reason, .. } => line(out, s.warn(&format!("⏸ {reason}")))?,
        EventBody::Failed { reason } => line(out, s.err(&format!("✗ session failed: {reason}")))?,
        EventBody::TurnEnded { .. } if !*at_line_start => {
            out.write_all(b"\n")?;
            *at_line_start = true;
        }
        _ => {}
    }
    Ok(())
}

fn brief(input: &Value) -> String {
    for key in ["command", "file_path", "path", "url", "pattern", "query"] {
        if let Some(v) = input.get(key).and_then(Value::as_str) {
            return format!("({})", first_line(&Value::String(v.to_owned())));
        }
    }
    String::new()
}

fn first_line(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let line = text.lines().next().unwrap_or("").to_owned();
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(99).collect::<String>())
    } else {
        line
    }
}

/// One line to stderr: turns, tokens, cost, restarts.
pub(super) fn summary(t: &Totals, style: Style) {
    eprintln!(
        "{}",
        style.dim(&format!(
            "{} · {} turn(s) · {} in / {} out tokens · ${:.4} · {} restart(s)",
            t.urn.as_deref().unwrap_or("session"),
            t.turns,
            t.usage.input_tokens,
            t.usage.output_tokens,
            t.usage.cost_usd,
            t.restarts
        ))
    );
}
