//! The shipped Codex manifest for the binding asked for: as it is (`codex
//! app-server`, which the suite's pinned Codex has) or with its app-server fast path
//! taken out (`codex exec --json`, what a Codex without `app-server` gets). Shared
//! with the codex bench (self-contained: it includes this file).

/// Which binding of the shipped Codex manifest a session takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    AppServer,
    Exec,
}

/// The shipped Codex manifest, for `via`.
pub(crate) fn manifest(via: Via) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agents/codex.toml");
    let shipped = std::fs::read_to_string(path).expect("shipped codex manifest");
    match via {
        Via::AppServer => shipped,
        Via::Exec => {
            let line = "x-codex_app_server = [\"codex\", \"app-server\"]";
            assert!(
                shipped.contains(line),
                "the shipped manifest declares {line}"
            );
            shipped.replace(line, "x-codex_app_server = false")
        }
    }
}
