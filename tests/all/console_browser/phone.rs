//! A phone's width (390 px): no page wider than the screen, and the run page's
//! sessions as cards.

use std::time::Duration;

use serde_json::json;

use super::{Console, PERMISSION_THEN_HTML, ended};
use crate::common::EnvMarker;
use crate::common::browser::{Browser, PHONE};
use crate::common::console::{log_in, route, sel};

/// Nothing wider than the viewport: the elements that stick out, if any.
const OVERFLOW: &str = r#"
const w = document.documentElement.clientWidth;
if (document.documentElement.scrollWidth <= w) return [];
return [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > w + 1)
  .slice(0, 5)
  .map(e => `${e.tagName.toLowerCase()}.${e.className} [data-testid=${e.getAttribute('data-testid')}] "${e.textContent.slice(0, 40)}" right=${Math.round(e.getBoundingClientRect().right)} (viewport ${w})`);
"#;

/// The run page's sessions as its box lays them out: whether the box scrolls
/// sideways, its header row's area on screen, and per session row its CSS display,
/// whether it and each of its cells lie within the box (and the row), and the label
/// each cell shows before its value (`::before`).
const CARDS: &str = r#"
const box = document.querySelector('[data-testid="sessions-box"]');
const b = box.getBoundingClientRect();
const within = (x, o) => x.left >= o.left - 0.5 && x.right <= o.right + 0.5;
const head = box.querySelector('thead').getBoundingClientRect();
return {
  scrolls: box.scrollWidth > box.clientWidth,
  head: Math.round(head.width * head.height),
  rows: [...box.querySelectorAll('[data-testid="session-row"]')].map(r => {
    const rr = r.getBoundingClientRect();
    return {
      display: getComputedStyle(r).display,
      inside: within(rr, b),
      cells_inside: [...r.children].every(c => within(c.getBoundingClientRect(), rr)),
      labels: [...r.children].map(c => getComputedStyle(c, '::before').content),
    };
  }),
};
"#;

/// Counts, from now on, the layout shifts of the page (their summed score) and the
/// redraws of the sessions (`__redraws`).
const SHIFTS: &str = r#"
window.__shift = 0;
window.__redraws = 0;
new PerformanceObserver(list => {
  for (const e of list.getEntries()) if (!e.hadRecentInput) window.__shift += e.value;
}).observe({type: 'layout-shift'});
new MutationObserver(() => window.__redraws++)
  .observe(document.querySelector('[data-testid="sessions-table"] tbody'), {childList: true});
return true;
"#;

/// The run page's sessions are cards within their box: nothing scrolls sideways,
/// each card is a grid inside the box, each of its cells inside the card, each figure
/// under its column's name, the header row gone from the screen.
async fn sessions_are_cards(b: &Browser, page: &str) {
    let v = b.js(CARDS, vec![]).await;
    assert_eq!(
        v["scrolls"], false,
        "{page}: the sessions' box scrolls sideways: {v}"
    );
    assert!(
        v["head"].as_u64().unwrap() <= 1,
        "{page}: the header row shows: {v}"
    );
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "{page}: no session: {v}");
    for r in rows {
        assert_eq!(r["display"], "grid", "{page}: a session is not a card: {v}");
        assert_eq!(
            r["inside"], true,
            "{page}: a card sticks out of its box: {v}"
        );
        assert_eq!(
            r["cells_inside"], true,
            "{page}: a cell sticks out of its card: {v}"
        );
        let labels: Vec<&str> = r["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap_or_default())
            .collect();
        for label in [
            "Turn",
            "Tokens in / out",
            "Cost",
            "Restarts",
            "Pauses",
            "Trace",
        ] {
            assert!(
                labels.contains(&format!("\"{label}\"").as_str()),
                "{page}: no label {label:?} in the card: {labels:?}"
            );
        }
    }
}

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
        if name == "run" {
            sessions_are_cards(&b, name).await;
        }
    }
    // The waiting run's page, redrawn as it polls: its cards, and nothing moves.
    route(&b, &format!("#/runs/{waiting}")).await;
    b.element(&sel("session-row")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.js(SHIFTS, vec![]).await;
    b.wait(
        "a redraw of the sessions",
        Duration::from_secs(10),
        "return window.__redraws >= 1",
    )
    .await;
    b.shot("run-waiting").await;
    sessions_are_cards(&b, "run-waiting").await;
    let shift = b.js("return window.__shift", vec![]).await;
    assert_eq!(
        shift.as_f64(),
        Some(0.0),
        "the cards moved as the page redrew"
    );
    b.quit().await;
    c.cancel(&waiting, &t);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}
