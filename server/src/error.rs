//! The API's errors: each a status, a stable `code` and a message, as a JSON body
//! (`{"code", "message"}`, and for a rejected fleet every finding with its line and
//! key). What clients match on is `code`; the message is for people.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

pub(crate) use capfleet_app::submission::Finding;
use capfleet_app::submission::SubmissionError;

/// The stable codes of the API's errors: what clients match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorCode {
    /// No token, or a token the server does not know (401).
    Unauthorized,
    /// The token's role is below the route's (403).
    Forbidden,
    /// No such route (404).
    NoRoute,
    /// The route does not take that method (405).
    MethodNotAllowed,
    /// The request came from a page of another origin (`Origin`), refused before
    /// anything else (403).
    ForeignOrigin,
    /// `Host` names neither an address the server listens on nor `--public-url`
    /// (421): what a DNS-rebinding page sends.
    UnknownHost,
    RunNotFound,
    AskNotFound,
    ArtifactNotFound,
    /// The ask was answered, timed out or withdrawn (409).
    AskClosed,
    /// A parameter or body the server cannot take; the message says which (400).
    BadRequest,
    /// An answer the open question does not take (422, with `expected`); the
    /// question stays open.
    InvalidAnswer,
    /// The fleet has findings (400, with `findings`).
    InvalidFleet,
    TooManySessions,
    UnsupportedMediaType,
    /// The run has ended: nothing to cancel (409).
    RunEnded,
    /// Admission and queue are full (429, with `Retry-After`).
    ServerFull,
    /// The server drains: no new runs (503).
    Draining,
    /// A session must run sandboxed and this host has no sandbox backend (503): the
    /// message names what is missing; nothing is run unconfined.
    NoSandbox,
    /// Past the connection cap with every connection busy (503, with `Retry-After`;
    /// the connection is closed).
    TooManyConnections,
    Internal,
}

/// Every error's body.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub code: ErrorCode,
    /// For people; clients match on `code`.
    pub message: String,
    /// A rejected fleet's findings (`invalid_fleet` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<crate::schema::Finding>>)]
    pub findings: Option<Vec<Finding>>,
    /// Who answered an ask already (`ask_closed`, when a client answered it): the
    /// token's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// What an open question takes (`invalid_answer`): a permission's decisions, or
    /// an ask's form.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub expected: Option<serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("a valid bearer token is required")]
    Unauthorized,
    #[error("this route needs the `{needed}` role")]
    Forbidden { needed: &'static str },
    #[error("no such route")]
    NoRoute,
    #[error("no run `{0}`")]
    NoRun(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{message}")]
    InvalidAnswer {
        message: String,
        expected: serde_json::Value,
    },
    #[error("the fleet is invalid: {} finding(s)", .0.len())]
    InvalidFleet(Vec<Finding>),
    #[error("the fleet has {sessions} sessions; this server runs at most {max} at once")]
    TooManySessions { sessions: usize, max: usize },
    #[error("content type `{got}`: send {want}")]
    UnsupportedMedia { got: String, want: &'static str },
    #[error("no artifact `{0}`")]
    NoArtifact(String),
    #[error("no open ask `{0}`")]
    NoAsk(String),
    #[error("the ask is closed: {what}")]
    AskClosed {
        what: String,
        answered_by: Option<String>,
    },
    #[error("the run has ended ({0}): nothing to cancel")]
    Ended(String),
    #[error("the server is full: {running} runs running and {queued} queued")]
    Full { running: usize, queued: usize },
    #[error("the server is shutting down: it takes no new runs")]
    Draining,
    #[error("{0}")]
    NoSandbox(String),
    #[error("this route does not take that method")]
    MethodNotAllowed,
    #[error(
        "a request from a page of another origin (`{0}`): this server answers only its own console and clients that are no web page"
    )]
    ForeignOrigin(String),
    #[error("`Host: {0}` is not an address this server listens on (nor its --public-url)")]
    UnknownHost(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::NoRoute
            | ApiError::NoRun(_)
            | ApiError::NoAsk(_)
            | ApiError::NoArtifact(_) => StatusCode::NOT_FOUND,
            ApiError::AskClosed { .. } => StatusCode::CONFLICT,
            ApiError::BadRequest(_)
            | ApiError::InvalidFleet(_)
            | ApiError::TooManySessions { .. } => StatusCode::BAD_REQUEST,
            ApiError::InvalidAnswer { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::UnsupportedMedia { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Ended(_) => StatusCode::CONFLICT,
            ApiError::Full { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Draining | ApiError::NoSandbox(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::ForeignOrigin(_) => StatusCode::FORBIDDEN,
            ApiError::UnknownHost(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable code clients match on.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            ApiError::Unauthorized => ErrorCode::Unauthorized,
            ApiError::Forbidden { .. } => ErrorCode::Forbidden,
            ApiError::NoRoute => ErrorCode::NoRoute,
            ApiError::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            ApiError::ForeignOrigin(_) => ErrorCode::ForeignOrigin,
            ApiError::UnknownHost(_) => ErrorCode::UnknownHost,
            ApiError::NoRun(_) => ErrorCode::RunNotFound,
            ApiError::NoAsk(_) => ErrorCode::AskNotFound,
            ApiError::NoArtifact(_) => ErrorCode::ArtifactNotFound,
            ApiError::AskClosed { .. } => ErrorCode::AskClosed,
            ApiError::BadRequest(_) => ErrorCode::BadRequest,
            ApiError::InvalidAnswer { .. } => ErrorCode::InvalidAnswer,
            ApiError::InvalidFleet(_) => ErrorCode::InvalidFleet,
            ApiError::TooManySessions { .. } => ErrorCode::TooManySessions,
            ApiError::UnsupportedMedia { .. } => ErrorCode::UnsupportedMediaType,
            ApiError::Ended(_) => ErrorCode::RunEnded,
            ApiError::Full { .. } => ErrorCode::ServerFull,
            ApiError::Draining => ErrorCode::Draining,
            ApiError::NoSandbox(_) => ErrorCode::NoSandbox,
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }
}

/// Seconds a client refused for a full server waits before trying again.
pub(crate) const RETRY_AFTER_S: u64 = 5;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code(),
            message: self.to_string(),
            findings: match &self {
                ApiError::InvalidFleet(findings) => Some(findings.clone()),
                _ => None,
            },
            answered_by: match &self {
                ApiError::AskClosed { answered_by, .. } => answered_by.clone(),
                _ => None,
            },
            expected: match &self {
                ApiError::InvalidAnswer { expected, .. } => Some(expected.clone()),
                _ => None,
            },
        };
        let mut response = json_response(self.status(), &body);
        match self {
            ApiError::Full { .. } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
            }
            ApiError::Unauthorized => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

/// `value` as a JSON response with `status`.
pub(crate) fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            format!(r#"{{"code":"internal","message":"encoding the response: {e}"}}"#),
        )
            .into_response(),
    }
}

impl From<SubmissionError> for ApiError {
    fn from(e: SubmissionError) -> ApiError {
        match e {
            SubmissionError::BadRequest(m) => ApiError::BadRequest(m),
            SubmissionError::InvalidFleet(f) => ApiError::InvalidFleet(f),
            SubmissionError::UnsupportedMedia { got, want } => {
                ApiError::UnsupportedMedia { got, want }
            }
            SubmissionError::NoSandbox(m) => ApiError::NoSandbox(m),
            SubmissionError::Internal(m) => ApiError::Internal(m),
        }
    }
}
