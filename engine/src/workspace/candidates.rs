//! What a race or collect picker sees of each candidate's work: its diff against the
//! base, taken when the candidate's turn has ended, stored as
//! `artifacts/<session>/candidate.patch` and shown inline up to [`INLINE_MAX`].

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::artifacts::{ArtifactStore, artifact_event};
use super::diff::{INLINE_MAX, diff};
use super::record::Workspace;
use crate::protocol::CapEvent;
use crate::protocol::coding::CodingArtifact;

/// The candidates' workspaces, by session name.
pub(crate) struct Candidates {
    fleet: String,
    run_id: String,
    by_session: HashMap<String, Workspace>,
    store: Arc<ArtifactStore>,
}

/// One candidate's work, for the picker.
pub(crate) struct CandidateDiff {
    /// A Markdown section with the diff in a fenced block.
    pub text: String,
    /// The `cap.artifact` (diff) of it.
    pub event: CapEvent,
}

impl Candidates {
    pub(crate) fn new(
        fleet: &str,
        run_id: &str,
        workspaces: &[Workspace],
        store: Arc<ArtifactStore>,
    ) -> Candidates {
        Candidates {
            fleet: fleet.to_owned(),
            run_id: run_id.to_owned(),
            by_session: workspaces
                .iter()
                .map(|w| (w.session.clone(), w.clone()))
                .collect(),
            store,
        }
    }

    /// The diff of `session`'s workspace now; `None` when it has none.
    pub(crate) async fn diff(&self, session: &str) -> Option<CandidateDiff> {
        let ws = self.by_session.get(session)?.clone();
        let store = self.store.clone();
        let made = tokio::task::spawn_blocking(move || {
            let path = store.session_dir(&ws.session).ok()?.join("candidate.patch");
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).ok()?);
            let summary = diff(&ws, &mut out, &mut |_, _, _| {}).ok()?;
            Some((ws, summary, path))
        })
        .await
        .ok()
        .flatten();
        let Some((ws, summary, path)) = made else {
            tracing::warn!(%session, "cannot diff the candidate's workspace");
            return None;
        };
        let place = match ws.branch() {
            Some(b) => format!("branch {b}"),
            None => format!("directory {}", ws.path.display()),
        };
        let mut text = format!(
            "### Changes of {session} ({place}: {} files, +{} -{})\n",
            summary.files.len(),
            summary.insertions,
            summary.deletions
        );
        if summary.files.is_empty() {
            text.push_str("(no changes)\n");
        } else {
            text.push_str("```diff\n");
            text.push_str(&summary.head);
            if !summary.head.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("```\n");
            if summary.truncated {
                text.push_str(&format!(
                    "(the first {} KiB of {} bytes; all of it: capfleet diff {} {session})\n",
                    INLINE_MAX / 1024,
                    summary.bytes,
                    self.run_id
                ));
            }
        }
        let inline = (!summary.truncated).then(|| Value::String(summary.head.clone()));
        let event = artifact_event(
            &format!("candidate-{session}"),
            CodingArtifact::Diff.mime(),
            &format!("{session}.candidate.patch"),
            &path,
            summary.bytes,
            inline,
            &capfleet_wire::events::urn(&self.fleet, session),
        );
        Some(CandidateDiff { text, event })
    }
}
