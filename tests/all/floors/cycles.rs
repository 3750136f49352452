//! No import cycle between the top-level modules of any crate: each crate's modules
//! stand in floors too, a lower one never naming a higher one (a constant moves down,
//! a trait or a handle is passed in). Read from the sources: `crate::<module>` paths
//! and `super::` chains that climb to the crate's root, in code (not comments or
//! strings), in every file under a top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::repo_root;

/// Each crate's source root, as the repository holds it (the app's is `src/`).
const CRATE_SOURCES: [&str; 6] = [
    "protocol/src",
    "wire/src",
    "engine/src",
    "sim/src",
    "mcp/src",
    "src",
];

/// One edge `from -> to` and where it was first seen (`file:line`).
type Edges = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn no_crate_has_an_import_cycle_between_its_top_level_modules() {
    let root = repo_root();
    let mut found = Vec::new();
    for dir in CRATE_SOURCES {
        let edges = module_graph(&root.join(dir));
        assert!(edges.len() > 1, "{dir}: no top-level modules found");
        for cycle in cycles(&edges) {
            let mut said = format!("{dir}: {}", cycle.join(" <-> "));
            for from in &cycle {
                for (to, at) in &edges[from] {
                    if cycle.contains(to) {
                        said.push_str(&format!("\n    {from} -> {to} at {at}"));
                    }
                }
            }
            found.push(said);
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The checker sees what it must: a `super::` climb to the root, a `crate::` group, and
/// nothing in comments or strings.
#[test]
fn the_module_graph_reads_paths_in_code_only() {
    let text = "use super::super::{alpha::A, beta};\n\
                // crate::gamma::X\n\
                let s = \"crate::delta\";\n\
                mod tests {\n    use super::super::super::epsilon::E;\n}\n\
                fn f() { crate::zeta::go(); }\n";
    let mut seen = BTreeSet::new();
    for (name, _) in top_level_paths(text, 2) {
        seen.insert(name);
    }
    let want: BTreeSet<String> = ["alpha", "beta", "epsilon", "zeta"]
        .map(str::to_owned)
        .into();
    assert_eq!(seen, want);
}

/// The crate's top-level modules and, for each, the others its files name.
fn module_graph(src: &Path) -> Edges {
    let mut modules = BTreeSet::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
        if is_module && name != "lib" && name != "main" {
            modules.insert(name);
        }
    }
    let mut edges: Edges = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for module in &modules {
        for file in module_files(src, module) {
            let text = fs::read_to_string(&file).unwrap();
            let depth = module_depth(src, &file);
            let shown = file
                .strip_prefix(repo_root())
                .unwrap_or(&file)
                .display()
                .to_string();
            for (to, line) in top_level_paths(&text, depth) {
                if &to != module && modules.contains(&to) {
                    let out = edges.get_mut(module).unwrap();
                    out.entry(to).or_insert_with(|| format!("{shown}:{line}"));
                }
            }
        }
    }
    edges
}

/// The files of top-level module `module`: `module.rs` and everything under `module/`.
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// How deep the module a file holds sits below the crate root (`a.rs`, `a/mod.rs`: 1;
/// `a/b.rs`: 2).
fn module_depth(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).unwrap();
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The top-level module names (with their line) that `text`'s code reaches: after
/// `crate::`, or after as many `super::` as lead from where they stand to the root. A
/// `{ … }` group there names each of its entries' first segments.
fn top_level_paths(text: &str, depth: usize) -> Vec<(String, usize)> {
    let tokens = tokens(&code_only(text));
    let mut found = Vec::new();
    // Inline `mod name { … }` blocks deepen the module; their brace levels, innermost last.
    let mut inline: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (tok, line) = (&tokens[i].0, tokens[i].1);
        match tok.as_str() {
            "{" => braces += 1,
            "}" => {
                braces = braces.saturating_sub(1);
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.0 == "{") => {
                inline.push(braces);
            }
            _ => {}
        }
        let prev_is_path = i > 0 && tokens[i - 1].0 == "::";
        let climb = if tok == "crate" && !prev_is_path {
            Some(i + 1)
        } else if tok == "super" && !prev_is_path {
            let mut j = i;
            let mut ups = 0;
            while tokens.get(j).is_some_and(|t| t.0 == "super")
                && tokens.get(j + 1).is_some_and(|t| t.0 == "::")
            {
                ups += 1;
                j += 2;
            }
            (ups == depth + inline.len()).then_some(j.saturating_sub(1))
        } else {
            None
        };
        if let Some(at) = climb
            && tokens.get(at).is_some_and(|t| t.0 == "::")
        {
            match tokens.get(at + 1).map(|t| t.0.as_str()) {
                Some("{") => {
                    let mut level = 0;
                    let mut k = at + 1;
                    while let Some((t, l)) = tokens.get(k) {
                        match t.as_str() {
                            "{" => level += 1,
                            "}" => level -= 1,
                            _ => {}
                        }
                        if level == 0 {
                            break;
                        }
                        let first = matches!(tokens[k - 1].0.as_str(), "{" | ",") && level == 1;
                        if first && is_ident(t) {
                            found.push((t.clone(), *l));
                        }
                        k += 1;
                    }
                }
                Some(name) if is_ident(name) => found.push((name.to_owned(), line)),
                _ => {}
            }
        }
        i += 1;
    }
    found
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// `text` with comments and string/char literals blanked (newlines kept, for lines).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = |k: usize| b.get(i + k).copied();
        if b[i] == '/' && rest(1) == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if b[i] == '/' && rest(1) == Some('*') {
            let mut level = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    level += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if b[i] == 'r'
            && (rest(1) == Some('"') || rest(1) == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // A raw string r"…" / r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|h| b.get(j + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some('\n') => out.push('\n'),
                    _ => {}
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if b[i] == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                } else if b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            out.push_str("\"\"");
            i += 1;
        } else if b[i] == '\'' && rest(2) == Some('\'') {
            out.push_str("' '");
            i += 3;
        } else if b[i] == '\'' && rest(1) == Some('\\') {
            // '\n', '\'', '\u{…}'
            let mut j = i + 3;
            while j < b.len() && b[j] != '\'' {
                j += 1;
            }
            out.push_str("' '");
            i = j + 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Identifiers, `::` and the one-character punctuation between them, with lines.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            out.push((word, line));
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push(("::".to_owned(), line));
        } else if !c.is_whitespace() {
            out.push((c.to_string(), line));
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan), each sorted.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges[v].keys() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}
