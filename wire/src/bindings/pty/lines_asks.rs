//! Asks on screen (`parse.ask_yes_no`, `parse.ask_options`) as `cap.ask_user`.

use serde_json::{Value, json};

use super::LineParser;
use crate::protocol::CapEvent;

impl LineParser {
    /// An ask on `line`? Emits it (once per turn) and says whether it matched.
    pub(super) fn ask(&mut self, line: &str, out: &mut Vec<CapEvent>) -> bool {
        if let Some(c) = self
            .patterns
            .ask_options
            .as_ref()
            .and_then(|re| re.captures(line))
        {
            let options: Vec<String> = c
                .name("options")
                .map_or("", |m| m.as_str())
                .split([',', '|', '/'])
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect();
            self.close_section(out);
            if self.fresh("ask", line) {
                let question = self
                    .last_text
                    .clone()
                    .unwrap_or_else(|| line.trim().to_owned());
                let one_of: Vec<Value> = options.iter().map(|o| json!({ "const": o })).collect();
                let form = json!({
                    "type": "object",
                    "properties": { question.clone(): { "type": "string", "oneOf": one_of } },
                });
                let id = self.new_ask(false);
                out.push(CapEvent::ask_user(id, question, Some(form)));
            }
            return true;
        }
        if let Some(re) = &self.patterns.ask_yes_no
            && re.is_match(line)
        {
            self.close_section(out);
            if self.fresh("ask", line) {
                let id = self.new_ask(true);
                out.push(CapEvent::ask_user(id, line.trim(), None));
            }
            return true;
        }
        false
    }

    fn new_ask(&mut self, yes_no: bool) -> String {
        self.asks_made += 1;
        let id = format!("pty-ask-{}-{}", self.turn, self.asks_made);
        self.asks.insert(id.clone(), yes_no);
        id
    }
}
