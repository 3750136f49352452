//! A page with a wrong token sees nothing of any run, and the server answers it
//! nothing but refusals.

use std::time::Duration;

use super::{Console, PERMISSION_THEN_HTML};
use crate::common::EnvMarker;
use crate::common::browser::{Browser, DESKTOP};
use crate::common::console::{log_in, route, sel};

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
