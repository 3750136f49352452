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
    Diff,
    PrLink,
    TestResult,
    Commit,
    PlanDoc,
    Transcript,
}

/// A row of [`CODING_ARTIFACTS`]: short name, MIME type, whether JSON, section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactType {
    pub artifact: CodingArtifact,
    pub short: &'static str,
    pub mime: &'static str,
    pub json: bool,
    pub section: &'static str,
}

pub const MIME_DIFF: &str = "application/vnd.cap.coding.diff.v1+text";
pub const MIME_PR_LINK: &str = "application/vnd.cap.coding.pr_link.v1+json";
pub const MIME_TEST_RESULT: &str = "application/vnd.cap.coding.test_result.v1+json";
pub const MIME_COMMIT: &str = "application/vnd.cap.coding.commit.v1+json";
pub const MIME_PLAN_DOC: &str = "application/vnd.cap.coding.plan_doc.v1+json";
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
    pub const ALL: [CodingArtifact; 6] = [
        CodingArtifact::Diff,
        CodingArtifact::PrLink,
        CodingArtifact::TestResult,
        CodingArtifact::Commit,
        CodingArtifact::PlanDoc,
        CodingArtifact::Transcript,
    ];

    pub fn row(self) -> &'static ArtifactType {
        &CODING_ARTIFACTS[self as usize]
    }

    pub fn mime(self) -> &'static str {
        self.row().mime
    }

    /// The short name, e.g. `pr_link`.
    pub fn short_name(self) -> &'static str {
        self.row().short
    }

    pub fn from_mime(mime: &str) -> Option<Self> {
        CODING_ARTIFACTS
            .iter()
            .find(|r| r.mime == mime)
            .map(|r| r.artifact)
    }

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
        Github = "github",
        Gitlab = "gitlab",
        Bitbucket = "bitbucket",
        Gitea = "gitea",
        Other = "other",
    }
}

vocab! {
    /// `pr_link.state` (§6.2).
    pub enum PrState {
        Open = "open",
        Merged = "merged",
        Closed = "closed",
        Draft = "draft",
    }
}

/// `pr_link` (§6.2): a pull/merge request the session opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrLink {
    pub provider: PrProvider,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub owner: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub repo: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub number: Nullable<u64>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub title: Nullable<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PrState>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub created_at: Nullable<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `test_result` (§6.3): one test run; `output` is truncated to 64 KB by producers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub framework: Nullable<String>,
    pub passed: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub skipped: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub suites: Nullable<Vec<TestSuite>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One suite of a [`TestResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSuite {
    pub name: String,
    pub passed: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub skipped: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `commit` (§6.4): a commit the session made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub sha: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub author: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub committer: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub committed_at: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub files_changed: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub insertions: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub deletions: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub parents: Nullable<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `plan_doc` (§6.5): the core plan schema, archived as a document.
pub type PlanDoc = super::agent_events::Plan;

/// `transcript` (§6.6): the full core event log of a session, for audit/replay.
/// `events` decode through the validating decoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub session_id: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub agent: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub model: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub started_at: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub ended_at: Nullable<String>,
    pub events: Vec<CapEvent>,
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
