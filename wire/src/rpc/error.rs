//! The reverse RPC's typed errors, each carrying the spec's code (coding §10).

use serde_json::{Value, json};

use crate::protocol::CapCode;

/// JSON-RPC's own code for bad parameters (used for malformed requests and unknown ids).
pub(crate) const INVALID_PARAMS: i32 = -32602;
/// The JSON-RPC (and ACP) code of a request that was cancelled / not answered.
pub(crate) const REQUEST_CANCELLED: i32 = -32800;
/// JSON-RPC's code for a method this orchestrator does not serve.
pub(crate) const METHOD_NOT_FOUND: i32 = -32601;

/// Why a reverse RPC failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RpcError {
    /// Outside `fs.scope`; deliberately says nothing about existence.
    #[error("path outside the declared fs.scope")]
    ScopeViolation,
    #[error("no such file or directory")]
    PathNotFound,
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    TerminalUnavailable(String),
    #[error("terminal was killed by the orchestrator")]
    TerminalKilled,
    /// The manifest does not declare this capability.
    #[error("capability not declared in the manifest: {0}")]
    Unsupported(&'static str),
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// The user (or the policy) refused a vetted terminal command.
    #[error("permission denied: {0}")]
    Denied(String),
    /// Nobody answered a `cap.user_io.input` (and it had no default).
    #[error("declined: {0}")]
    Declined(String),
}

impl RpcError {
    /// The CAP code, when the spec assigns one.
    pub fn cap_code(&self) -> Option<CapCode> {
        Some(match self {
            RpcError::ScopeViolation => CapCode::ScopeViolation,
            RpcError::PathNotFound => CapCode::PathNotFound,
            RpcError::Io(_) => CapCode::IoError,
            RpcError::TerminalUnavailable(_) | RpcError::Denied(_) => CapCode::TerminalUnavailable,
            RpcError::TerminalKilled => CapCode::TerminalKilled,
            RpcError::Unsupported(_) => CapCode::UnsupportedCapability,
            RpcError::InvalidParams(_) | RpcError::MethodNotFound(_) | RpcError::Declined(_) => {
                return None;
            }
        })
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        match self {
            RpcError::MethodNotFound(_) => METHOD_NOT_FOUND,
            RpcError::InvalidParams(_) => INVALID_PARAMS,
            RpcError::Declined(_) => REQUEST_CANCELLED,
            other => other.cap_code().map_or(INVALID_PARAMS, CapCode::number),
        }
    }

    /// `data` of the JSON-RPC error: the CAP symbol.
    pub fn data(&self) -> Value {
        match self.cap_code() {
            Some(c) => json!({ "cap_code": c.symbol() }),
            None => Value::Null,
        }
    }

    /// Map an I/O error met *inside* scope.
    pub fn from_io(e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            RpcError::PathNotFound
        } else {
            RpcError::Io(e.to_string())
        }
    }
}
