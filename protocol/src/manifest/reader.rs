//! The shared TOML reader, with manifest errors as its findings.

pub(crate) use crate::tomldoc::{Wire, join};

pub(crate) type Reader = crate::tomldoc::Reader<super::error::ManifestError>;
