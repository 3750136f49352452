//! Coding profile artifact types (coding §6): MIME types as data and typed
//! payloads for `pr_link`, `test_result`, `commit`, `plan_doc` and `transcript`.
//!
//! Payloads travel in `cap.artifact` (inline `content` or behind `uri`); read them
//! with [`super::Artifact::json_content`]. Like events, payload structs keep
//! unknown fields in `extra` and explicit nulls via [`Nullable`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::event::CapEvent;
use super::nullable::Nullable;
use super::vocab::vocab;

/// One coding artifact type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodingArtifact {
    /// A unified diff (§6.1).
    Diff,
    /// A pull or merge request (§6.2).
    PrLink,
    /// A test run's result (§6.3).
    TestResult,
    /// A commit (§6.4).
    Commit,
    /// A plan archived as a document (§6.5).
    PlanDoc,
    /// A session's full event log (§6.6).
    Transcript,
}

/// A row of [`CODING_ARTIFACTS`]: short name, MIME type, whether JSON, section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactType {
    /// Which artifact type this row describes.
    pub artifact: CodingArtifact,
    /// The short name used in manifests, e.g. `pr_link`.
    pub short: &'static str,
    /// The MIME type of a `cap.artifact` carrying it.
    pub mime: &'static str,
    /// Whether the payload is JSON (else text).
    pub json: bool,
    /// The coding-profile section that defines it.
    pub section: &'static str,
}

/// MIME type of a `diff` artifact.
pub const MIME_DIFF: &str = "application/vnd.cap.coding.diff.v1+text";
/// MIME type of a `pr_link` artifact.
pub const MIME_PR_LINK: &str = "application/vnd.cap.coding.pr_link.v1+json";
/// MIME type of a `test_result` artifact.
pub const MIME_TEST_RESULT: &str = "application/vnd.cap.coding.test_result.v1+json";
/// MIME type of a `commit` artifact.
pub const MIME_COMMIT: &str = "application/vnd.cap.coding.commit.v1+json";
/// MIME type of a `plan_doc` artifact.
pub const MIME_PLAN_DOC: &str = "application/vnd.cap.coding.plan_doc.v1+json";
/// MIME type of a `transcript` artifact.
pub const MIME_TRANSCRIPT: &str = "application/vnd.cap.coding.transcript.v1+json";

/// The artifact types, ordered like [`CodingArtifact`].
pub const CODING_ARTIFACTS: [ArtifactType; 6] = [
    art(CodingArtifact::Diff, "diff", MIME_DIFF, false, "§6.1"),
    art(
        CodingArtifact::PrLink,
        "pr_link",
        MIME_PR_LINK,
        true,
        "§6.2",
    ),
    art(
        CodingArtifact::TestResult,
        "test_result",
        MIME_TEST_RESULT,
        true,
        "§6.3",
    ),
    art(CodingArtifact::Commit, "commit", MIME_COMMIT, true, "§6.4"),
    art(
        CodingArtifact::PlanDoc,
        "plan_doc",
        MIME_PLAN_DOC,
        true,
        "§6.5",
    ),
    art(
        CodingArtifact::Transcript,
        "transcript",
        MIME_TRANSCRIPT,
        true,
        "§6.6",
    ),
];

const fn art(
    artifact: CodingArtifact,
    short: &'static str,
    mime: &'static str,
    json: bool,
    section: &'static str,
) -> ArtifactType {
    ArtifactType {
        artifact,
        short,
        mime,
        json,
        section,
    }
}

impl CodingArtifact {
    /// Every artifact type, in [`CODING_ARTIFACTS`] order.
    pub const ALL: [CodingArtifact; 6] = [
        CodingArtifact::Diff,
        CodingArtifact::PrLink,
        CodingArtifact::TestResult,
        CodingArtifact::Commit,
        CodingArtifact::PlanDoc,
        CodingArtifact::Transcript,
    ];

    /// This type's row of [`CODING_ARTIFACTS`].
    pub fn row(self) -> &'static ArtifactType {
        &CODING_ARTIFACTS[self as usize]
    }

    /// The MIME type, e.g. `application/vnd.cap.coding.diff.v1+text`.
    pub fn mime(self) -> &'static str {
        self.row().mime
    }

    /// The short name, e.g. `pr_link`.
    pub fn short_name(self) -> &'static str {
        self.row().short
    }

    /// The artifact type with this MIME type, if it is a coding one.
    pub fn from_mime(mime: &str) -> Option<Self> {
        CODING_ARTIFACTS
            .iter()
            .find(|r| r.mime == mime)
            .map(|r| r.artifact)
    }

    /// The artifact type with this short name, e.g. `pr_link`.
    pub fn from_short_name(short: &str) -> Option<Self> {
        CODING_ARTIFACTS
            .iter()
            .find(|r| r.short == short)
            .map(|r| r.artifact)
    }
}

vocab! {
    /// `pr_link.provider` (§6.2).
    pub enum PrProvider {
        /// GitHub.
        Github = "github",
        /// GitLab.
        Gitlab = "gitlab",
        /// Bitbucket.
        Bitbucket = "bitbucket",
        /// Gitea or Forgejo.
        Gitea = "gitea",
        /// Any other forge.
        Other = "other",
    }
}

vocab! {
    /// `pr_link.state` (§6.2).
    pub enum PrState {
        /// Open for review.
        Open = "open",
        /// Merged.
        Merged = "merged",
        /// Closed without merging.
        Closed = "closed",
        /// A draft, not yet ready for review.
        Draft = "draft",
    }
}

/// `pr_link` (§6.2): a pull/merge request the session opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrLink {
    /// The forge that hosts the request.
    pub provider: PrProvider,
    /// The repository's owner (user or organisation).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub owner: Nullable<String>,
    /// The repository's name.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub repo: Nullable<String>,
    /// The request's number on the forge.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub number: Nullable<u64>,
    /// Where the request can be opened.
    pub url: String,
    /// The request's title.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub title: Nullable<String>,
    /// Open, merged, closed or draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PrState>,
    /// When the request was opened (RFC 3339).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub created_at: Nullable<String>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `test_result` (§6.3): one test run; `output` is truncated to 64 KB by producers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test framework, e.g. `cargo`, `pytest`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub framework: Nullable<String>,
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests skipped or ignored.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub skipped: Nullable<u64>,
    /// Wall time of the run, in milliseconds.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    /// The run's output, at most 64 KB.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output: Nullable<String>,
    /// Per-suite counts, when the framework reports them.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub suites: Nullable<Vec<TestSuite>>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One suite of a [`TestResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSuite {
    /// The suite's name.
    pub name: String,
    /// Tests of the suite that passed.
    pub passed: u64,
    /// Tests of the suite that failed.
    pub failed: u64,
    /// Tests of the suite skipped or ignored.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub skipped: Nullable<u64>,
    /// Wall time of the suite, in milliseconds.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `commit` (§6.4): a commit the session made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The commit's full hash.
    pub sha: String,
    /// The commit message.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message: Nullable<String>,
    /// The author, as `Name <email>`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub author: Nullable<String>,
    /// The committer, as `Name <email>`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub committer: Nullable<String>,
    /// When it was committed (RFC 3339).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub committed_at: Nullable<String>,
    /// Number of files the commit touched.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub files_changed: Nullable<u64>,
    /// Lines added.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub insertions: Nullable<u64>,
    /// Lines removed.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub deletions: Nullable<u64>,
    /// Hashes of the parent commits.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub parents: Nullable<Vec<String>>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `plan_doc` (§6.5): the core plan schema, archived as a document.
pub type PlanDoc = super::agent_events::Plan;

/// `transcript` (§6.6): the full core event log of a session, for audit/replay.
/// `events` decode through the validating decoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// The session the log is of.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub session_id: Nullable<String>,
    /// The agent that ran the session.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub agent: Nullable<String>,
    /// The model the agent used.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub model: Nullable<String>,
    /// When the session started (RFC 3339).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub started_at: Nullable<String>,
    /// When the session ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub ended_at: Nullable<String>,
    /// Every core event of the session, in order.
    pub events: Vec<CapEvent>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_table_both_ways() {
        for (i, r) in CODING_ARTIFACTS.iter().enumerate() {
            assert_eq!(r.artifact as usize, i);
            assert_eq!(CodingArtifact::from_mime(r.mime), Some(r.artifact));
            assert_eq!(CodingArtifact::from_short_name(r.short), Some(r.artifact));
            assert_eq!(r.artifact.mime(), r.mime);
            assert_eq!(r.artifact.short_name(), r.short);
            assert_eq!(r.json, r.mime.ends_with("+json"));
            assert!(r.mime.contains(&format!(".{}.", r.short)));
        }
        assert_eq!(CodingArtifact::ALL.len(), CODING_ARTIFACTS.len());
        assert_eq!(CodingArtifact::from_mime("text/plain"), None);
    }
}
