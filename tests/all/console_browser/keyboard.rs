//! The main controls reached and worked with Tab and Enter only, the focus always
//! seen.

use std::time::Duration;

use thirtyfour::Key;

use super::{Console, PERMISSION_THEN_HTML, ended, run_page_id};
use crate::common::EnvMarker;
use crate::common::browser::{Browser, DESKTOP};
use crate::common::console::{route, sel};
use crate::common::serve::sim_fleet;

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
