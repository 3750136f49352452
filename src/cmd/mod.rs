//! One module per CLI verb.

pub mod chat;
pub mod manifest;
pub mod resolve;
