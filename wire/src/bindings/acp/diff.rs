//! ACP `diff` tool-call content (a file's old and new text) as the coding profile's
//! `diff` artifact (§6.1): a unified diff with `diff --git` headers, paths relative
//! to the filesystem root as git writes them.

use std::path::Path;

use agent_client_protocol::v1::schema::Diff;
use serde_json::Value;

use crate::protocol::coding::CodingArtifact;
use crate::protocol::{CapEvent, Nullable};

/// The `cap.artifact` of one diff of tool call `call_id` (`n`: its index there).
pub(crate) fn diff_artifact(call_id: &str, n: usize, d: &Diff) -> CapEvent {
    let patch = unified(&d.path, d.old_text.as_deref(), &d.new_text);
    let name = d
        .path
        .file_name()
        .map_or_else(|| "file".to_owned(), |f| f.to_string_lossy().into_owned());
    let mut event = CapEvent::artifact(
        format!("{call_id}-diff-{n}"),
        CodingArtifact::Diff.mime(),
        Some(format!("{name}.patch")),
        Value::String(patch.clone()),
    );
    if let CapEvent::Artifact(a) = &mut event {
        a.size = Nullable::Value(patch.len() as u64);
    }
    event
}

/// `old` (None: a new file) to `new` at `path`, as a unified diff.
pub(crate) fn unified(path: &Path, old: Option<&str>, new: &str) -> String {
    let rel = Path::new(path.to_str().map_or("file", |p| p.trim_start_matches('/')));
    let old_path = old.map(|_| rel);
    let made = git2::Patch::from_buffers(
        old.unwrap_or("").as_bytes(),
        old_path,
        new.as_bytes(),
        Some(rel),
        None,
    )
    .and_then(|mut p| p.to_buf());
    match made {
        Ok(buf) => String::from_utf8_lossy(&buf).into_owned(),
        // libgit2 refused the buffers (never seen): still a readable diff.
        Err(e) => {
            tracing::warn!("diff of {}: {e}", path.display());
            let mut s = format!("--- a/{0}\n+++ b/{0}\n", rel.display());
            for l in new.lines() {
                s.push('+');
                s.push_str(l);
                s.push('\n');
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_files() {
        let new = unified(Path::new("/w/src/a.rs"), None, "fn a() {}\n");
        assert!(
            new.starts_with("diff --git a/w/src/a.rs b/w/src/a.rs\n"),
            "{new}"
        );
        assert!(new.contains("+fn a() {}\n"));
        let changed = unified(Path::new("/w/x.txt"), Some("one\ntwo\n"), "one\n2\n");
        assert!(changed.contains("-two\n+2\n"), "{changed}");
        assert!(
            changed.contains("--- a/w/x.txt\n+++ b/w/x.txt\n"),
            "{changed}"
        );
    }
}
