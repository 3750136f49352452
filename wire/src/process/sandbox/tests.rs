//! bubblewrap on `sh`: the workspace and `TMPDIR` written, nothing beside them, a
//! hidden file unread; Landlock refused where no helper is named (this test binary
//! names none: the escape kit runs it through capfleet, `tests/all/sandbox_escape.rs`);
//! an agent installed in a hidden root found (venv, npm).

use std::sync::Arc;

use super::probe::Availability;
use super::*;
use crate::process::{Io, SpawnSpec};

struct Planted {
    _dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    beside: PathBuf,
}

fn planted() -> Planted {
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(home.join(".ssh")).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(home.join(".ssh/id_test"), "SECRET").expect("key");
    Planted {
        beside: dir.path().join("beside"),
        home,
        ws,
        _dir: dir,
    }
}

async fn run_inside(backend: BackendChoice, p: &Planted, script: &str) -> String {
    run_hiding(backend, p, &[], script).await
}

/// [`run_inside`] with `more` hidden beside the home.
async fn run_hiding(backend: BackendChoice, p: &Planted, more: &[PathBuf], script: &str) -> String {
    let mut hidden = vec![p.home.clone()];
    hidden.extend_from_slice(more);
    let spec = SandboxSpec {
        hidden,
        backend,
        ..SandboxSpec::default()
    };
    let sandbox = Sandbox::resolve(&spec, &p.ws, &SandboxPaths::default()).expect("resolve");
    let confined = Arc::new(sandbox.confine(Path::new("sh")).expect("confine"));
    let mut g = SpawnSpec::new("sh")
        .args(["-c", script])
        .env("H", &p.home)
        .env("B", &p.beside)
        .cwd(&p.ws)
        .stdio(Io::Null, Io::Piped, Io::Null)
        .confined(Some(confined))
        .spawn()
        .expect("spawn");
    g.stdout_to_end().await
}

const SCRIPT: &str = r#"
echo in > ./inside && echo ws-ok
echo t > "$TMPDIR/t" && echo tmp-ok
echo x > "$B" && echo beside-WRITTEN
cat "$H/.ssh/id_test" && echo home-READ
true
"#;

async fn confines(backend: BackendChoice) {
    let p = planted();
    let out = run_inside(backend, &p, SCRIPT).await;
    assert!(out.contains("ws-ok"), "{backend:?}: {out}");
    assert!(out.contains("tmp-ok"), "{backend:?}: {out}");
    assert!(!out.contains("WRITTEN"), "{backend:?}: {out}");
    assert!(!out.contains("SECRET"), "{backend:?}: {out}");
    assert!(
        !p.beside.exists(),
        "{backend:?}: wrote beside the workspace"
    );
    assert_eq!(
        std::fs::read_to_string(p.ws.join("inside")).ok().as_deref(),
        Some("in\n")
    );
}

#[tokio::test]
async fn bubblewrap_confines_writes_and_hides_the_home() {
    confines(BackendChoice::Bubblewrap).await;
}

/// Landlock is applied by a helper the process names (capfleet's own binary); a
/// process that names none is refused the confinement, before anything spawns.
#[test]
fn landlock_without_a_helper_is_refused_naming_it() {
    let p = planted();
    let spec = SandboxSpec {
        backend: BackendChoice::Landlock,
        ..SandboxSpec::default()
    };
    let sandbox = Sandbox::resolve(&spec, &p.ws, &SandboxPaths::default()).expect("resolve");
    let err = sandbox.confine(Path::new("sh")).expect_err("no helper");
    assert!(err.to_string().contains("names no helper"), "{err}");
}

/// A server's token file in the directory a session works in: hidden by bubblewrap
/// (mounted over after the workspace), said as not enforced by Landlock.
#[tokio::test]
async fn a_hidden_file_inside_the_workspace() {
    let p = planted();
    let tokens = std::fs::canonicalize(&p.ws).expect("ws").join("tokens.txt");
    std::fs::write(&tokens, "DIGESTS\n").expect("tokens");
    let script = r#"
cat ./tokens.txt && echo tokens-READ
echo x >> ./tokens.txt && echo tokens-WRITTEN
echo in > ./beside-tokens && echo ws-ok
true
"#;
    let hidden = [tokens.clone()];
    let out = run_hiding(BackendChoice::Bubblewrap, &p, &hidden, script).await;
    assert!(out.contains("ws-ok"), "{out}");
    assert!(
        !out.contains("DIGESTS") && !out.contains("WRITTEN"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&tokens).ok().as_deref(),
        Some("DIGESTS\n")
    );
    let spec = SandboxSpec {
        hidden: hidden.to_vec(),
        backend: BackendChoice::Landlock,
        ..SandboxSpec::default()
    };
    let sb = Sandbox::resolve(&spec, &p.ws, &SandboxPaths::default()).expect("resolve");
    let said = sb.unenforced.join("\n");
    assert!(
        said.contains(&format!("hidden: {}", tokens.display())) && said.contains("may write"),
        "{said}"
    );
}

#[test]
fn a_forced_absence_is_refused_naming_what_is_missing() {
    let none = Availability {
        bubblewrap: Err("no bwrap".into()),
        landlock_abi: 0,
        forced: None,
    };
    let e = none.choose(BackendChoice::Auto).expect_err("refused");
    assert!(e.to_string().contains("no bwrap"), "{e}");
    assert!(e.to_string().contains("Landlock"), "{e}");
    let only_landlock = Availability {
        landlock_abi: 7,
        ..none
    };
    assert_eq!(
        only_landlock.choose(BackendChoice::Auto).ok(),
        Some(Backend::Landlock)
    );
    assert!(only_landlock.choose(BackendChoice::Bubblewrap).is_err());
}

/// An agent installed in a hidden root: a Python venv's script brings the venv and the
/// installation it was made from (its `#!` interpreter links there); an npm package's
/// bin brings the tree above `node_modules`; nothing outside the hidden root is listed.
#[test]
fn an_install_in_a_hidden_root_is_found_for_venvs_and_npm_packages() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("dir");
    let home = std::fs::canonicalize(dir.path()).expect("home");
    let (venv, py) = (home.join("venv"), home.join("py"));
    std::fs::create_dir_all(venv.join("bin")).expect("venv");
    std::fs::create_dir_all(py.join("bin")).expect("py");
    std::fs::write(py.join("bin/python3.11"), "").expect("python");
    symlink(py.join("bin/python3.11"), venv.join("bin/python3")).expect("link");
    let cfg = format!("home = {}\nversion = 3.11.7\n", py.join("bin").display());
    std::fs::write(venv.join("pyvenv.cfg"), cfg).expect("cfg");
    let tool = venv.join("bin/tool");
    let shebang = format!("#!{}\nimport tool\n", venv.join("bin/python3").display());
    std::fs::write(&tool, shebang).expect("tool");
    let hidden = vec![home.clone()];
    let roots = paths::install_roots(&tool, &hidden);
    assert!(roots.contains(&venv) && roots.contains(&py), "{roots:?}");
    let pkg = home.join("n/node_modules/pkg");
    std::fs::create_dir_all(&pkg).expect("pkg");
    std::fs::create_dir_all(home.join("n/node_modules/.bin")).expect("bin");
    std::fs::write(pkg.join("cli.js"), "#!/usr/bin/env sh\n").expect("cli");
    symlink("../pkg/cli.js", home.join("n/node_modules/.bin/cli")).expect("link");
    let roots = paths::install_roots(&home.join("n/node_modules/.bin/cli"), &hidden);
    assert!(!roots.is_empty(), "{roots:?}");
    assert!(
        roots.iter().all(|r| *r == home.join("n")),
        "only the package's tree, nothing outside the hidden root: {roots:?}"
    );
}
