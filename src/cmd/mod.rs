//! One module per CLI verb.

pub mod chat;
pub mod log;
pub mod manifest;
pub mod resolve;
pub mod run;
pub mod worktree;
