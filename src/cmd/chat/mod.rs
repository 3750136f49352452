//! `capfleet chat <agent>`: one session with one agent, a task given once or a REPL.
//!
//! The session runs under the full supervision tree (root, answerer, fleet, session,
//! driver), so a crashing agent is restarted per policy exactly as in a fleet. The
//! terminal shows the assistant's text as it streams, tool calls, restarts and
//! errors; the REPL prompts on a line of its own and says once how to leave it
//! (Ctrl-D or `/quit`); permission requests are asked of the human when stdin is a
//! terminal, and denied (fail-safe, recorded as an event) when it is not. Ctrl-C
//! cancels the turn; a second Ctrl-C ends the session. A line typed in the REPL while
//! a turn runs joins that turn where the agent takes text mid-turn (a steer, CAP
//! queued input: `capfleet resolve` says whether it does), else it is the next
//! turn's prompt once this one ends. SIGTERM and SIGHUP end the
//! session at once: the agent's process group is killed (no wait for it to exit by
//! itself; a second signal cuts the kill grace short) before capfleet exits with
//! 128 + the signal number, so no agent outlives a terminated `chat`. When stdout is
//! a terminal, its resizes (SIGWINCH) resize a PTY agent's terminal too.

mod args;

mod render;
mod winsize;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::protocol::CancelScope;
use capfleet_engine::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::events::{TurnOutcome, UsageTotals};
use ractor::ActorRef;
use tokio::sync::{mpsc, watch};

pub(crate) use args::ChatArgs;

use capfleet_app::human::DuringTurn;
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;

/// Exit codes.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

pub(crate) fn run(args: ChatArgs, color: ColorChoice) -> ExitCode {
    let telemetry = args.telemetry.clone();
    capfleet_app::runtime::run_verb(color, &telemetry, async |t| chat(args, color, t).await)
}

async fn chat(args: ChatArgs, color: ColorChoice, telemetry: &Telemetry) -> ExitCode {
    let err_style = Style::for_stderr(color);
    let spec = match args.session_spec().await {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("{} {e}", err_style.err("error:"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Nothing is spawned for an agent that is not there.
    if let Some(missing) =
        capfleet_app::agents::missing_agent(&spec, "give its command with --argv")
    {
        eprintln!("{} {missing}", err_style.err("error:"));
        return ExitCode::from(EXIT_USAGE);
    }
    let steers = spec.steers();
    if capfleet_app::unattended::is_unattended(&spec) {
        capfleet_app::unattended::warn(&spec, err_style);
    }
    // Before any agent exists: from here on, SIGTERM/SIGHUP shut the tree down.
    let mut signals = StopSignals::terminations();
    let interactive = std::io::stdin().is_terminal();
    let (human_tx, human_rx) = mpsc::channel(16);
    let one = capfleet_app::one_session::Setup {
        verb: "chat",
        agent_type: &args.agent,
        journal: args.journal.clone(),
        policy: args.policy(),
        human: interactive.then_some(human_tx),
        traceparent: telemetry.traceparent(),
    };
    let capfleet_app::one_session::OneSession {
        orchestrator,
        session,
        events: events_rx,
        mut faults,
    } = match capfleet_app::one_session::start(one, spec, err_style).await {
        Ok(one) => one,
        Err(code) => return code,
    };
    let (shown_tx, turns_shown) = watch::channel(0);
    let printer = tokio::spawn(render::print_events(
        events_rx,
        render::Mode::new(args.json, args.show_thoughts, Style::for_stdout(color)),
        shown_tx,
    ));
    let input = capfleet_app::human::Input::spawn(interactive, human_rx, err_style);
    let resizes = winsize::forward(session.clone());

    let code = tokio::select! {
        code = drive(&args, &session, input, turns_shown, steers, err_style) => code,
        Some(fault) = faults.recv() => {
            eprintln!("{} {fault}; the chat is stopped (kept: {})", err_style.err("error:"), fault.kept);
            ExitCode::FAILURE
        }
        signal = signals.recv() => {
            StopSignals::escalate(signal);
            ExitCode::from(signal.exit_code())
        }
    };

    if let Some(task) = resizes {
        task.abort();
    }
    let kept = orchestrator.finish().await;
    // A fault of the journal's last writes fails the chat too.
    let code = match faults.try_recv() {
        Ok(fault) => {
            eprintln!("{} {fault} (kept: {})", err_style.err("error:"), fault.kept);
            ExitCode::FAILURE
        }
        Err(_) if kept.lost > 0 => ExitCode::FAILURE,
        Err(_) => code,
    };
    let totals = printer.await.unwrap_or_default();
    if !args.json {
        render::summary(&totals, err_style);
    }
    code
}

/// How long the REPL waits for a turn's end to be printed before it prompts.
const SHOWN_WAIT: Duration = Duration::from_secs(2);

/// What ends the REPL besides the end of input.
const QUIT: &str = "/quit";

/// The conversation loop: tasks in, turns out, Ctrl-C handled. The REPL says once
/// how to leave it, and prompts once the last turn's end is printed.
async fn drive(
    args: &ChatArgs,
    session: &ActorRef<SessionMsg>,
    mut input: capfleet_app::human::Input,
    mut turns_shown: watch::Receiver<u32>,
    steers: bool,
    style: Style,
) -> ExitCode {
    let mut tasks: std::collections::VecDeque<String> = args.task.iter().cloned().collect();
    let once = !tasks.is_empty() || !input.interactive();
    if tasks.is_empty() && !input.interactive() {
        match input.read_all().await {
            Some(text) if !text.trim().is_empty() => tasks.push_back(text),
            _ => {
                eprintln!(
                    "{} no task: pass --task, pipe one on stdin, or run in a terminal for a REPL",
                    style.err("error:")
                );
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    if !once {
        eprintln!(
            "{}",
            style.dim(&format!(
                "Ctrl-D or {QUIT} ends the chat; Ctrl-C cancels the turn in progress."
            ))
        );
    }
    let mut last: Option<TurnOutcome> = None;
    // The REPL reads lines while a turn runs too: steered into it, or kept for later.
    let mut typed = (!once).then(|| Typed {
        steers,
        later: std::collections::VecDeque::new(),
        style,
    });
    loop {
        let prompt = match tasks.pop_front() {
            Some(t) => t,
            None if once => break,
            None => {
                let line = match typed.as_mut().and_then(|t| t.later.pop_front()) {
                    Some(line) => Some(line),
                    None => input.prompt_line().await,
                };
                match line {
                    Some(line) if line.trim().is_empty() => continue,
                    Some(line) if line.trim() == QUIT => break,
                    Some(line) => line,
                    None => break, // Ctrl-D
                }
            }
        };
        turns_shown.borrow_and_update();
        let end = run_turn(session, prompt, &mut input, typed.as_mut()).await;
        if !once && matches!(end, TurnEnd::Done(Ok(_))) {
            // Bounded: should its `turn_ended` not be printed, the REPL still prompts.
            let _shown = tokio::time::timeout(SHOWN_WAIT, turns_shown.changed()).await;
        }
        match end {
            TurnEnd::Done(Ok(result)) => last = Some(result.outcome),
            TurnEnd::Done(Err(e)) => {
                eprintln!("{} {e}", style.err("error:"));
                return ExitCode::from(EXIT_FAILED);
            }
            TurnEnd::Quit => return ExitCode::from(EXIT_INTERRUPTED),
        }
    }
    match last {
        Some(TurnOutcome::Completed) | None => ExitCode::SUCCESS,
        Some(TurnOutcome::Cancelled) => ExitCode::from(EXIT_INTERRUPTED),
        Some(TurnOutcome::Failed) => ExitCode::from(EXIT_FAILED),
    }
}

enum TurnEnd {
    Done(Result<TurnResult, SessionError>),
    /// A second Ctrl-C: end the session now.
    Quit,
}

/// Lines typed while a turn runs.
struct Typed {
    /// The agent takes text mid-turn (`SessionSpec::steers`): a line joins the turn.
    steers: bool,
    /// Lines for the turns after this one, in order.
    later: std::collections::VecDeque<String>,
    style: Style,
}

impl Typed {
    /// `line`, typed while a turn runs: steered into it where the agent takes it,
    /// else (or if the turn ended first) the prompt of a turn after it.
    async fn take(&mut self, session: &ActorRef<SessionMsg>, line: String) {
        if self.steers && !line.trim().is_empty() && line.trim() != QUIT {
            let steered = session
                .call(
                    |reply| SessionMsg::Steer {
                        text: line.clone(),
                        reply,
                    },
                    None,
                )
                .await;
            if let Ok(ractor::rpc::CallResult::Success(Ok(()))) = steered {
                eprintln!("{}", self.style.dim("(joined the running turn)"));
                return;
            }
        }
        if !line.trim().is_empty() {
            eprintln!("{}", self.style.dim("(next, once this turn ends)"));
        }
        self.later.push_back(line);
    }
}

async fn run_turn(
    session: &ActorRef<SessionMsg>,
    prompt: String,
    input: &mut capfleet_app::human::Input,
    mut typed: Option<&mut Typed>,
) -> TurnEnd {
    let mut rx = capfleet_app::one_session::ask(session, prompt, None);
    let mut interrupts = 0;
    loop {
        tokio::select! {
            result = &mut rx => return TurnEnd::Done(result.unwrap_or(Err(SessionError::Closed))),
            _ = tokio::signal::ctrl_c() => {
                interrupts += 1;
                if interrupts >= 2 {
                    return TurnEnd::Quit;
                }
                eprintln!("\n^C cancelling the turn (Ctrl-C again ends the session)");
                let _gone = session.cast(SessionMsg::Cancel {
                    scope: CancelScope::CurrentTurn,
                    reason: "user interrupt".into(),
                });
            }
            Some(next) = input.during_turn(typed.is_some()) => match next {
                DuringTurn::Question(q) => input.ask_human(q).await,
                DuringTurn::Line(line) => {
                    if let Some(t) = typed.as_deref_mut() {
                        t.take(session, line).await;
                    }
                }
            },
        }
    }
}

/// Totals the printer gathered, for the closing summary.
#[derive(Debug, Default, Clone)]
pub(crate) struct Totals {
    pub usage: UsageTotals,
    pub turns: u32,
    pub restarts: u32,
    pub events: u64,
    pub urn: Option<Arc<str>>,
}
