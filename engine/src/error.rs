//! The engine's entry-point errors: what the application gets when the tree, a
//! session or the router cannot be started or reached. Each names what failed and,
//! where one is known, the fix; none is a bare `String`.

use std::path::PathBuf;

use ractor::{ActorProcessingErr, SpawnErr};

/// Why the supervision tree (or one of its parts) could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The journal file could not be opened (a missing directory that cannot be
    /// made, no permission, a read-only or full disk).
    #[error("cannot open the journal {}: {source}; {}", path.display(), fix(source))]
    Journal {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An actor of the tree failed while starting.
    #[error("cannot start the {what}: {reason}")]
    Start { what: &'static str, reason: String },
    /// An actor of the tree did not answer (it stopped or crashed meanwhile).
    #[error("the {what} is not answering: {reason}")]
    Unreachable { what: &'static str, reason: String },
    /// A child of the root died; the root hands it out no more.
    #[error(transparent)]
    Died(#[from] crate::death::ChildDeath),
    /// A session was asked for while the fleet shuts down.
    #[error("{urn}: not started, the fleet is shutting down")]
    ShuttingDown { urn: String },
    /// A session asked for a sandbox it cannot have: the run is refused before
    /// anything spawns.
    #[error("{urn}: sandbox = \"workspace\" cannot be had: {reason}; nothing was started")]
    Sandbox { urn: String, reason: String },
    /// A session actor failed to start.
    #[error("{urn}: cannot start the session: {reason}")]
    Session { urn: String, reason: String },
}

impl TreeError {
    /// The error a failed spawn of `what` stands for: a journal that could not be
    /// opened is named as such however deep in the tree it was started; anything
    /// else says what failed, without ractor's "panicked during startup" framing.
    pub fn spawn(what: &'static str, err: SpawnErr) -> TreeError {
        match err {
            SpawnErr::StartupFailed(inner) => TreeError::startup(what, inner),
            other => TreeError::Start {
                what,
                reason: other.to_string(),
            },
        }
    }

    fn startup(what: &'static str, inner: ActorProcessingErr) -> TreeError {
        match inner.downcast::<JournalOpen>() {
            Ok(open) => TreeError::Journal {
                path: open.path,
                source: open.source,
            },
            Err(inner) => match inner.downcast::<SpawnErr>() {
                // A child's startup failure, reported through its parent's.
                Ok(child) => TreeError::spawn(what, *child),
                Err(inner) => TreeError::Start {
                    what,
                    reason: inner.to_string(),
                },
            },
        }
    }

    /// An actor of the tree that could not be reached.
    pub fn unreachable(what: &'static str, err: impl std::fmt::Display) -> TreeError {
        TreeError::Unreachable {
            what,
            reason: err.to_string(),
        }
    }
}

/// How to get past an I/O error on a file capfleet must write.
pub(crate) fn fix(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind::*;
    match e.kind() {
        PermissionDenied | ReadOnlyFilesystem => {
            "make its directory writable, or run from (or point --journal at) a writable one"
        }
        StorageFull | QuotaExceeded => "free space on that disk, or write the journal elsewhere",
        NotFound | NotADirectory => "create its directory, or choose an existing one",
        _ => "check the disk and the path, or write the journal elsewhere",
    }
}

/// The journal's startup failure, carried up through the tree to
/// [`TreeError::Journal`].
#[derive(Debug, thiserror::Error)]
#[error("cannot open the journal {}: {source}", path.display())]
pub(crate) struct JournalOpen {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_failure_deep_in_the_tree_is_named_as_such() {
        let open = JournalOpen {
            path: PathBuf::from("/ro/journal.jsonl"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        // The journal fails its startup; the root fails its own with that error.
        let journal = SpawnErr::StartupFailed(Box::new(open));
        let root = SpawnErr::StartupFailed(Box::new(journal));
        let err = TreeError::spawn("supervision tree", root);
        assert!(
            matches!(&err, TreeError::Journal { path, .. } if path.ends_with("journal.jsonl")),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("cannot open the journal /ro/journal.jsonl: "),
            "{text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }

    #[test]
    fn other_startup_failures_say_what_failed_without_panic_framing() {
        let err = TreeError::spawn(
            "router",
            SpawnErr::StartupFailed("no sessions to route".into()),
        );
        assert_eq!(
            err.to_string(),
            "cannot start the router: no sessions to route"
        );
    }
}
