//! The demo fleet pasted into the page, submitted, and its sessions followed live to
//! `closed`: states, plan, route graph, events, diffs and artifacts.

use serde_json::{Value, json};

use super::{Console, RUN, SHOWN, ended, run_page_id};
use crate::common::browser::{Browser, DESKTOP};
use crate::common::console::{logged_in, route, sel, session_states, texts, wait_text};
use crate::common::repo_root;

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

/// Put `text` into the fleet form's textarea as typed keys.
async fn type_fleet(b: &Browser, text: &str) {
    let area = b.element(&sel("fleet-toml")).await;
    area.clear().await.unwrap();
    area.send_keys(text).await.unwrap();
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
