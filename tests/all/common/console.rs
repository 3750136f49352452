//! The web console (`GET /` of `capfleet serve`) as its tests and bench see it: its
//! elements by `data-testid`, logging in, its hash routes, what a page shows.
//!
//! Shared with the console bench (`benches/console.rs` includes it by path), so it
//! uses nothing of `common` but [`browser`](super::browser).

use std::time::Duration;

use serde_json::Value;

use super::browser::{Browser, js_string};

/// The CSS selector of the elements with `data-testid="<id>"`.
pub(crate) fn sel(id: &str) -> String {
    format!("[data-testid=\"{id}\"]")
}

/// Open the console at `base` (`http://127.0.0.1:PORT`), type `token` into the login
/// form and submit it.
pub(crate) async fn log_in(b: &Browser, base: &str, token: &str) {
    b.open(&format!("{base}/")).await;
    let input = b.element(&sel("login-token")).await;
    input.send_keys(token).await.expect("the token typed");
    b.element(&sel("login-submit"))
        .await
        .click()
        .await
        .expect("log in");
}

/// [`log_in`], then wait for the list of runs.
pub(crate) async fn logged_in(b: &Browser, base: &str, token: &str) {
    log_in(b, base, token).await;
    b.element(&sel("runs-table")).await;
}

/// Go to the console's route `route` (`#/runs/<id>`…) without reloading the page.
pub(crate) async fn route(b: &Browser, route: &str) {
    b.js(
        "location.hash = arguments[0]; return true",
        vec![Value::from(route)],
    )
    .await;
}

/// The text of each element matching `css`, trimmed.
pub(crate) async fn texts(b: &Browser, css: &str) -> Vec<String> {
    let v = b
        .js(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent.trim())",
            vec![Value::from(css)],
        )
        .await;
    serde_json::from_value(v).unwrap_or_default()
}

/// Wait (`timeout`) until some element matching `css` contains `text`.
pub(crate) async fn wait_text(b: &Browser, css: &str, text: &str, timeout: Duration) {
    b.wait(
        &format!("{css} with `{text}`"),
        timeout,
        &format!(
            "return [...document.querySelectorAll({})].some(e => e.textContent.includes({}))",
            js_string(css),
            js_string(text)
        ),
    )
    .await;
}

/// The session rows of the run page: (`data-session`, the text of its
/// `session-state`).
pub(crate) async fn session_states(b: &Browser) -> Vec<(String, String)> {
    let v = b
        .js(
            r#"return [...document.querySelectorAll('[data-testid="session-row"]')].map(r => [
                r.getAttribute('data-session'),
                (r.querySelector('[data-testid="session-state"]') || {textContent: ''}).textContent.trim()
            ])"#,
            vec![],
        )
        .await;
    serde_json::from_value(v).unwrap_or_default()
}
