//! The decoders of untrusted input the fuzz crate (`capfleet-fuzz`) drives; not an
//! API. Each is a plain function over the app's private code, the way the app reads
//! that input, returning what the fuzz targets check: rendered findings, accepted
//! names, an error's message.

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;

use crate::fleet;

/// A fleet.toml (`src`, named `origin` in every finding) read and validated as `run`,
/// `run --dry-run` and the server do before anything it names is looked for on disk:
/// every error then every warning, rendered as they print them; the error when the
/// text is not TOML.
pub fn fleet_toml(origin: &str, src: &str) -> Result<Vec<String>, String> {
    match fleet::check(origin, src) {
        Ok(checked) => Ok(checked
            .errors
            .iter()
            .map(ToString::to_string)
            .chain(checked.warnings.iter().map(ToString::to_string))
            .collect()),
        Err(errors) => Err(errors.to_string()),
    }
}

/// The body of a `POST /v1/runs` sent with `content_type`, read as the server reads
/// it (`Submission::parse` by its media type): the names of the files it would write beside the fleet,
/// or the message of the error it would answer.
pub fn serve_body(content_type: &str, body: &[u8]) -> Result<Vec<String>, String> {
    let mut headers = HeaderMap::new();
    let kind = content_type
        .parse()
        .map_err(|e| format!("content type {content_type:?}: {e}"))?;
    headers.insert(CONTENT_TYPE, kind);
    crate::cmd::serve::body::submission(&headers, body)
        .map(|s| s.files.into_keys().collect())
        .map_err(|e| e.to_string())
}
