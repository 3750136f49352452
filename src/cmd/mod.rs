//! One module per CLI verb.

pub(crate) mod acp;
pub(crate) mod chaos;
pub(crate) mod chat;
pub(crate) mod log;
pub(crate) mod manifest;
pub(crate) mod one_fleet;
pub(crate) mod one_session;
pub(crate) mod resolve;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod serve;
pub(crate) mod speak;
pub(crate) mod submit;
pub(crate) mod unattended;
pub(crate) mod worker;
pub(crate) mod workers;
pub(crate) mod worktree;
