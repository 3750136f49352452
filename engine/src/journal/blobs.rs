//! Content-addressed files beside the journal: `blobs/<hex>` holds the bytes whose
//! SHA-256 is `<hex>`, and a record names it `"sha256:<hex>"`. The journal keeps a
//! large prompt this way (a prompt sent ten times is one file). A blob is written to
//! `<hex>.tmp` and, at the journal's next sync, synced and renamed into place before
//! the journal itself is synced: a record on disk never names a blob that is not.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The blobs' directory, beside the journal.
pub(crate) const BLOBS_DIR: &str = "blobs";
const SCHEME: &str = "sha256:";

/// The reference of `bytes`: `sha256:<hex>`.
pub(crate) fn reference(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = String::with_capacity(SCHEME.len() + 64);
    out.push_str(SCHEME);
    for b in digest.as_ref() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The file a reference names under `dir` (the journal's directory), if it is one.
#[cfg(test)]
pub(crate) fn path_of(dir: &Path, reference: &str) -> Option<PathBuf> {
    let hex = reference.strip_prefix(SCHEME)?;
    let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| dir.join(BLOBS_DIR).join(hex))
}

/// Read the blob `reference` names under `dir` (the journal's directory), checked
/// against its digest.
#[cfg(test)]
pub(crate) fn read(dir: &Path, reference: &str) -> io::Result<Vec<u8>> {
    let path = path_of(dir, reference).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a blob reference: {reference}"),
        )
    })?;
    let bytes = std::fs::read(&path)?;
    if self::reference(&bytes) != reference {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: its content does not match its name", path.display()),
        ));
    }
    Ok(bytes)
}

/// The journal's blob store: what it wrote since its last sync.
pub(super) struct Blobs {
    dir: PathBuf,
    /// Written, not yet synced and renamed: (the `.tmp` file, its final path).
    pending: Vec<(PathBuf, PathBuf)>,
}

impl Blobs {
    /// The store beside `journal`.
    pub(super) fn beside(journal: &Path) -> Blobs {
        let dir = journal.parent().unwrap_or(Path::new(".")).join(BLOBS_DIR);
        Blobs {
            dir,
            pending: Vec::new(),
        }
    }

    /// Keep `bytes`; their reference. Kept once: a blob already there (or waiting for
    /// the sync) is not written again.
    pub(super) fn store(&mut self, bytes: &[u8]) -> io::Result<String> {
        let reference = reference(bytes);
        let hex = &reference[SCHEME.len()..];
        let path = self.dir.join(hex);
        if path.exists() || self.pending.iter().any(|(_, p)| *p == path) {
            return Ok(reference);
        }
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!("{hex}.tmp"));
        std::fs::File::create(&tmp)?.write_all(bytes)?;
        self.pending.push((tmp, path));
        Ok(reference)
    }

    /// Sync what was stored since the last [`Blobs::synced`] and move it into place
    /// (then the directory): blocking, run off the async threads. Tried again after a
    /// failure, it takes up where it stopped (a blob already moved is skipped).
    pub(super) fn pending_job(&self) -> Option<impl FnOnce() -> io::Result<()> + Send + 'static> {
        if self.pending.is_empty() {
            return None;
        }
        let pending = self.pending.clone();
        let dir = self.dir.clone();
        Some(move || {
            for (tmp, path) in &pending {
                if !tmp.exists() && path.exists() {
                    continue;
                }
                std::fs::File::open(tmp)?.sync_all()?;
                std::fs::rename(tmp, path)?;
            }
            std::fs::File::open(&dir)?.sync_all()
        })
    }

    /// The job of [`Blobs::pending_job`] succeeded: nothing is pending.
    pub(super) fn synced(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_named_by_its_digest_written_once_and_read_back_checked() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        let mut blobs = Blobs::beside(&journal);
        let a = blobs.store(b"hello").unwrap();
        assert_eq!(
            a,
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(blobs.store(b"hello").unwrap(), a);
        assert_eq!(blobs.pending.len(), 1);
        // Not in place before the sync: a record naming it is not synced either.
        assert!(read(dir.path(), &a).is_err());
        (blobs.pending_job().unwrap())().unwrap();
        // Run again (as after a failure half-way), it skips what is in place.
        (blobs.pending_job().unwrap())().unwrap();
        blobs.synced();
        assert!(blobs.pending_job().is_none());
        assert_eq!(read(dir.path(), &a).unwrap(), b"hello");
        std::fs::write(path_of(dir.path(), &a).unwrap(), b"changed").unwrap();
        assert!(
            read(dir.path(), &a).is_err(),
            "a blob whose content changed is refused"
        );
        assert!(path_of(dir.path(), "sha256:../../etc/passwd").is_none());
    }
}
