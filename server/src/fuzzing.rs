//! The server's decoder of untrusted input the fuzz crate (`capfleet-fuzz`) drives,
//! through the binary's `capfleet::fuzzing`; not an API.

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;

/// The body of a `POST /v1/runs` sent with `content_type`, read as the server reads
/// it (`Submission::parse` by its media type): the names of the files it would write beside the fleet,
/// or the message of the error it would answer.
pub fn serve_body(content_type: &str, body: &[u8]) -> Result<Vec<String>, String> {
    let mut headers = HeaderMap::new();
    let kind = content_type
        .parse()
        .map_err(|e| format!("content type {content_type:?}: {e}"))?;
    headers.insert(CONTENT_TYPE, kind);
    crate::body::submission(&headers, body)
        .map(|s| s.files.into_keys().collect())
        .map_err(|e| e.to_string())
}
