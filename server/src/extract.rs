//! The request's parts as the handlers take them, every refusal an [`ApiError`] (a
//! JSON body with its `code`), never axum's plain-text rejections: the query and
//! the path parameters typed (the same types the OpenAPI document describes), a
//! JSON body.

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The query string as `T` (400 naming what does not fit).
pub(crate) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| ApiError::BadRequest(format!("the query: {}", e.body_text())))
    }
}

/// The path's parameters as `T` (400 naming what does not fit).
pub(crate) struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| ApiPath(p))
            .map_err(|e| ApiError::BadRequest(format!("the path: {}", e.body_text())))
    }
}

/// A JSON body as `T`: sent as `application/json` (else 415: never read as JSON
/// whatever its type, as a page's `text/plain` post would be), 400 naming what does
/// not fit.
pub(crate) fn json_body<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let kind = super::origin::media_type(headers);
    if kind != "application/json" {
        return Err(ApiError::UnsupportedMedia {
            got: kind,
            want: "application/json",
        });
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the JSON body: {e}")))
}
