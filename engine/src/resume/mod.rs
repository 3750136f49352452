//! What a resumed run takes from its journal (`capfleet run --resume`): the records
//! read back ([`crate::journal::replay`], a torn last line reported and left out) into
//! what each part of the tree continues from. Temporal's model: the history replayed,
//! completed work returning its recorded result instead of running again.
//!
//! - every stream's last sequence number: the resumed run's publishers go on from it;
//! - per session ([`SessionRecovery`]): its highest turn number (its next turn is
//!   numbered after it), the agent's last resume id (its first start resumes
//!   natively where the binding can), and the assistant text of a turn that never
//!   ended and the tool calls it started (re-issued with them where the agent cannot
//!   resume, spec §10.6);
//! - the deliveries whose turn ended, in the order the router took them, each with
//!   that turn's result rebuilt from its journaled events ([`Replayed`]): the resumed
//!   router replays its decisions on them, it does not run them again;
//! - how many records of the router's own stream the replay derives again (it does
//!   not journal them twice);
//! - the usage so far (the budget counts it) and how the run ended, if it did;
//! - each keyed `--commit` (started, or made: never made twice) and whether the
//!   workspaces were collected after the end (a run cut before is resumed to).
//!
//! A stop (`stopping`, a signal or a fault) cuts the router's stream: what it
//! recorded from there to the next `resumed` is the stop's, not the run's logic. Only
//! the turns that completed in it are replayed, where the resume that followed took
//! them: after everything before the stop, before what that resume did live (the
//! journal's order, ends cut by the stop left out). Their `delivered` record is on
//! disk already, among the stop's: the replay does not write it again
//! ([`Replayed::on_disk`]). A turn the stop cut (cancelled, failed, or its session
//! closed) is no turn done: it is re-issued like one a kill cut.
//!
//! The journal is read in batches of whole lines ([`replay::scan_batches`]), each
//! batch parsed on the machine's cores ([`parse_all`]) and folded in its order. Only
//! a session's CAP events of the kinds recovery or the replaying router reads (text,
//! thoughts, plans, usage, a resume id) are decoded, typed straight from their text
//! ([`crate::protocol::decode_trusted`]); the others (tool calls: most of a coding
//! agent's events) are counted in their turn, as the live turn counted them against
//! its limits, and not kept: a replayed [`TurnResult`] holds what the router reads.
//! A tool call's start is named for its turn
//! ([`ToolsRun`](crate::session::tools_run::ToolsRun): its name and input decoded
//! only while the turn has room to name one), for a re-issued prompt.
//!
//! # Native resume
//!
//! Native resume is the binding's resume id, one mechanism for all: the driver reports it
//! (`DriverOutput::ResumeId`, or the ready's `resume_id`), the session journals it
//! (`resume_id`, `cap.session.ready`), [`recover`] reads the last one back into
//! [`SessionRecovery::resume_id`], and the session's driver slot starts the next driver
//! with it (`Start::resume_id`; `Wire::resumes` says whether the cut turn's partial text
//! is then left out). Stream-json starts `--resume <session_id>`; ACP sends
//! `session/resume` when the agent's `initialize` advertises
//! `sessionCapabilities.resume`, else `session/load` when it advertises `loadSession`
//! (the updates the load replays are dropped; a refused resume or load opens a new
//! session and the partial text goes with the prompt); A2A's id is a `ResumePoint` — the
//! `contextId` and the task of the turn in flight — and the cut turn's prompt reads that
//! task back (ended: its result; running: followed with `SubscribeToTask`; gone: sent
//! again). The same path serves a restart within a run.
//!
//! # The end-of-run pass and merges
//!
//! A run whose `run_ended` is not `interrupted` and whose workspaces were `collected` (or
//! that had none) had ended: said, nothing changed; one cut before `collected` is resumed,
//! its deliveries all replayed, to finish the end-of-run pass: `workspace/collect.rs`
//! (`commit_once`) skips a commit recorded as made and looks for one started and not
//! recorded on the branch (`commit::made_on`) before it journals and syncs a new start and
//! commits; a stale git lock no live process holds open is cleared first
//! (`workspace::locks`). `capfleet merge` journals its `workspace::merge::Intent` (HEAD,
//! the branch, the tree) as `merge_started` (synced) before the checkout and `merged`
//! after; a started intent whose checkout a kill cut is finished when every changed file
//! holds the old content, the intent's, or the start of the intent's; one whose HEAD is
//! already the intent's result is reported as made (`merged` with `found`). The fleet
//! file is compared with the copy kept in the run directory (`--force` takes the change,
//! journaled). A torn last line is reported and cut. The checker
//! (`tests/all/common/checker.rs`, `checker_merge.rs`; `benches/durable.rs` over many
//! seeds) stops runs and merges at seeded moments and compares each end with an
//! uninterrupted one.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::journal::replay::{self, Tail};
use crate::protocol::{CapEvent, StopReason};
use crate::session::turn::{Turn, TurnResult};
use crate::session::{SessionError, SessionRecovery};
use crate::workspace::commit::CommitMark;
use capfleet_wire::events::{EventBody, SessionEvent, TextFrom, TurnOutcome};

mod lines;
#[cfg(test)]
mod tests;

use lines::{Event, Line, Parsed, parse_all};

/// A delivery whose turn ended: the router takes its recorded result again.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub key: String,
    pub session: String,
    /// Its turn's result as the router read it: the text, the events the router reads
    /// (text chunks, plans), the usage (the others are counted, not kept).
    pub result: Result<TurnResult, SessionError>,
    /// Its `delivered` record is in the journal already, past the records the replay
    /// derives again (it ended while the run was stopping): not written twice.
    pub on_disk: bool,
}

/// Everything a resumed run continues from.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Each stream's last sequence number on disk, by URN.
    pub seqs: HashMap<String, u64>,
    /// Each session's, by URN.
    pub sessions: HashMap<String, SessionRecovery>,
    /// In the order to replay them.
    pub replay: Vec<Replayed>,
    /// Router records the replay derives again (not journaled twice).
    pub router_records: u64,
    /// The usage events so far (fed to the budget before the run goes on).
    pub usage: Vec<SessionEvent>,
    /// `run_ended`'s outcome (or `exit_code` of a run that never started its router).
    pub ended: Option<String>,
    /// Keys routed whose turn never ended: re-issued.
    pub interrupted: Vec<String>,
    /// Steers not taken, which became deliveries of their own (a `steered` record,
    /// then a `routed` one of the same key).
    pub fell_back: HashSet<String>,
    /// The keys of `steered` records so far.
    steered: HashSet<String>,
    /// What the pass over the journal found besides records.
    pub tail: Tail,
    /// Each keyed `--commit`, by session: started, or made.
    pub commits: HashMap<String, CommitMark>,
    /// The run has workspaces (`worktree` records).
    pub worktrees: bool,
    /// They were collected after the run's last end (`collected`).
    pub collected: bool,
    /// The chaos `self_kill`s journaled (a chaos run's resume goes on after them).
    pub self_kills: SelfKills,
    /// Each confined session's sandbox, by name, as its `session` record holds it.
    pub sandboxes: Sandboxes,
}

/// The confined sessions' sandboxes, by session name (as journaled; a run settles
/// them before its task goes out).
pub type Sandboxes = HashMap<String, capfleet_wire::process::sandbox::Sandbox>;

/// The `self_kill` records of a chaos run's journal.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SelfKills {
    /// How many.
    pub count: u32,
    /// The last one's place in the seeded sequence.
    pub last_seed_pos: Option<u64>,
}

impl Recovered {
    /// The run ended for good (not interrupted) and its workspaces were collected:
    /// nothing to resume. One cut between its end and the end of the collection
    /// goes on to finish it (its deliveries all replayed, no commit made twice).
    pub fn has_ended(&self) -> bool {
        self.ended.as_deref().is_some_and(|o| o != "interrupted")
            && (self.collected || !self.worktrees)
    }
}

/// An owned copy of a borrowed field.
fn owned(s: Option<Cow<'_, str>>) -> Option<String> {
    s.map(Cow::into_owned)
}

/// A turn as its events come back.
struct Rebuilt {
    turn: Turn,
    ended: Option<(TurnOutcome, StopReason)>,
}

/// A delivery's end as the router recorded it.
struct End {
    key: String,
    session: String,
    urn: String,
    turn: Option<u32>,
    outcome: Option<TurnOutcome>,
    error: Option<String>,
    /// Recorded while the run was stopping.
    stopping: bool,
}

fn outcome_of(s: &str) -> Option<TurnOutcome> {
    match s {
        "completed" => Some(TurnOutcome::Completed),
        "cancelled" => Some(TurnOutcome::Cancelled),
        "failed" => Some(TurnOutcome::Failed),
        _ => None,
    }
}

/// A session error as `Display` wrote it.
fn error_of(text: &str) -> SessionError {
    if let Some(reason) = text.strip_prefix("the session failed: ") {
        return SessionError::Failed {
            reason: reason.to_owned(),
        };
    }
    if text.starts_with("a turn is already running") {
        return SessionError::Busy;
    }
    if let Some(max) = text
        .strip_prefix("max_turns (")
        .and_then(|t| t.split(')').next())
        .and_then(|n| n.parse().ok())
    {
        return SessionError::MaxTurns { max };
    }
    SessionError::Closed
}

/// Read the journal at `path` for fleet `fleet` (its URNs are `cap://<fleet>/…`).
pub fn recover(path: &Path, fleet: &str) -> std::io::Result<Recovered> {
    let router = capfleet_wire::events::urn(fleet, capfleet_wire::events::ROUTER_URN_SEGMENT);
    let workspace = capfleet_wire::events::urn(fleet, crate::workspace::WORKSPACE_URN_SEGMENT);
    let mcp = capfleet_wire::events::urn(fleet, capfleet_wire::events::MCP_URN_SEGMENT);
    let mut r = Recovered::default();
    let mut turns: Turns = HashMap::new();
    let mut ends: Vec<End> = Vec::new();
    let mut routed: Vec<(String, String)> = Vec::new();
    let mut stopping = false;
    let streams = [router.clone(), workspace.clone()];
    let tail = replay::scan_batches(path, |lines| {
        let parsed = parse_all(lines, &streams);
        let mut records = Vec::with_capacity(parsed.len());
        for p in parsed {
            let Some(Parsed { line, event }) = p else {
                records.push(false);
                continue;
            };
            records.push(true);
            let Some(urn) = line.urn.clone() else {
                // The CLI's own `run_ended` (the router never ran).
                if line.kind == "run_ended" {
                    r.ended = line.exit_code.map(|c| format!("exit {c}"));
                }
                continue;
            };
            let seq = line.seq.max(line.last_seq).unwrap_or(0);
            let seq = match r.seqs.get_mut(&*urn) {
                Some(last) => {
                    *last = (*last).max(seq);
                    *last
                }
                None => {
                    r.seqs.insert(urn.clone().into_owned(), seq);
                    seq
                }
            };
            if urn == router {
                on_router(&mut r, line, &mut stopping, &mut ends, &mut routed);
            } else if urn == workspace {
                on_workspace(&mut r, line);
            } else if urn == mcp {
                // Outside calls: nothing to replay, only their stream's sequence.
            } else {
                on_session(&mut r, &urn, seq, line, event, &mut turns);
            }
        }
        records
    })?;
    r.tail = tail;
    // The router's records: what the replay derives again are those before each stop.
    finish(&mut r, turns, ends, routed);
    Ok(r)
}

fn on_router(
    r: &mut Recovered,
    line: Line<'_>,
    stopping: &mut bool,
    ends: &mut Vec<End>,
    routed: &mut Vec<(String, String)>,
) {
    match &*line.kind {
        "resumed" => {
            *stopping = false;
            r.ended = None;
            // A takeover's sandboxes, resolved for its host: what they run in now.
            match line
                .sandboxes
                .map(|raw| serde_json::from_str::<Sandboxes>(raw.get()))
            {
                Some(Ok(anew)) => r.sandboxes.extend(anew),
                Some(Err(e)) => tracing::error!("a resumed record's sandboxes unreadable: {e}"),
                None => {}
            }
            return;
        }
        "stopping" => *stopping = true,
        // A chaos `self_kill`: no decision of the router's, none to derive again.
        "chaos" => {
            r.self_kills.count += 1;
            r.self_kills.last_seed_pos = line.seed_pos.max(r.self_kills.last_seed_pos);
            return;
        }
        "run_ended" => {
            r.ended = owned(line.outcome.clone());
            r.collected = false;
        }
        "worktree" => r.worktrees = true,
        "session" => {
            let sandbox = line.sandbox.map(|raw| serde_json::from_str(raw.get()));
            match (&line.name, sandbox) {
                (Some(name), Some(Ok(sandbox))) => {
                    r.sandboxes.insert(name.clone().into_owned(), sandbox);
                }
                (name, Some(Err(e))) => {
                    tracing::error!(?name, "a session record's sandbox unreadable: {e}");
                }
                _ => {}
            }
        }
        "routed" => {
            if let (Some(key), Some(to)) = (line.key.clone(), line.to.clone()) {
                if r.steered.contains(&*key) {
                    r.fell_back.insert(key.clone().into_owned());
                }
                routed.push((key.into_owned(), to.into_owned()));
            }
        }
        "steered" => {
            if let Some(key) = &line.key {
                r.steered.insert(key.clone().into_owned());
            }
        }
        "delivered" => {
            if let (Some(key), Some(session)) = (line.key.clone(), line.to.clone()) {
                let urn = format!("{}/{session}", line_fleet(&line));
                ends.push(End {
                    key: key.into_owned(),
                    session: session.into_owned(),
                    urn,
                    turn: line.turn,
                    outcome: line.outcome.as_deref().and_then(outcome_of),
                    error: owned(line.error.clone()),
                    stopping: *stopping,
                });
            }
        }
        _ => {}
    }
    if !*stopping && line.kind != "run_ended" {
        r.router_records += 1;
    }
}

/// The workspace stream's keyed commits and the end of its collection.
fn on_workspace(r: &mut Recovered, line: Line<'_>) {
    match (&*line.kind, line.session) {
        ("commit_started", Some(session)) => {
            if let Some(parent) = line.parent {
                r.commits.insert(
                    session.into_owned(),
                    CommitMark::Started {
                        parent: parent.into_owned(),
                    },
                );
            }
        }
        ("committed", Some(session)) => {
            if let Some(sha) = line.sha {
                r.commits.insert(
                    session.into_owned(),
                    CommitMark::Done {
                        sha: sha.into_owned(),
                    },
                );
            }
        }
        ("collected", _) => r.collected = true,
        _ => {}
    }
}

/// `cap://<fleet>` of a router record.
fn line_fleet<'a>(line: &'a Line<'_>) -> &'a str {
    let urn = line.urn.as_deref().unwrap_or("");
    urn.rsplit_once('/').map_or(urn, |(fleet, _)| fleet)
}

/// The turns being rebuilt, by session URN and turn number.
type Turns = HashMap<String, HashMap<u32, Rebuilt>>;

fn on_session(
    r: &mut Recovered,
    urn: &str,
    seq: u64,
    line: Line<'_>,
    event: Option<Event>,
    turns: &mut Turns,
) {
    let s = match r.sessions.get_mut(urn) {
        Some(s) => s,
        None => r.sessions.entry(urn.to_owned()).or_default(),
    };
    s.seq = seq;
    match (&*line.kind, line.turn) {
        ("turn_started", Some(t)) => {
            s.last_turn = s.last_turn.max(t);
            let of = match turns.get_mut(urn) {
                Some(of) => of,
                None => turns.entry(urn.to_owned()).or_default(),
            };
            // A resumed run's turn that went out with a cut turn's partial text went
            // out with the tool calls that one had started: a cut again, it carries
            // them on.
            let before = match &line.text_from {
                Some(TextFrom::Carried(_)) => of
                    .values()
                    .filter(|r| r.ended.is_none() && r.turn.id < t)
                    .max_by_key(|r| r.turn.id)
                    .map(|r| r.turn.tools().clone()),
                _ => None,
            };
            let rebuilt = of.entry(t).or_insert_with(|| Rebuilt {
                turn: Turn::new(t, String::new()),
                ended: None,
            });
            // The text the live turn went on with, as it decided (`TextFrom`).
            match line.text_from {
                Some(TextFrom::Dropped) => rebuilt.turn.restart_text(),
                Some(TextFrom::Carried(text)) => {
                    rebuilt.turn.carry_tools(before.unwrap_or_default());
                    rebuilt.turn.carry(&text);
                }
                Some(TextFrom::Kept) | None => {}
            }
        }
        ("turn_ended", Some(t)) => {
            let outcome = line.outcome.as_deref().and_then(outcome_of);
            if let (Some(rebuilt), Some(o)) = (rebuilding(turns, urn, t), outcome) {
                rebuilt.ended = Some((o, line.stop_reason.unwrap_or(StopReason::EndTurn)));
            }
        }
        ("resume_id", _) => s.resume_id = owned(line.id),
        ("cap", turn) => {
            let event = match event {
                Some(Event::Read(event)) => *event,
                Some(Event::Tool { name, input }) => {
                    if let Some(t) = turn
                        && let Some(rebuilt) = rebuilding(turns, urn, t)
                        && rebuilt.ended.is_none()
                    {
                        rebuilt.turn.count_unread();
                        rebuilt.turn.tool_read_back(|| {
                            let name = serde_json::from_str(name.get()).unwrap_or_default();
                            let input = input.and_then(|i| serde_json::from_str(i.get()).ok());
                            (name, input)
                        });
                    }
                    return;
                }
                Some(Event::Unread) => {
                    if let Some(t) = turn
                        && let Some(rebuilt) = rebuilding(turns, urn, t)
                        && rebuilt.ended.is_none()
                    {
                        rebuilt.turn.count_unread();
                    }
                    return;
                }
                None => return,
            };
            if let CapEvent::SessionReady(ready) = &event
                && let Some(id) = ready.session_id.get()
            {
                s.resume_id = Some(id.clone());
            }
            if let CapEvent::Usage(_) = &event {
                r.usage.push(SessionEvent {
                    seq: line.seq.unwrap_or(0),
                    urn: Arc::from(urn),
                    turn,
                    ts_ms: 0,
                    body: EventBody::Cap {
                        event: event.clone(),
                    },
                });
            }
            if let Some(t) = turn
                && let Some(rebuilt) = rebuilding(turns, urn, t)
                && rebuilt.ended.is_none()
            {
                rebuilt.turn.record_owned(event);
            }
        }
        _ => {}
    }
}

/// Turn `t` of session `urn`, if it started.
fn rebuilding<'a>(turns: &'a mut Turns, urn: &str, t: u32) -> Option<&'a mut Rebuilt> {
    turns.get_mut(urn).and_then(|of| of.get_mut(&t))
}

/// The replay's order (the journal's: each end where the router took it, those of a
/// stop only if their turn completed, each key once), then per session the turns
/// done (those replayed) and the text of its last turn if that one was cut.
fn finish(r: &mut Recovered, mut turns: Turns, ends: Vec<End>, routed: Vec<(String, String)>) {
    let ended: HashSet<&str> = ends.iter().map(|e| e.key.as_str()).collect();
    r.interrupted = routed
        .iter()
        .filter(|(k, _)| !ended.contains(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    let mut taken = HashSet::new();
    let mut done: HashMap<String, u32> = HashMap::new();
    for e in ends {
        if e.stopping && e.outcome != Some(TurnOutcome::Completed) || taken.contains(&e.key) {
            continue;
        }
        let result = match (e.turn, e.outcome) {
            (Some(t), Some(outcome)) => match turns.get_mut(&e.urn).and_then(|of| of.remove(&t)) {
                Some(Rebuilt {
                    turn,
                    ended: Some((_, stop)),
                    ..
                }) => {
                    *done.entry(e.urn).or_default() += 1;
                    Ok(turn.finish(outcome, stop))
                }
                // Its events are not on disk: it runs again.
                _ => continue,
            },
            _ => Err(error_of(e.error.as_deref().unwrap_or(""))),
        };
        taken.insert(e.key.clone());
        r.replay.push(Replayed {
            key: e.key,
            session: e.session,
            result,
            on_disk: e.stopping,
        });
    }
    for (urn, s) in &mut r.sessions {
        s.ended = done.get(urn).copied().unwrap_or(0);
        // Left in `turns`: not replayed. The last one, if so, was cut.
        let cut = turns.get(urn).and_then(|of| of.get(&s.last_turn));
        s.interrupted = cut.map(|t| t.turn.partial_text().to_owned());
        s.interrupted_tools = cut.map(|t| t.turn.tools().clone()).unwrap_or_default();
    }
}
