//! CAP core protocol types (spec §7, §14): events, directions and required fields,
//! the error registry and `SessionConfig`. Knows no actor and no binding.

pub mod errors;

pub use errors::{CapCode, ErrorKind};
