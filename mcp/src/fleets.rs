//! What the tools act on, and who acts. The tools know no server: they call a
//! [`Fleets`], which `capfleet-server` implements over its runs (its admission, its
//! asks, its cancel) for both transports, so that `capfleet mcp` and `serve`'s `/mcp`
//! start, answer and cancel runs exactly as `POST /v1/runs` and its routes do.

use std::path::PathBuf;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::types::{AnswerAsk, Answered, AskList, Diff, FleetSource, RunList, RunStatus, Started};
use capfleet_engine::run::calls::OutsideCall;

/// What a tool needs of its caller; each includes the ones before it (the server's
/// roles: `read`, `run`, `approve`; an `admin` token may all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// See runs, their questions, diffs, journals.
    Read,
    /// + start and cancel runs.
    Run,
    /// + answer permissions and asks.
    Approve,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Run => "run",
            Access::Approve => "approve",
        }
    }
}

/// Who calls: a token's name and what its role allows (over HTTP), or the local user
/// (`capfleet mcp`, who may everything `capfleet run` may).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub may: Access,
}

/// Why a tool call was refused: a tool error (`isError`) whose text is
/// `{"code", "message", "detail"}`, the codes of the server's API where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("`{tool}` needs the `{needed}` role; `{by}` has `{has}`")]
    Forbidden {
        tool: &'static str,
        needed: &'static str,
        by: String,
        has: &'static str,
    },
    /// The request reached the tools without a caller (the server's auth sets one).
    #[error("no caller: the request was not authenticated")]
    Unauthorized,
    #[error("{0}")]
    BadRequest(String),
    /// The backend's refusal: its code (`run_not_found`, `invalid_fleet`, …), what
    /// it says, and what it adds (a fleet's findings, what an answer takes).
    #[error("{message}")]
    Refused {
        code: String,
        message: String,
        detail: Option<Value>,
    },
}

impl ToolError {
    /// The stable code clients match on.
    pub fn code(&self) -> &str {
        match self {
            ToolError::Forbidden { .. } => "forbidden",
            ToolError::Unauthorized => "unauthorized",
            ToolError::BadRequest(_) => "bad_request",
            ToolError::Refused { code, .. } => code,
        }
    }

    /// The error's JSON.
    pub fn body(&self) -> Value {
        let detail = match self {
            ToolError::Refused { detail, .. } => detail.clone(),
            _ => None,
        };
        json!({"code": self.code(), "message": self.to_string(), "detail": detail})
    }
}

impl Caller {
    /// Whether this caller may call `tool`, which needs `needed`.
    pub fn allowed(&self, tool: &'static str, needed: Access) -> Result<(), ToolError> {
        if self.may >= needed {
            return Ok(());
        }
        Err(ToolError::Forbidden {
            tool,
            needed: needed.as_str(),
            by: self.name.clone(),
            has: self.may.as_str(),
        })
    }
}

/// What a backend answers, later.
pub type Reply<T> = BoxFuture<'static, Result<T, ToolError>>;

/// The runs the tools act on.
pub trait Fleets: Send + Sync + 'static {
    /// Every run, oldest first.
    fn runs(&self) -> Reply<RunList>;
    /// Validate `fleet` (as `run --dry-run` does) and start it in the background.
    fn start(&self, fleet: FleetSource, task: Option<String>, by: Caller) -> Reply<Started>;
    fn status(&self, run: String) -> Reply<RunStatus>;
    fn asks(&self, run: String) -> Reply<AskList>;
    fn answer(&self, answer: AnswerAsk, by: Caller) -> Reply<Answered>;
    fn diff(&self, run: String, session: String) -> Reply<Diff>;
    fn cancel(&self, run: String, by: Caller) -> Reply<RunStatus>;
    /// The directory of run `run` (its journal and artifacts), if there is one.
    fn run_dir(&self, run: &str) -> Option<PathBuf>;
    /// Journal `call` in run `run` (never waiting for the disk).
    fn journal(&self, run: &str, call: OutsideCall);
}
