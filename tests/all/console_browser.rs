//! The web console in a real browser (Debian's chromium, headless, over WebDriver):
//! logging in, the demo fleet submitted through the page and its sessions followed
//! live to `closed`, a permission a sim agent asks for approved in the page and its
//! turn completing, a second answer shown as "already answered by X", a session's
//! diff, the main controls reached with Tab and Enter only, no horizontal overflow at
//! a phone's width, and nothing of any run for a page with a wrong token. Each page's
//! screenshot is saved (`common::browser::artifacts_dir`).

use std::time::Duration;

use serde_json::{Value, json};
use thirtyfour::Key;

use crate::common::browser::{Browser, DESKTOP, PHONE};
use crate::common::console::{log_in, logged_in, route, sel, session_states, texts, wait_text};
use crate::common::procs::processes_marked_by;
use crate::common::serve::{Server, add_token, sim_fleet, submission};
use crate::common::{EnvMarker, journal_records, repo_root};

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
        let created = self.server.submit(
            Some(&tokens.ci),
            &submission(&sim_fleet("ask", 1, m.pair()), &[("script.toml", script)]),
        );
        created["id"].as_str().unwrap().to_owned()
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

/// The demo fleet (`config/fleets/demo.toml`) as a user pastes it: its scripts named
/// by absolute path (a pasted fleet has no directory of its own).
fn demo_fleet() -> String {
    let root = repo_root();
    std::fs::read_to_string(root.join("config/fleets/demo.toml"))
        .unwrap()
        .replace(
            "script = \"../sim/",
            &format!("script = \"{}/config/sim/", root.display()),
        )
}

/// The cancelled/completed…: a run's state over the API, once it has ended.
fn ended(c: &Console, id: &str, token: &str) -> Value {
    c.server.wait_run(id, Some(token), RUN)
}

/// Put `text` into the fleet form's textarea as typed keys.
async fn type_fleet(b: &Browser, text: &str) {
    let area = b.element(&sel("fleet-toml")).await;
    area.clear().await.unwrap();
    area.send_keys(text).await.unwrap();
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

/// Records, from now on, every state each session row shows and whether a route
/// edge was ever active; `window.__consoleMark` tells a reload apart (it would be
/// gone).
const WATCH: &str = r#"
window.__consoleMark = 1;
window.__states = {};
window.__activeEdge = false;
const edgeActive = e => e.nodeType === 1 && (
    (e.matches('[data-testid="graph-edge"]') && e.classList.contains('active')) ||
    e.querySelector('[data-testid="graph-edge"].active') !== null);
const record = () => {
  document.querySelectorAll('[data-testid="session-row"]').forEach(r => {
    const s = r.getAttribute('data-session');
    const el = r.querySelector('[data-testid="session-state"]');
    const st = el ? el.textContent.trim() : '';
    const seen = (window.__states[s] = window.__states[s] || []);
    if (seen[seen.length - 1] !== st) seen.push(st);
  });
  if (document.querySelector('[data-testid="graph-edge"].active')) window.__activeEdge = true;
};
new MutationObserver(records => {
  for (const m of records) {
    if (m.type === 'attributes' && (m.oldValue || '').split(/\s+/).includes('active')
        && m.target.matches('[data-testid="graph-edge"]')) window.__activeEdge = true;
    for (const n of m.addedNodes || []) if (edgeActive(n)) window.__activeEdge = true;
  }
  record();
}).observe(document.body, {subtree: true, childList: true, characterData: true,
  attributes: true, attributeFilter: ['class'], attributeOldValue: true});
record();
return true;
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_fleet_submitted_in_the_page_runs_live_to_closed() {
    let (c, t) = Console::start();
    let b = Browser::start("demo", DESKTOP).await;
    b.open(&format!("{}/", c.base)).await;
    b.element(&sel("login-token")).await;
    b.shot("login").await;
    logged_in(&b, &c.base, &t.alice).await;
    // The token lives in the tab's session only: no cookie, nothing in localStorage.
    let kept = b
        .js(
            "return [document.cookie, localStorage.length, Object.keys(sessionStorage).some(k => sessionStorage.getItem(k).includes(arguments[0]))]",
            vec![json!(t.alice)],
        )
        .await;
    assert_eq!(kept, json!(["", 0, true]), "the token's storage");
    route(&b, "#/runs").await;
    b.shot("runs").await;

    // An invalid fleet: the server's findings, shown against their lines.
    let invalid = "[fleet]\nname = \"demo\"\nstart = \"planner\"\ntask = \"t\"\nbudget_usd = \"lots\"\n\n[[sessions]]\nname = \"planner\"\nagent = \"sim\"\n";
    let (status, refused) = c.server.json(
        "POST",
        "/v1/runs",
        Some(&t.ci),
        Some(&json!({ "fleet": invalid })),
    );
    assert_eq!(
        (status, refused["code"].as_str()),
        (400, Some("invalid_fleet")),
        "{refused}"
    );
    let mut lines: Vec<String> = refused["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["line"].as_u64().map(|l| l.to_string()))
        .collect();
    lines.sort();
    assert!(!lines.is_empty(), "{refused}");
    type_fleet(&b, invalid).await;
    b.element(&sel("submit-run")).await.click().await.unwrap();
    b.element(&format!("{} {}", sel("validate-findings"), sel("finding")))
        .await;
    let shown = b
        .js(
            "return [...document.querySelectorAll('[data-testid=\"finding\"]')].map(f => f.getAttribute('data-line')).filter(l => l).sort()",
            vec![],
        )
        .await;
    assert_eq!(shown, json!(lines), "the findings' lines");
    b.element(&sel("validate-findings"))
        .await
        .scroll_into_view()
        .await
        .unwrap();
    b.shot("submit-findings").await;
    assert_eq!(
        c.server.json("GET", "/v1/runs", Some(&t.ci), None).1["runs"],
        json!([])
    );

    // The demo fleet, pasted and submitted: the page goes to the run and follows it.
    type_fleet(&b, &demo_fleet()).await;
    b.element(&sel("submit-run")).await.click().await.unwrap();
    let id = run_page_id(&b).await;
    b.js(WATCH, vec![]).await;
    b.wait(
        "four sessions closed",
        RUN,
        r#"const rows = [...document.querySelectorAll('[data-testid="session-row"]')];
           return rows.length === 4 && rows.every(r =>
             r.querySelector('[data-testid="session-state"]').textContent.trim() === 'closed')"#,
    )
    .await;
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    let mut names: Vec<String> = session_states(&b).await.into_iter().map(|s| s.0).collect();
    names.sort();
    assert_eq!(names, ["planner", "reviewer", "worker-a", "worker-b"]);
    // Live: the page was never reloaded and saw the sessions change on its own.
    let seen = b
        .js(
            "return [window.__consoleMark, window.__states, window.__activeEdge]",
            vec![],
        )
        .await;
    assert_eq!(seen[0], 1, "the page reloaded");
    let states = seen[1].as_object().unwrap();
    assert!(
        states
            .values()
            .any(|s| s.as_array().unwrap().iter().any(|v| v != "closed")),
        "no session was seen before it closed: {states:?}"
    );
    assert_eq!(
        states["reviewer"].as_array().unwrap().last().unwrap(),
        "closed"
    );
    assert_eq!(seen[2], true, "no route edge was ever shown active");

    // The tallies the API has, on each row, once the page has the run's last view
    // (the rows' states come live from the stream, the tallies from that view).
    let expected: Vec<Value> = run["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["name"], s["turns"], s["restarts"], s["cost_usd"]]))
        .collect();
    b.wait(
        "the API's tallies on the rows",
        SHOWN,
        &format!(
            r#"const cell = (row, id) => row.querySelector(`[data-testid="${{id}}"]`).textContent.trim();
               return {}.every(([name, turns, restarts, cost]) => {{
                 const row = document.querySelector(`[data-testid="session-row"][data-session="${{name}}"]`);
                 if (!row) return false;
                 const usd = parseFloat(cell(row, 'session-cost').replace('$', ''));
                 return cell(row, 'session-turn') === String(turns)
                   && cell(row, 'session-restarts') === String(restarts)
                   && Math.abs(usd - cost) < 0.01;
               }})"#,
            Value::from(expected)
        ),
    )
    .await;
    assert_eq!(b.count(&sel("cost-bar")).await, 1);
    // The master plan, every entry completed; the route graph: a node per session,
    // edges for the routes.
    let plan = b
        .js(
            "return [...document.querySelectorAll('[data-testid=\"plan-entry\"]')].map(e => e.getAttribute('data-state'))",
            vec![],
        )
        .await;
    assert_eq!(plan, json!(["completed", "completed"]), "the plan");
    let nodes = texts(&b, &sel("graph-node")).await.join(" ");
    for s in ["planner", "worker-a", "worker-b", "reviewer"] {
        assert!(nodes.contains(s), "no graph node for {s}: {nodes}");
    }
    assert!(b.count(&sel("graph-edge")).await >= 2);
    // Its artifacts, downloadable (the sessions' transcripts and diffs).
    b.wait(
        "the artifacts",
        SHOWN,
        "return [...document.querySelectorAll('[data-testid=\"artifact-link\"]')].some(a => a.textContent.includes('diff.patch'))",
    )
    .await;
    b.shot("run").await;

    // A coding session: its diff, file by file; its events.
    route(&b, &format!("#/runs/{id}/sessions/worker-a")).await;
    b.element(&format!(
        "{}[data-path=\"src/health.rs\"]",
        sel("diff-file")
    ))
    .await;
    wait_text(&b, &sel("diff"), "pub fn status(database_up: bool)", SHOWN).await;
    let rows = b.count(&sel("event-row")).await;
    assert!(rows > 0, "no events shown");
    b.element(&sel("diff"))
        .await
        .scroll_into_view()
        .await
        .unwrap();
    b.shot("session-diff").await;
    b.js("window.scrollTo(0, 0); return true", vec![]).await;
    // The event filter keeps one kind.
    let kinds = b
        .js(
            "return [...document.querySelector('[data-testid=\"event-filter\"]').options].map(o => o.value).filter(v => v)",
            vec![],
        )
        .await;
    let kind = kinds
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k.as_str().unwrap().contains("tool"))
        .unwrap_or_else(|| panic!("no tool kind to filter on: {kinds}"))
        .as_str()
        .unwrap()
        .to_owned();
    b.js(
        "const s = document.querySelector('[data-testid=\"event-filter\"]'); s.value = arguments[0]; s.dispatchEvent(new Event('change', {bubbles: true})); return true",
        vec![json!(kind)],
    )
    .await;
    b.wait(
        "the filtered events",
        SHOWN,
        &format!(
            "const n = document.querySelectorAll('[data-testid=\"event-row\"]').length; return n > 0 && n < {rows}"
        ),
    )
    .await;
    b.shot("session-events-filtered").await;
    b.quit().await;
    c.no_agents_left();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_approved_in_the_page_completes_its_turn_and_a_second_answer_is_refused() {
    let (c, t) = Console::start();
    let m = EnvMarker::new("console-approve");
    let b = Browser::start("approve", DESKTOP).await;
    logged_in(&b, &c.base, &t.alice).await;
    let id = c.submit(&t, &m, PERMISSION_THEN_HTML);
    let ask = &c.open_asks(&id, &t.ci)[0];
    let ask_id = ask["ask_id"].as_str().unwrap();
    route(&b, "#/approvals").await;
    let one = format!("{}[data-ask-id=\"{ask_id}\"]", sel("approval"));
    b.element(&one).await;
    let text = texts(&b, &one).await.join(" ");
    let risk = ask["risk"].as_str().unwrap();
    for what in ["Bash", "echo hi", risk] {
        assert!(
            text.contains(what),
            "the approval shows no `{what}`: {text}"
        );
    }
    b.shot("approvals").await;
    b.element(&format!("{one} {}", sel("approve-once")))
        .await
        .click()
        .await
        .unwrap();
    // The card stays, saying who answered.
    wait_text(
        &b,
        &format!("{one} {}", sel("answered")),
        "Answered by alice",
        SHOWN,
    )
    .await;
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    let decisions: Vec<(Value, Value)> = journal_records(&c.server.journal(&id))
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .map(|r| {
            (
                r["event"]["decision"].clone(),
                r["event"]["_meta"]["capfleet.rule"].clone(),
            )
        })
        .collect();
    assert_eq!(decisions, [(json!("allow_once"), json!("remote:alice"))]);
    // The turn went on: its text shown, as text (no element made of it).
    route(&b, &format!("#/runs/{id}/sessions/s0")).await;
    wait_text(&b, &sel("event-list"), "after the tool", SHOWN).await;
    wait_text(&b, &sel("event-list"), "<b id='injected'>", SHOWN).await;
    assert_eq!(b.count("#injected").await, 0, "agent text became HTML");
    b.shot("session-events").await;

    // A second run: bob answers its permission over the API first; alice's answer in
    // the page is the API's 409, shown as already answered by bob. Its ask's options
    // are then buttons.
    let id = c.submit(&t, &m, PERMISSION_THEN_ASK);
    let ask = &c.open_asks(&id, &t.ci)[0];
    let ask_id = ask["ask_id"].as_str().unwrap().to_owned();
    route(&b, "#/approvals").await;
    let one = format!("{}[data-ask-id=\"{ask_id}\"]", sel("approval"));
    b.element(&one).await;
    let (status, body) = c.server.json(
        "POST",
        &format!("/v1/runs/{id}/asks/{ask_id}"),
        Some(&t.bob),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(status, 200, "{body}");
    b.element(&format!("{one} {}", sel("deny")))
        .await
        .click()
        .await
        .unwrap();
    wait_text(&b, &sel("answered-by"), "lready answered by bob", SHOWN).await;
    b.shot("approvals-answered-by").await;
    let options = format!("{} {}", sel("approval"), sel("ask-option"));
    wait_text(&b, &options, "staging", SHOWN).await;
    assert_eq!(texts(&b, &options).await, ["staging", "production"]);
    b.shot("approvals-options").await;
    b.driver()
        .find(thirtyfour::By::XPath(
            "//*[@data-testid='ask-option'][normalize-space()='staging']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    let journal = std::fs::read_to_string(c.server.journal(&id)).unwrap();
    assert!(
        journal.contains("remote:alice") && journal.contains("staging"),
        "{journal}"
    );
    b.quit().await;
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// Tab until the focus is on the element `testid` (at most 40 presses); then check
/// that the focus can be seen there.
async fn tab_to(b: &Browser, testid: &str) {
    for _ in 0..40 {
        let on = b
            .js(
                "const a = document.activeElement; return a ? a.getAttribute('data-testid') : null",
                vec![],
            )
            .await;
        if on == testid {
            let ring = b
                .js(
                    "const s = getComputedStyle(document.activeElement); return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'",
                    vec![],
                )
                .await;
            assert_eq!(
                ring, true,
                "`{testid}` has the focus but shows no focus ring"
            );
            return;
        }
        b.press(Key::Tab).await;
    }
    b.shot(&format!("lost-{testid}")).await;
    panic!("`{testid}` not reached with 40 Tabs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_controls_work_from_the_keyboard() {
    let (c, t) = Console::start();
    let m = EnvMarker::new("console-keys");
    let b = Browser::start("keyboard", DESKTOP).await;
    b.open(&format!("{}/", c.base)).await;
    b.element(&sel("login-token")).await;
    tab_to(&b, "login-token").await;
    b.press(t.alice.as_str()).await;
    tab_to(&b, "login-submit").await;
    b.press(Key::Enter).await;
    b.element(&sel("runs-table")).await;
    route(&b, "#/runs").await;
    // A run that lasts, submitted and cancelled from the keyboard.
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("script.toml");
    std::fs::write(&script, crate::common::serve::chatty(400, 50)).unwrap();
    let fleet =
        sim_fleet("keys", 1, m.pair()).replace("script.toml", &script.display().to_string());
    b.element(&sel("fleet-toml")).await;
    tab_to(&b, "fleet-toml").await;
    b.press(fleet.as_str()).await;
    tab_to(&b, "submit-run").await;
    b.press(Key::Enter).await;
    let id = run_page_id(&b).await;
    b.element(&sel("cancel-run")).await;
    tab_to(&b, "cancel-run").await;
    b.shot("cancel").await;
    b.press(Key::Enter).await;
    let run = ended(&c, &id, &t.ci);
    assert_eq!(
        (run["state"].as_str(), run["cancelled_by"].as_str()),
        (Some("interrupted"), Some("alice")),
        "{run}"
    );
    // A permission allowed from the keyboard.
    let id = c.submit(&t, &m, PERMISSION_THEN_HTML);
    c.open_asks(&id, &t.ci);
    route(&b, "#/approvals").await;
    b.element(&sel("approve-once")).await;
    b.js(
        "document.activeElement && document.activeElement.blur(); return true",
        vec![],
    )
    .await;
    tab_to(&b, "approve-once").await;
    b.press(Key::Enter).await;
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    b.quit().await;
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// Nothing wider than the viewport: the elements that stick out, if any.
const OVERFLOW: &str = r#"
const w = document.documentElement.clientWidth;
if (document.documentElement.scrollWidth <= w) return [];
return [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > w + 1)
  .slice(0, 5)
  .map(e => `${e.tagName.toLowerCase()}.${e.className} [data-testid=${e.getAttribute('data-testid')}] "${e.textContent.slice(0, 40)}" right=${Math.round(e.getBoundingClientRect().right)} (viewport ${w})`);
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_wide_screen_has_no_horizontal_overflow() {
    let (c, t) = Console::start();
    let m = EnvMarker::new("console-phone");
    // A finished run with a diff, and one waiting for an approval.
    const WRITE: &str = "[[turn]]\nsteps = [{ write = \"src/a_rather_long_file_name_for_a_narrow_screen.rs\", content = \"pub fn a_function_with_a_long_name_that_does_not_wrap_easily() -> u32 { 42 }\\n\" }, { say = \"wrote it\" }]\n";
    let done = c.submit(&t, &m, WRITE);
    ended(&c, &done, &t.ci);
    let waiting = c.submit(&t, &m, PERMISSION_THEN_HTML);
    c.open_asks(&waiting, &t.ci);
    let b = Browser::start("phone", PHONE).await;
    b.open(&format!("{}/", c.base)).await;
    b.viewport(PHONE).await;
    let width = b.js("return window.innerWidth", vec![]).await;
    assert_eq!(width, PHONE.0, "the viewport");
    b.element(&sel("login-token")).await;
    let pages = [
        ("login", None, sel("login-token")),
        ("runs", Some("#/runs".to_owned()), sel("run-row")),
        ("run", Some(format!("#/runs/{done}")), sel("session-row")),
        (
            "session",
            Some(format!("#/runs/{done}/sessions/s0")),
            sel("diff-file"),
        ),
        ("approvals", Some("#/approvals".to_owned()), sel("approval")),
    ];
    for (name, to, ready) in pages {
        if let Some(to) = to {
            route(&b, &to).await;
        }
        b.element(&ready).await;
        if name == "login" {
            let v = b.js(OVERFLOW, vec![]).await;
            assert_eq!(v, json!([]), "the login page overflows");
            b.shot("login").await;
            log_in(&b, &c.base, &t.alice).await;
            b.element(&sel("runs-table")).await;
            continue;
        }
        // Let the page settle (its streams deliver) before measuring.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let v = b.js(OVERFLOW, vec![]).await;
        b.shot(name).await;
        assert_eq!(v, json!([]), "the {name} page overflows at {}px", PHONE.0);
    }
    b.quit().await;
    c.cancel(&waiting, &t);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// The server's `/v1` answers so far, by status class: (2xx, 401).
fn api_answers(c: &Console, token: &str) -> (u64, u64) {
    let r = c
        .server
        .request("GET", "/metrics", Some(token), "text/plain", b"");
    assert_eq!(r.status, 200);
    let (mut ok, mut refused) = (0, 0);
    for line in r
        .body
        .lines()
        .filter(|l| l.starts_with("capfleet_server_requests_total{"))
    {
        if !line.contains("route=\"/v1") {
            continue;
        }
        let n: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0) as u64;
        if line.contains("status=\"2") {
            ok += n;
        } else if line.contains("status=\"401\"") {
            refused += n;
        }
    }
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_with_a_wrong_token_sees_nothing_of_any_run() {
    let (c, t) = Console::start();
    let m = EnvMarker::new("console-wrong");
    let id = c.submit(&t, &m, PERMISSION_THEN_HTML);
    c.open_asks(&id, &t.ci);
    let before = api_answers(&c, &t.ci);
    let b = Browser::start("wrong-token", DESKTOP).await;
    let wrong = format!("cft_{}", "0".repeat(43));
    log_in(&b, &c.base, &wrong).await;
    b.element(&sel("login-error")).await;
    b.shot("login").await;
    // Straight to the run's page, its session and the approvals: still nothing.
    for to in [
        format!("#/runs/{id}"),
        format!("#/runs/{id}/sessions/s0"),
        "#/approvals".to_owned(),
        "#/runs".to_owned(),
    ] {
        route(&b, &to).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let html = b
            .js("return document.documentElement.outerHTML", vec![])
            .await;
        let html = html.as_str().unwrap();
        let visible = b.js("return document.body.innerText", vec![]).await;
        assert!(!html.contains(&id), "{to}: the run id is in the DOM");
        assert!(!html.contains("echo hi"), "{to}: the ask is in the DOM");
        assert_eq!(b.count(&sel("run-row")).await, 0, "{to}: {visible}");
        assert_eq!(b.count(&sel("approval")).await, 0, "{to}: {visible}");
    }
    b.shot("run").await;
    // The browser saw no answer but refusals; the server counted none but 401s.
    let statuses = b
        .js(
            "return performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/')).map(e => [e.name, e.responseStatus])",
            vec![],
        )
        .await;
    let statuses = statuses.as_array().unwrap();
    assert!(!statuses.is_empty(), "the page asked the API nothing");
    for s in statuses {
        let code = s[1].as_u64().unwrap_or(0);
        assert!(!(200..300).contains(&code), "an API call succeeded: {s}");
    }
    let after = api_answers(&c, &t.ci);
    assert_eq!(after.0, before.0, "the server answered the page with a 2xx");
    assert!(after.1 > before.1, "the server refused nothing");
    b.quit().await;
    c.cancel(&id, &t);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}
