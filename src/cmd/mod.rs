//! One module per CLI verb.

pub mod manifest;
pub mod resolve;
