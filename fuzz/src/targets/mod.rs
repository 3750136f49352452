//! The decoders of untrusted input, one [`Target`] each, fed as the engine feeds them.

use std::path::{Path, PathBuf};

mod a2a;
mod agents;
mod app;
mod documents;
mod terminal;

/// What a target's inputs look like, for the strategy that writes them from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON value per line (NDJSON).
    JsonLines,
    /// Server-sent events whose data are JSON.
    Sse,
    /// One JSON document.
    Json,
    /// A TOML document.
    Toml,
    /// A terminal's output: text, escape sequences, line ends.
    Terminal,
}

/// One decoder under test.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its name: the test's, the regressions folder's, the bench's row.
    pub name: &'static str,
    /// What it reads, and from whom.
    pub reads: &'static str,
    pub framing: Framing,
    /// Files and folders of real inputs, relative to the workspace root; a file over
    /// [`SEED_CHUNK`] is taken in pieces of about that size, cut at line ends.
    pub seeds: &'static [&'static str],
    /// The words of its format: keys, type names, values that switch code paths.
    pub dict: &'static [&'static str],
    /// Decodes one input as the engine would, panicking on a broken property.
    pub run: fn(&[u8]),
    /// Heap one input may hold at once: `fixed` bytes plus `per_byte` per input byte.
    pub memory: Memory,
}

/// A heap bound, linear in the input.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub fixed: usize,
    pub per_byte: usize,
}

impl Memory {
    pub fn bound(&self, input_len: usize) -> usize {
        self.fixed + self.per_byte * input_len
    }
}

/// Seed files are taken in pieces of about this size: a mutation of a small piece is
/// as deep a test as one of the whole file, and far quicker.
pub const SEED_CHUNK: usize = 16 << 10;

/// The workspace root (the seeds' paths are relative to it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the fuzz crate sits in the workspace")
        .to_path_buf()
}

impl Target {
    /// The seeds' bytes, in a stable order, in pieces of about [`SEED_CHUNK`].
    pub fn seeds(&self) -> Vec<Vec<u8>> {
        self.seeds_in(SEED_CHUNK)
    }

    /// The seeds' bytes, in a stable order, in pieces of about `piece` bytes.
    pub fn seeds_in(&self, piece: usize) -> Vec<Vec<u8>> {
        let mut files = Vec::new();
        for rel in self.seeds {
            let path = workspace().join(rel);
            if path.is_dir() {
                let mut inside: Vec<PathBuf> = std::fs::read_dir(&path)
                    .unwrap_or_else(|e| panic!("seed folder {}: {e}", path.display()))
                    .map(|e| e.expect("seed folder entry").path())
                    .filter(|p| p.is_file())
                    .collect();
                inside.sort();
                files.extend(inside);
            } else {
                files.push(path);
            }
        }
        files
            .iter()
            .flat_map(|f| {
                let bytes =
                    std::fs::read(f).unwrap_or_else(|e| panic!("seed file {}: {e}", f.display()));
                chunks(bytes, piece)
            })
            .collect()
    }
}

/// `bytes` in pieces of about `piece` bytes, cut after a line end where there is one.
fn chunks(mut bytes: Vec<u8>, piece: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while bytes.len() > piece {
        let cut = bytes[piece..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(piece, |p| piece + p + 1);
        let rest = bytes.split_off(cut);
        out.push(bytes);
        bytes = rest;
    }
    out.push(bytes);
    out
}

/// Every target.
pub const ALL: &[Target] = &[
    agents::STREAM_JSON,
    agents::CODEX_EXEC,
    agents::ACP_UPDATE,
    agents::LINES,
    terminal::PTY,
    a2a::SSE,
    a2a::CARD,
    documents::CAP_EVENT,
    documents::MANIFEST,
    documents::SESSION_CONFIG,
    app::FLEET_TOML,
    app::SERVE_BODY,
];

/// The target named `name`.
pub fn by_name(name: &str) -> &'static Target {
    ALL.iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no fuzz target `{name}`"))
}
