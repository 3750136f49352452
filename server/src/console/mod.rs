//! The web console: `GET /` and its assets, plain HTML, CSS and JavaScript modules
//! written by hand in `assets/` (no build step), embedded in the binary at compile
//! time. The console is a client of the public API only — everything it shows it
//! reads from `/v1/...` with the token the user typed, which stays in the tab's
//! `sessionStorage` and travels only as the `Authorization` header (the event
//! streams are read with `fetch`, which can set it; no token ever goes in a URL).
//!
//! The page itself holds nothing of any run, so it is served without a token, like
//! the probes. Its assets live under `/console/<version>/`, `<version>` a digest of
//! every asset: each is cached for good (`immutable`), and a new binary's page names
//! new URLs; the page is `no-cache`. Every answer carries a strict
//! Content-Security-Policy ([`CSP`]: scripts and styles from the server only, no
//! inline script, no `eval`, requests to the server only, never framed), `nosniff`
//! and no referrer.
//!
//! # The console's API
//!
//! API the console added (each in the OpenAPI document, guarded like the rest):
//! `GET /v1/me` (the token's name and role), `GET /v1/asks` (open questions of every run,
//! each with `run` and `fleet`; a permission's `why`, the risk's reasons from
//! `_meta."capfleet.risk"`, carried on `OpenRequest::Permission.why`), `POST
//! /v1/fleets/validate` (a submission checked in a temporary directory, nothing run:
//! `valid`, `findings` with lines, `warnings`), `GET /v1/runs/{id}/fleet` (`graph.rs`: the
//! fleet's sessions and routes, kept on the `RunEntry` at admission), `GET
//! /v1/runs/{id}/changes` (`changes.rs`: each session's `diff.patch` and the journal's
//! `git_dirty` vetting findings), `SessionView.pauses`/`paused_until_ms`,
//! `RunView.trace_url` (`--trace-ui`; the `serve.run` span's trace id), and the `409
//! ask_closed` body's `answered_by`.
//!
//! # The contract the browser tests hold the console to
//!
//! - routes: `#/runs`, `#/runs/<run-id>`, `#/runs/<run-id>/sessions/<session>`, `#/approvals`;
//! - `data-testid`s: `login-token` (input), `login-submit`, `login-error`; `runs-table`,
//!   `run-row` (`data-run-id`, child `run-state`); `fleet-toml` (textarea), `fleet-upload`,
//!   `fleet-files`, `fleet-task`, `validate-findings` (each `finding` with `data-line`),
//!   `validate-verdict`, `submit-run`; on a run: `run-state`, `cancel-run`,
//!   `stream-status`, `sessions-table` in its box `sessions-box`, `session-row` (`data-session`; children `session-state`,
//!   `session-cost`, `session-turn`, `session-restarts`, `session-pauses`,
//!   `session-tokens`, `trace-link`), `cost-bar` (`data-spent`, `data-limit`), `plan`
//!   (entries `plan-entry` with `data-state`), `route-graph` (svg; nodes `graph-node` with
//!   `data-session`, or `data-pseudo` `task`/`plan`; edges `graph-edge` with `data-from`,
//!   `data-to`, `data-kind`: `task`, `pipe`, `join`, `fan_out`, `race`, `collect`, `plan`, `mention`, `delivery`; those under way have class `active`), `changes` (links
//!   `changes-link`), `artifacts` (`artifact-link`); on a session: `session-row` (a `dl`
//!   with the same children), `event-list`, `event-filter` (select), `event-row`
//!   (`data-kind`, `data-id`), `event-fold`, `event-detail`, `event-count`, `diff` (files
//!   `diff-file` with `data-path`; findings `diff-finding`), `no-diff`; approvals:
//!   `approvals-list`, `approval` (`data-ask-id`, `data-run-id`, `data-kind`),
//!   `approval-tool`, `approval-risk`, `approval-why`, `approval-input`,
//!   `approval-prompt`, `approve-once`, `approve-always`, `deny` (also an ask's decline),
//!   `ask-option`, `ask-text`, `ask-answer`, `answered` (ours), `answered-by` (a 409:
//!   "Already answered by X"), `answer-error`; header: `whoami`, `logout`,
//!   `approvals-count`.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;

/// The console's Content-Security-Policy.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
/// Where the assets are served, before their version.
const PREFIX: &str = "/console";

/// One embedded file.
struct Asset {
    name: &'static str,
    kind: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $kind:expr) => {
        Asset {
            name: $name,
            kind: $kind,
            body: include_str!(concat!("assets/", $name)),
        }
    };
}

/// Every asset but the page (one module per page or concept; the module doc lists
/// them).
const ASSETS: &[Asset] = &[
    asset!("console.css", CSS),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("sse.js", JS),
    asset!("dom.js", JS),
    asset!("login.js", JS),
    asset!("runs.js", JS),
    asset!("submit.js", JS),
    asset!("run.js", JS),
    asset!("model.js", JS),
    asset!("graph.js", JS),
    asset!("events.js", JS),
    asset!("session.js", JS),
    asset!("diff.js", JS),
    asset!("approvals.js", JS),
];

/// The page; `{{assets}}` is replaced by the assets' URL prefix.
const INDEX: &str = include_str!("assets/index.html");

/// A digest of every asset: their URLs change with any of them.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for a in ASSETS {
        ctx.update(a.name.as_bytes());
        ctx.update(&[0]);
        ctx.update(a.body.as_bytes());
        ctx.update(&[0]);
    }
    hex::encode(&ctx.finish().as_ref()[..8])
});

static PAGE: LazyLock<String> =
    LazyLock::new(|| INDEX.replace("{{assets}}", &format!("{PREFIX}/{}", *VERSION)));

/// The console's routes: the page, open, and its assets.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route("/console/{version}/{file}", get(asset))
}

fn respond(kind: &'static str, cache: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, HeaderValue); 6] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ];
    (headers, body).into_response()
}

async fn page() -> Response {
    respond(HTML, "no-cache", PAGE.as_str())
}

async fn asset(Path((version, file)): Path<(String, String)>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) if version == *VERSION => {
            respond(a.kind, "public, max-age=31536000, immutable", a.body)
        }
        _ => ApiError::NoRoute.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `assets/` is embedded, and none is embedded twice.
    #[test]
    fn every_asset_file_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console/assets");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "index.html")
            .collect();
        on_disk.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.name.to_owned()).collect();
        served.sort();
        assert_eq!(on_disk, served);
    }

    /// What the policy forbids is not in the code either: no inline script or style
    /// in the page, no HTML parsed from strings (agent output is text, always).
    #[test]
    fn the_assets_keep_to_the_policy() {
        assert!(!INDEX.contains("style="), "no inline style");
        for (i, part) in INDEX.split("<script").enumerate().skip(1) {
            assert!(
                part.starts_with(" type=\"module\" src="),
                "script {i} is a module from the server: {part}"
            );
        }
        for a in ASSETS {
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "new Function",
                "document.write",
            ] {
                assert!(!a.body.contains(banned), "{} uses {banned}", a.name);
            }
        }
        assert!(PAGE.contains(&format!("/console/{}/app.js", *VERSION)));
    }
}
