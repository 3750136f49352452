//! One webhook's delivery task: its notices posted in order, each signed, each
//! retried on a failure worth retrying (no answer, a timeout, a 5xx, a 429) with a
//! doubling backoff, [`ATTEMPTS`] times at most; a 4xx is the receiver's refusal and
//! is not retried. Once the run or server ends (`closing`), the task delivers what is
//! queued and stops; [`super::Workers::finish`] bounds how long that may take.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::{Notice, NotifySpec, NotifyStats};

/// Attempts per notice, at most.
pub(super) const ATTEMPTS: u32 = 5;
/// The first backoff step (then 2x per attempt).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// One attempt, connecting and answering, at most.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// The signature header's value for `body`: `sha256=<hex>`.
pub(super) fn signature(key: &ring::hmac::Key, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(ring::hmac::sign(key, body).as_ref())
    )
}

pub(super) async fn run(
    spec: NotifySpec,
    mut notices: mpsc::Receiver<Notice>,
    stats: NotifyStats,
    mut closing: watch::Receiver<bool>,
    outstanding: Arc<AtomicU64>,
) {
    capfleet_wire::driver::crypto_provider();
    let client = match reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("the webhook's HTTP client: {e}");
            return;
        }
    };
    let key = spec.secret.key();
    let mut n: u64 = 0;
    loop {
        let notice = tokio::select! {
            biased;
            notice = notices.recv() => notice,
            _closed = closing.wait_for(|c| *c) => notices.try_recv().ok(),
        };
        let Some(notice) = notice else { return };
        n += 1;
        let delivery = format!("{}-{n}", notice.body["run_id"].as_str().unwrap_or("server"));
        post(&client, &spec.url, &key, &notice, &delivery, &stats).await;
        outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why an attempt failed, and whether another may do better.
enum Failed {
    Retry(String),
    Refused(String),
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    key: &ring::hmac::Key,
    notice: &Notice,
    delivery: &str,
    stats: &NotifyStats,
) {
    let body = Value::to_string(&notice.body);
    let signature = signature(key, body.as_bytes());
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Capfleet-Event", notice.kind.as_str())
            .header("X-Capfleet-Delivery", delivery)
            .header("X-Capfleet-Signature", &signature)
            .body(body.clone())
            .send()
            .await;
        let failed = match sent {
            Ok(r) if r.status().is_success() => {
                stats.sent.inc();
                return;
            }
            Ok(r) if r.status().as_u16() == 429 || r.status().is_server_error() => {
                Failed::Retry(format!("answered {}", r.status()))
            }
            Ok(r) => Failed::Refused(format!("answered {}", r.status())),
            // The error names the URL, which may carry a token: said without it.
            Err(e) => Failed::Retry(e.without_url().to_string()),
        };
        let why = match failed {
            Failed::Retry(_) if attempt < ATTEMPTS => {
                stats.retries.inc();
                tokio::time::sleep(backoff).await;
                backoff *= 2;
                attempt += 1;
                continue;
            }
            Failed::Retry(why) | Failed::Refused(why) => why,
        };
        stats.failed.inc();
        tracing::warn!(
            event = notice.kind.as_str(),
            delivery,
            attempts = attempt,
            "a webhook notice was not delivered: {why}"
        );
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"Jefe");
        assert_eq!(
            signature(&key, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
