//! `[limits]` (a capfleet extension, not in the core spec): the bounds a driver puts
//! on what the agent may send, the same on every binding.

use toml::de::DeTable;

use super::build::section;
use super::reader::Reader;
use super::types::{DEFAULT_MAX_LINE_BYTES, Limits};

pub(crate) fn read_limits(r: &mut Reader, root: &DeTable<'_>, empty: &DeTable<'_>) -> Limits {
    let (lt, _) = section(r, root, "", "limits", empty);
    r.unknown_keys(lt, "limits", &["max_line_bytes"]);
    let max_line_bytes = match r.uint::<u64>(lt, "limits", "max_line_bytes") {
        Some(0) => {
            r.invalid(
                "limits.max_line_bytes",
                Reader::span_of(lt, "max_line_bytes"),
                "must be at least 1",
            );
            DEFAULT_MAX_LINE_BYTES
        }
        Some(n) => n,
        None => DEFAULT_MAX_LINE_BYTES,
    };
    Limits { max_line_bytes }
}
