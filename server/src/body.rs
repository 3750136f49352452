//! A request's body as a [`Submission`], read by its content type.

use axum::http::HeaderMap;

use super::error::ApiError;
use capfleet_app::submission::Submission;

/// The body as a submission, by its content type.
pub(crate) fn submission(headers: &HeaderMap, body: &[u8]) -> Result<Submission, ApiError> {
    Ok(Submission::parse(
        &super::origin::media_type(headers),
        body,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use axum::http::header::CONTENT_TYPE;

    fn headers(kind: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
        h
    }

    #[test]
    fn bodies_by_content_type() {
        let s = submission(&headers("application/toml"), b"[fleet]\n").unwrap();
        assert_eq!(s.fleet, "[fleet]\n");
        let s = submission(
            &headers("application/json; charset=utf-8"),
            br#"{"fleet":"x","task":"t","files":{"s/a.toml":"y"}}"#,
        )
        .unwrap();
        assert_eq!((s.fleet.as_str(), s.task.as_deref()), ("x", Some("t")));
        for kind in ["image/png", "text/plain", "text/toml", ""] {
            assert!(
                matches!(
                    submission(&headers(kind), b"[fleet]\n"),
                    Err(ApiError::UnsupportedMedia { .. })
                ),
                "{kind}"
            );
        }
        for bad in [
            r#"{"fleet":"x","files":{"../a":"y"}}"#,
            r#"{"fleet":"x","files":{"/etc/a":"y"}}"#,
            r#"{"fleet":"x","task":"@/etc/passwd"}"#,
            r#"{"fleet":"x","other":1}"#,
        ] {
            assert!(
                matches!(
                    submission(&headers("application/json"), bad.as_bytes()),
                    Err(ApiError::BadRequest(_))
                ),
                "{bad}"
            );
        }
    }
}
