//! What `capfleet submit` uploads: the fleet and every file it references, wherever
//! they are on this machine — its sessions' `script`s, manifests given by path
//! (`agent`), nested fleets (`fleet`, with what they reference in turn), an `@file`
//! task, and `--file`s — each under a normalised name, the references rewritten to
//! those names (the rest of the text kept byte for byte, so the server's findings
//! keep their lines). The server takes only plain relative names
//! ([`capfleet_app::submission`]); these are.
//!
//! A name is the file's path from the fleet's directory, each step up spelled `_up`
//! (`../sim/a.toml` is `_up/sim/a.toml`), symlinks resolved. Every fleet, nested ones
//! included, lands at the top of the upload (a nested fleet's path flattened, `/` to
//! `-`), so that each reference it makes is that name as it stands. Two files that
//! would take one name get `-2`, `-3`… before the extension. A session's `cwd` and
//! `[notify].secret_file` name the server's own and stay as written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use capfleet_app::fleet::config::names_manifest;
use capfleet_app::submission::FLEET_FILE;

/// A step up from the fleet's directory in a name.
const UP: &str = "_up";

/// The fleet and its files, ready to go.
#[derive(Debug)]
pub(super) struct Bundle {
    /// The fleet's text, its references rewritten.
    pub fleet: String,
    /// Every file it references, by its name in the upload.
    pub files: BTreeMap<String, String>,
}

/// Why the fleet could not be packed.
#[derive(Debug, thiserror::Error)]
pub(super) enum BundleError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    #[error("{}:{line}: `{key}` names `{value}`: {source}", fleet.display())]
    Reference {
        fleet: PathBuf,
        line: usize,
        key: String,
        value: String,
        source: std::io::Error,
    },
}

/// Pack the fleet at `fleet` (as given) with the `extra` files (relative to its
/// directory).
pub(super) fn pack(fleet: &Path, extra: &[PathBuf]) -> Result<Bundle, BundleError> {
    let top = canonical(fleet)?;
    let dir = top.parent().unwrap_or(Path::new("/")).to_owned();
    let mut packer = Packer {
        dir: dir.clone(),
        names: HashMap::from([(top.clone(), FLEET_FILE.to_owned())]),
        taken: HashSet::from([FLEET_FILE.to_owned()]),
        files: BTreeMap::new(),
    };
    let text = packer.fleet_text(&top, fleet)?;
    for file in extra {
        let path = canonical(&dir.join(file))?;
        packer.file(&path)?;
    }
    Ok(Bundle {
        fleet: text,
        files: packer.files,
    })
}

fn canonical(path: &Path) -> Result<PathBuf, BundleError> {
    std::fs::canonicalize(path).map_err(|source| BundleError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read(path: &Path) -> Result<String, BundleError> {
    std::fs::read_to_string(path).map_err(|source| BundleError::Read {
        path: path.to_owned(),
        source,
    })
}

struct Packer {
    /// The top fleet's directory (canonical): names start here.
    dir: PathBuf,
    /// Each file packed (canonical path) and its name.
    names: HashMap<PathBuf, String>,
    taken: HashSet<String>,
    files: BTreeMap<String, String>,
}

/// One reference in a fleet's text: where its value is, what it names, and what kind
/// of file that is.
struct Reference {
    key: String,
    span: Range<usize>,
    value: String,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `[fleet].task = "@file"`: the value is `@` and the path.
    Task,
    Script,
    Manifest,
    Fleet,
}

impl Packer {
    /// The fleet at `path` (canonical; `shown` as given), its references packed and
    /// rewritten.
    fn fleet_text(&mut self, path: &Path, shown: &Path) -> Result<String, BundleError> {
        let text = read(path)?;
        let doc = DeTable::parse(&text).map_err(|e| BundleError::Toml {
            path: shown.to_owned(),
            message: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("/"));
        let mut edits = Vec::new();
        for r in references(doc.get_ref()) {
            let file = match r.kind {
                Kind::Task => &r.value[1..],
                _ => r.value.as_str(),
            };
            let target =
                std::fs::canonicalize(dir.join(file)).map_err(|source| BundleError::Reference {
                    fleet: shown.to_owned(),
                    line: text[..r.span.start].matches('\n').count() + 1,
                    key: r.key.clone(),
                    value: r.value.clone(),
                    source,
                })?;
            let name = match r.kind {
                Kind::Fleet => self.nested(&target)?,
                _ => self.file(&target)?,
            };
            let value = match r.kind {
                Kind::Task => format!("@{name}"),
                // Still a path to the fleet's reader, not a registry name.
                Kind::Manifest if !names_manifest(&name) => format!("./{name}"),
                _ => name,
            };
            edits.push((r.span, quoted(&value)));
        }
        let mut out = text;
        edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
        for (span, value) in edits {
            out.replace_range(span, &value);
        }
        Ok(out)
    }

    /// A nested fleet: packed (at the top of the upload) with what it references.
    fn nested(&mut self, path: &Path) -> Result<String, BundleError> {
        if let Some(name) = self.names.get(path) {
            return Ok(name.clone());
        }
        let name = self.claim(path, self.wanted(path).replace('/', "-"));
        let text = self.fleet_text(path, path)?;
        self.files.insert(name.clone(), text);
        Ok(name)
    }

    /// Any other file, packed as it is.
    fn file(&mut self, path: &Path) -> Result<String, BundleError> {
        if let Some(name) = self.names.get(path) {
            return Ok(name.clone());
        }
        let text = read(path)?;
        let name = self.claim(path, self.wanted(path));
        self.files.insert(name.clone(), text);
        Ok(name)
    }

    /// `path`'s name: its way from the fleet's directory, steps up as [`UP`].
    fn wanted(&self, path: &Path) -> String {
        let from: Vec<Component> = self.dir.components().collect();
        let to: Vec<Component> = path.components().collect();
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        let ups = std::iter::repeat_n(UP.to_owned(), from.len() - common);
        let rest = to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        ups.chain(rest).collect::<Vec<_>>().join("/")
    }

    /// `wanted`, or the first of `-2`, `-3`… on it that no other file took.
    fn claim(&mut self, path: &Path, wanted: String) -> String {
        let (stem, ext) = match wanted.rfind('.') {
            Some(dot) if dot > wanted.rfind('/').map_or(0, |s| s + 1) => wanted.split_at(dot),
            _ => (wanted.as_str(), ""),
        };
        let name = (1..)
            .map(|n| match n {
                1 => wanted.clone(),
                n => format!("{stem}-{n}{ext}"),
            })
            .find(|n| !self.taken.contains(n))
            .expect("an unbounded range has a free name");
        self.taken.insert(name.clone());
        self.names.insert(path.to_owned(), name.clone());
        name
    }
}

/// The file references in a fleet's document.
fn references(doc: &DeTable<'_>) -> Vec<Reference> {
    let mut out = Vec::new();
    if let Some((task, span)) = doc
        .get("fleet")
        .and_then(table)
        .and_then(|f| f.get("task"))
        .and_then(string)
        && task.starts_with('@')
    {
        out.push(Reference {
            key: "fleet.task".into(),
            span,
            value: task,
            kind: Kind::Task,
        });
    }
    let sessions = match doc.get("sessions").map(|s| s.get_ref()) {
        Some(DeValue::Array(items)) => items.iter().filter_map(table).collect(),
        _ => Vec::new(),
    };
    for (i, session) in sessions.into_iter().enumerate() {
        for (key, kind) in [
            ("script", Kind::Script),
            ("agent", Kind::Manifest),
            ("fleet", Kind::Fleet),
        ] {
            let Some((value, span)) = session.get(key).and_then(string) else {
                continue;
            };
            if kind == Kind::Manifest && !names_manifest(&value) {
                continue;
            }
            out.push(Reference {
                key: format!("sessions[{i}].{key}"),
                span,
                value,
                kind,
            });
        }
    }
    out
}

fn string(v: &Spanned<DeValue<'_>>) -> Option<(String, Range<usize>)> {
    match v.get_ref() {
        DeValue::String(s) => Some((s.to_string(), v.span())),
        _ => None,
    }
}

fn table<'a, 'i>(v: &'a Spanned<DeValue<'i>>) -> Option<&'a DeTable<'i>> {
    match v.get_ref() {
        DeValue::Table(t) => Some(t),
        _ => None,
    }
}

/// `s` as a TOML basic string (JSON's escapes are TOML's).
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory tree of `files` (path, text).
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn references_anywhere_are_packed_under_plain_names_and_rewritten() {
        let dir = tree(&[
            (
                "fleets/demo.toml",
                "[fleet]\n# a comment\ntask = \"@../tasks/t.md\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"../sim/a.toml\"\n\n[[sessions]]\nname = \"b\"\nagent = \"../agents/x.toml\"\nscript = \"b.toml\"\n\n[[sessions]]\nname = \"c\"\nagent = \"capfleet\"\nfleet = \"team/inner.toml\"\ncwd = \"../work\"\n",
            ),
            ("fleets/b.toml", "b"),
            (
                "fleets/team/inner.toml",
                "[fleet]\ntask = \"x\"\n[[sessions]]\nname = \"i\"\nagent = \"sim\"\nscript = \"../../sim/a.toml\"\n",
            ),
            ("sim/a.toml", "a"),
            ("tasks/t.md", "the task"),
            ("agents/x.toml", "manifest"),
        ]);
        let fleet = dir.path().join("fleets/demo.toml");
        let b = pack(&fleet, &[]).unwrap();
        let names: Vec<&str> = b.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "_up/agents/x.toml",
                "_up/sim/a.toml",
                "_up/tasks/t.md",
                "b.toml",
                "team-inner.toml"
            ]
        );
        assert!(
            names
                .iter()
                .all(|n| capfleet_app::submission::plain_relative(n))
        );
        assert_eq!(
            b.fleet,
            "[fleet]\n# a comment\ntask = \"@_up/tasks/t.md\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"_up/sim/a.toml\"\n\n[[sessions]]\nname = \"b\"\nagent = \"_up/agents/x.toml\"\nscript = \"b.toml\"\n\n[[sessions]]\nname = \"c\"\nagent = \"capfleet\"\nfleet = \"team-inner.toml\"\ncwd = \"../work\"\n"
        );
        // The nested fleet's own reference, to the same file, names it as it stands.
        assert!(b.files["team-inner.toml"].contains("script = \"_up/sim/a.toml\""));
        assert_eq!(b.files["_up/sim/a.toml"], "a");
    }

    #[test]
    fn an_absolute_path_inside_the_directory_is_its_plain_name_and_names_never_clash() {
        let dir = tree(&[("w/s.toml", "one"), ("w/fleet.toml", "other")]);
        let abs = dir.path().join("w/s.toml");
        let fleet = format!(
            "[fleet]\ntask = \"t\"\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = {}\n[[sessions]]\nname = \"b\"\nagent = \"sim\"\nscript = \"s.toml\"\n",
            quoted(abs.to_str().unwrap())
        );
        std::fs::write(dir.path().join("w/top.toml"), fleet).unwrap();
        let b = pack(&dir.path().join("w/top.toml"), &["fleet.toml".into()]).unwrap();
        let names: Vec<&str> = b.files.keys().map(String::as_str).collect();
        // `fleet.toml` is the uploaded fleet's own name: the other file steps aside.
        assert_eq!(names, ["fleet-2.toml", "s.toml"]);
        assert_eq!(b.fleet.matches("script = \"s.toml\"").count(), 2);
    }

    #[test]
    fn a_missing_reference_names_its_line_and_key() {
        let dir = tree(&[(
            "f.toml",
            "[fleet]\ntask = \"t\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"gone.toml\"\n",
        )]);
        let e = pack(&dir.path().join("f.toml"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":7: `sessions[0].script` names `gone.toml`"),
            "{e}"
        );
    }
}
