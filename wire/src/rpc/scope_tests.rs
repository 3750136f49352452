//! Scope enforcement: nothing escapes, and outside paths never reveal existence.

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::json;

use super::error::RpcError;
use super::fs::{self, PathParams, ReadParams, WriteParams};
use super::scope::Scope;
use crate::manifest::FsScope;

struct World {
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().expect("tmp");
    let base = std::fs::canonicalize(tmp.path()).expect("canon");
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret"), "top secret").expect("secret");
    std::fs::write(ws.join("a.txt"), "one\ntwo\nthree\n").expect("a");
    World {
        _tmp: tmp,
        ws,
        outside,
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn read(scope: &Scope, path: &str) -> Result<serde_json::Value, RpcError> {
    let p = ReadParams {
        path: path.into(),
        line: None,
        limit: None,
    };
    fs::read(scope, &p, 1 << 20)
}

fn write(scope: &Scope, path: &str) -> Result<serde_json::Value, RpcError> {
    let p = WriteParams {
        path: path.into(),
        content: "x".into(),
        encoding: None,
        create: None,
        overwrite: None,
    };
    fs::write(scope, &p)
}

#[test]
fn inside_reads_and_line_windows() {
    let w = world();
    let sc = Scope::new(FsScope::WorkspaceOnly, &w.ws).expect("scope");
    let v = read(&sc, &s(&w.ws.join("a.txt"))).expect("read");
    assert_eq!(v["content"], "one\ntwo\nthree\n");
    let p = ReadParams {
        path: s(&w.ws.join("a.txt")),
        line: Some(2),
        limit: Some(1),
    };
    assert_eq!(fs::read(&sc, &p, 100).expect("window")["content"], "two\n");
    let err = fs::read(
        &sc,
        &ReadParams {
            path: s(&w.ws.join("a.txt")),
            line: None,
            limit: None,
        },
        4,
    );
    assert!(matches!(err, Err(RpcError::Io(m)) if m.contains("read cap")));
    assert_eq!(
        read(&sc, "a.txt"),
        Err(RpcError::InvalidParams(
            "path must be absolute: a.txt".into()
        ))
    );
}

#[test]
fn nothing_escapes_and_existence_is_not_revealed() {
    let w = world();
    let sc = Scope::new(FsScope::WorkspaceOnly, &w.ws).expect("scope");
    symlink(&w.outside, w.ws.join("link_out")).expect("link");
    symlink(w.outside.join("nope"), w.ws.join("dangling_out")).expect("link");
    let attempts = [
        s(&w.outside.join("secret")),
        s(&w.outside.join("missing")),
        s(&w.ws.join("link_out/secret")),
        s(&w.ws.join("link_out/missing")),
        s(&w.ws.join("../outside/secret")),
        s(&w.ws.join("../outside/missing")),
        s(&w.ws.join("sub/../../outside/secret")),
        s(&w.ws.join("dangling_out")),
        "/etc/passwd".into(),
    ];
    for a in &attempts {
        assert_eq!(read(&sc, a), Err(RpcError::ScopeViolation), "read {a}");
        assert_eq!(write(&sc, a), Err(RpcError::ScopeViolation), "write {a}");
        let pp = PathParams {
            path: a.clone(),
            recursive: None,
        };
        assert_eq!(
            fs::exists(&sc, &pp),
            Err(RpcError::ScopeViolation),
            "exists {a}"
        );
        assert_eq!(
            fs::delete(&sc, &pp),
            Err(RpcError::ScopeViolation),
            "delete {a}"
        );
    }
    assert!(
        !w.outside.join("nope").exists(),
        "write through a dangling link"
    );
    assert_eq!(
        std::fs::read_to_string(w.outside.join("secret")).expect("secret"),
        "top secret"
    );
    // Inside and missing: a plain not-found.
    assert_eq!(
        read(&sc, &s(&w.ws.join("missing"))),
        Err(RpcError::PathNotFound)
    );
    // Writes to a new file are checked on the resolved parent.
    write(&sc, &s(&w.ws.join("new.txt"))).expect("new file");
    assert_eq!(
        write(&sc, &s(&w.ws.join("link_out/new.txt"))),
        Err(RpcError::ScopeViolation)
    );
}

#[test]
fn symlink_swapped_between_check_and_use() {
    let w = world();
    let sc = Scope::new(FsScope::WorkspaceOnly, &w.ws).expect("scope");
    std::fs::create_dir(w.ws.join("d")).expect("d");
    std::fs::write(w.ws.join("d/secret"), "inside").expect("f");
    let checked = sc.check(&s(&w.ws.join("d/secret"))).expect("in scope");
    // The attacker swaps the directory for a link out of the workspace.
    std::fs::rename(w.ws.join("d"), w.ws.join("d_old")).expect("mv");
    symlink(&w.outside, w.ws.join("d")).expect("swap");
    assert!(matches!(
        super::fs_open::open_read(&sc, &checked),
        Err(RpcError::ScopeViolation)
    ));
    assert!(matches!(
        super::fs_open::open_parent(&sc, &checked),
        Err(RpcError::ScopeViolation)
    ));
    // A final component swapped for a link is refused by O_NOFOLLOW.
    symlink(w.outside.join("secret"), w.ws.join("f")).expect("link");
    let f = w.ws.join("f");
    assert!(matches!(
        super::fs_open::open_read(&sc, &f),
        Err(RpcError::ScopeViolation)
    ));
}

#[test]
fn project_root_at_a_nested_repo() {
    let w = world();
    std::fs::create_dir_all(w.ws.join(".git")).expect("outer repo");
    let inner = w.ws.join("vendor/inner");
    std::fs::create_dir_all(inner.join(".hg")).expect("inner repo");
    std::fs::create_dir_all(inner.join("src")).expect("src");
    let sc = Scope::new(FsScope::ProjectRoot, &inner.join("src")).expect("scope");
    assert_eq!(sc.root(), inner.as_path());
    assert_eq!(
        read(&sc, &s(&w.ws.join("a.txt"))),
        Err(RpcError::ScopeViolation)
    );
    assert_eq!(
        read(&sc, &s(&inner.join("../../a.txt"))),
        Err(RpcError::ScopeViolation)
    );
    write(&sc, &s(&inner.join("x"))).expect("inside the nested repo");
    let outer = Scope::new(FsScope::ProjectRoot, &w.ws.join("vendor")).expect("scope");
    assert_eq!(outer.root(), w.ws.as_path());
    let any = Scope::new(FsScope::Unrestricted, &w.ws).expect("scope");
    assert_eq!(
        read(&any, &s(&w.outside.join("secret"))).expect("read")["content"],
        "top secret"
    );
}

#[test]
fn write_flags_list_delete() {
    let w = world();
    let sc = Scope::new(FsScope::WorkspaceOnly, &w.ws).expect("scope");
    let f = s(&w.ws.join("a.txt"));
    let no_over = WriteParams {
        path: f.clone(),
        content: "z".into(),
        encoding: None,
        create: None,
        overwrite: Some(false),
    };
    assert!(matches!(fs::write(&sc, &no_over), Err(RpcError::Io(_))));
    let no_create = WriteParams {
        path: s(&w.ws.join("b")),
        content: "z".into(),
        encoding: None,
        create: Some(false),
        overwrite: None,
    };
    assert_eq!(fs::write(&sc, &no_create), Err(RpcError::PathNotFound));
    let b64 = WriteParams {
        path: f.clone(),
        content: "/w==".into(),
        encoding: Some("base64".into()),
        create: None,
        overwrite: None,
    };
    fs::write(&sc, &b64).expect("b64");
    assert_eq!(read(&sc, &f).expect("read")["encoding"], "base64");
    std::fs::create_dir_all(w.ws.join("d/e")).expect("d");
    let l = fs::list(
        &sc,
        &PathParams {
            path: s(&w.ws),
            recursive: Some(true),
        },
    )
    .expect("list");
    let names: Vec<_> = l["entries"]
        .as_array()
        .expect("arr")
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert!(names.contains(&json!("d/e")), "{names:?}");
    let d = PathParams {
        path: s(&w.ws.join("d")),
        recursive: None,
    };
    assert!(fs::delete(&sc, &d).is_err());
    fs::delete(
        &sc,
        &PathParams {
            path: s(&w.ws.join("d")),
            recursive: Some(true),
        },
    )
    .expect("rm -r");
    assert!(!w.ws.join("d").exists());
    assert_eq!(
        fs::delete(
            &sc,
            &PathParams {
                path: s(&w.ws),
                recursive: Some(true)
            }
        )
        .ok(),
        None
    );
}
