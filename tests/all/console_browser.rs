//! The web console in a real browser (Debian's chromium, headless, over WebDriver),
//! one module a concern: the demo fleet submitted through the page and its sessions
//! followed live to `closed` ([`runs`]); a permission a sim agent asks for approved
//! in the page and its turn completing, a second answer shown as "already answered
//! by X" ([`approvals`]); the main controls reached with Tab and Enter only
//! ([`keyboard`]); a phone's width: no horizontal overflow, the sessions as cards
//! ([`phone`]); nothing of any run for a page with a wrong token ([`wrong_token`]).
//! Each page's screenshot is saved (`common::browser::artifacts_dir`). Here: the
//! server they share the shape of.

use std::time::Duration;

use serde_json::Value;

use crate::common::EnvMarker;
use crate::common::browser::Browser;
use crate::common::procs::processes_marked_by;
use crate::common::serve::{Server, add_token};

mod approvals;
mod keyboard;
mod phone;
mod runs;
mod wrong_token;

/// A run of a sim session: a few seconds at most.
const RUN: Duration = Duration::from_secs(60);
/// What a page shows within, once the server has it.
const SHOWN: Duration = Duration::from_secs(15);

/// A permission for `Bash` (high risk), then text that is HTML: the page must show it
/// as text.
const PERMISSION_THEN_HTML: &str = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"echo hi\" }, risk = \"high\" }, { say = \"<b id='injected'>after the tool</b>\" }]\n";

/// A permission, then a question with options.
const PERMISSION_THEN_ASK: &str = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"rm -rf build\" }, risk = \"high\" }, { ask = \"Deploy where?\", options = [\"staging\", \"production\"] }, { say = \"deploying\" }]\n";

/// A server with a token file, in a directory of its own; the tokens by name.
struct Console {
    server: Server,
    base: String,
    _dir: tempfile::TempDir,
}

impl Console {
    /// `capfleet serve --token-file`, with tokens `alice` and `bob` (approve) and `ci`
    /// (run).
    fn start() -> (Console, Tokens) {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens {
            alice: add_token(dir.path(), "alice", "approve"),
            bob: add_token(dir.path(), "bob", "approve"),
            ci: add_token(dir.path(), "ci", "run"),
        };
        let server = Server::start(dir.path(), &["--token-file", "tokens.txt"]);
        let base = format!("http://127.0.0.1:{}", server.port);
        (
            Console {
                server,
                base,
                _dir: dir,
            },
            tokens,
        )
    }

    /// Submit a one-session sim fleet following `script` (over the API, as `ci`).
    fn submit(&self, tokens: &Tokens, m: &EnvMarker, script: &str) -> String {
        self.server
            .submit_script(Some(&tokens.ci), m.pair(), script)
    }

    /// The run's open asks, once there is one.
    fn open_asks(&self, id: &str, token: &str) -> Vec<Value> {
        let path = format!("/v1/runs/{id}/asks");
        let mut asks = Vec::new();
        assert!(
            crate::common::wait_until(RUN, Duration::from_millis(20), || {
                let (_, body) = self.server.json("GET", &path, Some(token), None);
                asks = body["asks"].as_array().cloned().unwrap_or_default();
                !asks.is_empty()
            }),
            "run {id} asks nothing\n{}",
            self.server.stderr()
        );
        asks
    }

    /// Cancel run `id` (as `ci`) and wait for its end.
    fn cancel(&self, id: &str, tokens: &Tokens) {
        let (status, body) = self.server.json(
            "POST",
            &format!("/v1/runs/{id}/cancel"),
            Some(&tokens.ci),
            None,
        );
        assert_eq!(status, 202, "{body}");
        ended(self, id, &tokens.ci);
    }

    /// No agent of the server's is left.
    fn no_agents_left(&self) {
        let pid = self.server.pid() as u32;
        assert!(
            crate::common::wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
                processes_marked_by(pid).is_empty()
            }),
            "agents left: {:?}",
            processes_marked_by(pid)
        );
    }
}

struct Tokens {
    alice: String,
    bob: String,
    ci: String,
}

/// The cancelled/completed…: a run's state over the API, once it has ended.
fn ended(c: &Console, id: &str, token: &str) -> Value {
    c.server.wait_run(id, Some(token), RUN)
}

/// The run id of the run page the browser is on (`#/runs/<id>`), once it is there.
async fn run_page_id(b: &Browser) -> String {
    let v = b
        .wait(
            "the run page",
            SHOWN,
            "const m = location.hash.match(/^#\\/runs\\/([^/]+)$/); return m ? m[1] : null",
        )
        .await;
    v.as_str().unwrap().to_owned()
}
