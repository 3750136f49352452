//! `[fast_path]` (spec §5.1, §6): each entry is `false`/absent (unsupported) or its
//! typed value, never a raw TOML value. A binding declared `true` without the address
//! it needs is skipped with a warning, never an invalid manifest.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::build::section;
use super::error::ManifestError;
use super::reader::{Reader, join};
use super::types::{AcpFastPath, AddressFastPath, ArgvFastPath, FastPath};

/// `x-stream_json_traceparent` (a capfleet extension): the agent reads a W3C
/// `traceparent` on each stream-json `user` frame (capfleet's own `speak` does).
const TRACEPARENT_KEY: &str = "x-stream_json_traceparent";

pub(crate) fn read_fast_path(r: &mut Reader, root: &DeTable<'_>, empty: &DeTable<'_>) -> FastPath {
    let (ft, _) = section(r, root, "", "fast_path", empty);
    r.unknown_keys(
        ft,
        "fast_path",
        &[
            "stream_json",
            "grpc",
            "acp_stdio",
            "a2a_serve_at",
            "x-codex_exec",
            "x-codex_app_server",
            TRACEPARENT_KEY,
        ],
    );
    let mut fp = FastPath::default();
    for (key, slot) in [
        ("stream_json", &mut fp.stream_json),
        ("x-codex_exec", &mut fp.codex_exec),
        ("x-codex_app_server", &mut fp.codex_app_server),
    ] {
        if let Some(v) = ft.get(key)
            && let Some(a) = argv_or_false(r, &join("fast_path", key), v)
        {
            *slot = ArgvFastPath::Argv(a);
        }
    }
    for (key, slot) in [
        ("grpc", &mut fp.grpc),
        ("a2a_serve_at", &mut fp.a2a_serve_at),
    ] {
        let Some(v) = ft.get(key) else { continue };
        let dotted = join("fast_path", key);
        match v.get_ref() {
            DeValue::Boolean(false) => {}
            DeValue::String(s) if !s.is_empty() => *slot = AddressFastPath::Address(s.to_string()),
            DeValue::String(_) => r.invalid(
                &dotted,
                Some(v.span()),
                "address must not be empty (use false)",
            ),
            // Declared without the address this build needs: the binding is skipped
            // and selection falls through to the next one (spec §6), with a warning.
            DeValue::Boolean(true) => r.note(
                &dotted,
                Some(v.span()),
                "true without an address: this binding is skipped (give its address as a \
                 string to use it)",
            ),
            _ => type_error(r, &dotted, v, "false or an address string"),
        }
    }
    fp.stream_json_traceparent = r.boolean(ft, "fast_path", TRACEPARENT_KEY).unwrap_or(false);
    if fp.stream_json_traceparent && !fp.stream_json.is_supported() {
        let span = ft.get(TRACEPARENT_KEY).map(|v| v.span());
        r.invalid(
            &join("fast_path", TRACEPARENT_KEY),
            span,
            "true needs a stream_json argv (the agent reads it on stream-json user frames); \
             remove it or give fast_path.stream_json",
        );
    }
    if let Some(v) = ft.get("acp_stdio") {
        match v.get_ref() {
            DeValue::Boolean(true) => fp.acp_stdio = AcpFastPath::StartupCommand,
            _ => {
                if let Some(a) = argv_or_false(r, "fast_path.acp_stdio", v) {
                    fp.acp_stdio = AcpFastPath::Argv(a);
                }
            }
        }
    }
    fp
}

fn type_error(r: &mut Reader, key: &str, v: &Spanned<DeValue<'_>>, expected: &'static str) {
    let at = r.at(key, Some(v.span()));
    r.push(ManifestError::WrongType {
        at,
        expected,
        found: v.get_ref().type_str(),
    });
}

/// `false` → None; a non-empty argv → Some.
fn argv_or_false(r: &mut Reader, key: &str, v: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
    match v.get_ref() {
        DeValue::Boolean(false) => None,
        DeValue::Array(a) if a.is_empty() => {
            r.invalid(key, Some(v.span()), "argv must not be empty (use false)");
            None
        }
        DeValue::Array(_) => r.string_array(key, v),
        _ => {
            type_error(r, key, v, "false or an argv array");
            None
        }
    }
}
