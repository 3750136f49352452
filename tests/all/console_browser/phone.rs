//! A phone's width (390 px): no page wider than the screen.

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
