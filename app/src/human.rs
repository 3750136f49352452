//! The human at the terminal: prompts for the REPL and answers to the agent's asks
//! and permission requests (stdin is read on one thread into a bounded channel);
//! what is printed for them fits their terminal ([`fit`], [`table`]).

use std::io::{BufRead, Read, Write};

use capfleet_engine::answerer::{HumanQuestion, RULE_HUMAN};
use capfleet_wire::events::OpenRequest;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::style::Style;

pub mod event_line;
pub mod fit;
pub mod reply;
pub mod table;

use reply::Reply;

/// What the human side has while a turn runs ([`Input::during_turn`]).
pub enum DuringTurn {
    Question(HumanQuestion),
    Line(String),
}

pub struct Input {
    interactive: bool,
    lines: mpsc::Receiver<String>,
    questions: mpsc::Receiver<HumanQuestion>,
    style: Style,
}

impl Input {
    /// Start reading stdin: line by line on a terminal, all at once otherwise.
    pub fn spawn(
        interactive: bool,
        questions: mpsc::Receiver<HumanQuestion>,
        style: Style,
    ) -> Self {
        let (tx, lines) = mpsc::channel(16);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            if interactive {
                for line in stdin.lock().lines() {
                    let Ok(line) = line else { break };
                    if tx.blocking_send(line).is_err() {
                        break;
                    }
                }
            } else {
                let mut all = String::new();
                if stdin.lock().read_to_string(&mut all).is_ok() {
                    let _chat_gone = tx.blocking_send(all);
                }
            }
        });
        Input {
            interactive,
            lines,
            questions,
            style,
        }
    }

    pub fn interactive(&self) -> bool {
        self.interactive
    }

    /// All of a piped stdin.
    pub async fn read_all(&mut self) -> Option<String> {
        self.lines.recv().await
    }

    /// The next REPL line; `None` at end of input.
    pub async fn prompt_line(&mut self) -> Option<String> {
        eprint!("{} ", self.style.bold("›"));
        std::io::stderr().flush().ok();
        self.lines.recv().await
    }

    /// While a turn runs: the next question for the human, or (with `lines`) a line
    /// typed meanwhile (no prompt is shown); `None` once neither can come.
    pub async fn during_turn(&mut self, lines: bool) -> Option<DuringTurn> {
        tokio::select! {
            Some(q) = self.questions.recv() => Some(DuringTurn::Question(q)),
            Some(line) = self.lines.recv(), if lines => Some(DuringTurn::Line(line)),
            else => None,
        }
    }

    /// Ask the human and send the answer to the session.
    pub async fn ask_human(&mut self, q: HumanQuestion) {
        let reply = match &q.request {
            OpenRequest::Permission {
                tool, intent, risk, ..
            } => {
                let what = intent.as_ref().map(summarize).unwrap_or_default();
                eprint!(
                    "\n{} {tool}{what} [risk {risk}]  allow? [y]es / [a]lways / [N]o: ",
                    self.style.warn("permission")
                );
                Reply::Decision(reply::decision(&self.answer_line().await))
            }
            OpenRequest::Ask { prompt, form, .. } => {
                Reply::Value(self.ask_form(prompt, form.as_ref()).await)
            }
        };
        let answer = reply::answer(&q.request, reply, RULE_HUMAN.into());
        let _session_gone = q.session.cast(answer);
    }

    async fn answer_line(&mut self) -> String {
        std::io::stderr().flush().ok();
        self.lines.recv().await.unwrap_or_default()
    }

    /// An object form (one property per question, options as `oneOf` consts) is asked
    /// question by question; anything else takes free text. Empty input declines.
    async fn ask_form(&mut self, prompt: &str, form: Option<&Value>) -> Option<Value> {
        let props = form
            .and_then(|f| f.get("properties"))
            .and_then(Value::as_object);
        let Some(props) = props else {
            eprint!("\n{} {prompt}: ", self.style.warn("question"));
            let line = self.answer_line().await;
            return (!line.trim().is_empty()).then(|| Value::String(line.trim().to_owned()));
        };
        let mut answers = Map::new();
        for (question, schema) in props {
            let options: Vec<&str> = schema
                .get("oneOf")
                .or_else(|| schema.pointer("/items/oneOf"))
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(|c| c.get("const")?.as_str()).collect())
                .unwrap_or_default();
            eprintln!("\n{} {question}", self.style.warn("question"));
            for (i, o) in options.iter().enumerate() {
                eprintln!("  {}. {o}", i + 1);
            }
            eprint!("answer: ");
            let line = self.answer_line().await;
            let line = line.trim();
            if line.is_empty() {
                return None;
            }
            let chosen = line
                .parse::<usize>()
                .ok()
                .and_then(|n| options.get(n.wrapping_sub(1)))
                .map_or(line, |o| *o);
            answers.insert(question.clone(), Value::String(chosen.to_owned()));
        }
        Some(Value::Object(answers))
    }
}

/// `(command)` or `(path)` or a short JSON of the tool input.
fn summarize(intent: &Value) -> String {
    for key in ["command", "file_path", "path", "url", "pattern"] {
        if let Some(v) = intent.get(key).and_then(Value::as_str) {
            return format!("({v})");
        }
    }
    let text = intent.to_string();
    if text.len() > 120 {
        let mut cut = 117;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("({}...)", &text[..cut])
    } else {
        format!("({text})")
    }
}
