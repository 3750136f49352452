//! Manifest resolution order (spec §5), the bounded probe, and binding selection (spec §6).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::CapCode;
use capfleet_wire::process::group_alive;
use capfleet_wire::registry::*;

/// A temp dir removed on drop (the root package has no `tempfile`).
struct Tmp(PathBuf);

impl Tmp {
    fn new() -> Tmp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("capfleet-registry-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Tmp(dir)
    }
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A valid manifest whose `pty.cols` marks where it came from.
fn manifest(name: &str, cols: u16) -> String {
    format!(
        "[agent]\nname = \"{name}\"\nbinary = \"{name}\"\nprofiles = []\n\n[startup]\ncommand = [\"{name}\"]\n\
         ready_when = {{ pattern = \"^> $\" }}\n\n[pty]\ncols = {cols}\nrows = 24\n\n[capabilities]\nstreaming_output = true\n"
    )
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A fake agent binary that prints `manifest` on `--cap-manifest`.
fn fake_binary(dir: &Path, name: &str, on_probe: &str) -> PathBuf {
    let bin = dir.join(name);
    write_script(
        &bin,
        &format!("if [ \"$1\" = \"--cap-manifest\" ]; then\n{on_probe}\nfi\nexit 3"),
    );
    bin
}

fn printing(text: &str) -> String {
    format!("cat <<'CAPEOF'\n{text}CAPEOF\nexit 0")
}

struct World {
    tmp: Tmp,
    config: RegistryConfig,
}

fn world() -> World {
    let tmp = Tmp::new();
    let config = RegistryConfig {
        path_dirs: vec![tmp.dir("empty-bin"), tmp.dir("bin")],
        user_dir: Some(tmp.dir("user")),
        system_dir: Some(tmp.dir("system")),
        shipped: Vec::new(),
        probe_timeout: Some(Duration::from_secs(5)),
    };
    World { tmp, config }
}

async fn resolve(config: &RegistryConfig, name: &str) -> Result<Resolved, RegistryError> {
    Registry::new(config.clone()).resolve(name).await
}

#[tokio::test]
async fn each_source_wins_in_order() {
    let mut w = world();
    let bin = w.tmp.dir("bin");
    fake_binary(&bin, "fake", &printing(&manifest("fake", 105)));
    let sibling = bin.join("cap-agent.toml");
    let user = w.tmp.0.join("user/fake.toml");
    let system = w.tmp.0.join("system/fake.toml");
    std::fs::write(&sibling, manifest("fake", 101)).expect("write");
    std::fs::write(&user, manifest("fake", 102)).expect("write");
    std::fs::write(&system, manifest("fake", 103)).expect("write");
    w.config.shipped = vec![
        ("other".into(), manifest("other", 99)),
        ("fake".into(), manifest("fake", 104)),
    ];

    let steps: [(u16, Source, Option<&Path>); 5] = [
        (101, Source::BinarySibling(sibling.clone()), Some(&sibling)),
        (102, Source::UserLocal(user.clone()), Some(&user)),
        (103, Source::SystemWide(system.clone()), Some(&system)),
        (104, Source::Shipped("fake".into()), None),
        (105, Source::Probe(bin.join("fake")), None),
    ];
    for (cols, source, remove) in steps {
        let r = resolve(&w.config, "fake")
            .await
            .unwrap_or_else(|e| panic!("step {cols}: {e}"));
        assert_eq!(r.manifest.pty.cols, cols);
        assert_eq!(r.source, source);
        match remove {
            Some(p) => std::fs::remove_file(p).expect("rm"),
            None => w.config.shipped.retain(|(n, _)| n != "fake"),
        }
    }
    // Display names the source.
    assert_eq!(
        Source::Shipped("fake".into()).to_string(),
        "shipped manifest fake"
    );
}

#[tokio::test]
async fn sibling_of_a_symlinked_binary_is_found_in_the_real_dir() {
    let w = world();
    let pkg = w.tmp.dir("pkg/bin");
    let real = fake_binary(&pkg, "linked", "exit 1");
    std::os::unix::fs::symlink(&real, w.tmp.0.join("bin/linked")).expect("symlink");
    std::fs::write(pkg.join("cap-agent.toml"), manifest("linked", 111)).expect("write");
    let r = resolve(&w.config, "linked").await.expect("resolves");
    assert_eq!(r.manifest.pty.cols, 111);
    let real_file = std::fs::canonicalize(&pkg)
        .expect("canon")
        .join("cap-agent.toml");
    assert_eq!(r.source, Source::BinarySibling(real_file));
}

#[tokio::test]
async fn shipped_list_used_when_nothing_else_exists() {
    let mut w = world();
    w.config.shipped = vec![("sim".into(), manifest("sim", 90))];
    let r = resolve(&w.config, "sim").await.expect("shipped");
    assert_eq!(r.source, Source::Shipped("sim".into()));
    assert_eq!(r.manifest.agent.name, "sim");
}

#[tokio::test]
async fn probe_prints_a_manifest() {
    let w = world();
    let bin = fake_binary(
        &w.tmp.dir("bin"),
        "prober",
        &printing(&manifest("prober", 77)),
    );
    let r = resolve(&w.config, "prober").await.expect("probe");
    assert_eq!(r.source, Source::Probe(bin));
    assert_eq!(r.manifest.pty.cols, 77);
}

#[tokio::test]
async fn hanging_probe_is_cut_at_its_timeout() {
    let mut w = world();
    let pidfile = w.tmp.0.join("pid");
    let body = format!(
        "echo $$ > '{}'\ntrap '' TERM\nsleep 30 &\nsleep 30",
        pidfile.display()
    );
    fake_binary(&w.tmp.dir("bin"), "hang", &body);
    w.config.probe_timeout = Some(Duration::from_millis(500));
    let t = Instant::now();
    let err = resolve(&w.config, "hang").await.expect_err("must time out");
    let took = t.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    match &err {
        RegistryError::ProbeTimeout { binary, after } => {
            assert!(binary.ends_with("hang"));
            assert_eq!(*after, Duration::from_millis(500));
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(err.code(), CapCode::ManifestMissing);
    assert!(err.to_string().contains("timed out"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("int");
    assert!(!group_alive(pid), "probe group {pid} survived");
}

#[tokio::test]
async fn probe_printing_invalid_toml_is_a_clear_error() {
    let w = world();
    fake_binary(
        &w.tmp.dir("bin"),
        "garbled",
        &printing("[agent\nname = \"x\"\n"),
    );
    let err = resolve(&w.config, "garbled").await.expect_err("invalid");
    let RegistryError::ProbeInvalid { errors, .. } = &err else {
        panic!("unexpected {err}")
    };
    let msg = err.to_string();
    assert!(
        msg.contains("invalid manifest") && msg.contains("TOML syntax error"),
        "{msg}"
    );
    assert!(msg.contains("<probe ") && msg.contains(":1:"), "{msg}");
    assert!(!errors.is_empty());
}

#[tokio::test]
async fn probe_printing_an_invalid_manifest_lists_its_errors() {
    let w = world();
    fake_binary(
        &w.tmp.dir("bin"),
        "partial",
        &printing("[agent]\nname = \"partial\"\n"),
    );
    let err = resolve(&w.config, "partial").await.expect_err("invalid");
    let msg = err.to_string();
    for key in [
        "agent.binary",
        "startup.command",
        "pty.cols",
        "capabilities.streaming_output",
    ] {
        assert!(
            msg.contains(&format!("{key}: required field missing")),
            "{key} in {msg}"
        );
    }
}

#[tokio::test]
async fn probe_output_is_capped() {
    let w = world();
    fake_binary(
        &w.tmp.dir("bin"),
        "flood",
        "head -c 2000000 /dev/zero | tr '\\0' 'a'\nexit 0",
    );
    let err = resolve(&w.config, "flood").await.expect_err("too large");
    assert!(
        matches!(err, RegistryError::ProbeOutputTooLarge { limit, .. } if limit == PROBE_STDOUT_MAX),
        "{err}"
    );
}

#[tokio::test]
async fn missing_agent_names_every_place_tried() {
    let w = world();
    fake_binary(&w.tmp.dir("bin"), "mute", "echo 'unknown flag' >&2; exit 2");
    for name in ["ghost", "mute"] {
        let err = resolve(&w.config, name).await.expect_err("missing");
        assert_eq!(err.code(), CapCode::ManifestMissing);
        let RegistryError::NotFound { tried, .. } = &err else {
            panic!("unexpected {err}")
        };
        let msg = err.to_string();
        assert!(msg.contains("cap_manifest_missing"), "{msg}");
        assert!(msg.contains(&format!("user/{name}.toml")), "{msg}");
        assert!(msg.contains(&format!("system/{name}.toml")), "{msg}");
        assert!(msg.contains(&format!("shipped manifest `{name}`")), "{msg}");
        assert!(
            tried.iter().any(|t| t.starts_with("binary sibling")),
            "{msg}"
        );
        assert!(tried.iter().any(|t| t.starts_with("probe")), "{msg}");
        assert_eq!(tried.len(), 5, "{msg}");
    }
    let err = resolve(&w.config, "mute").await.expect_err("missing");
    assert!(err.to_string().contains("unknown flag"), "{err}");
}

#[tokio::test]
async fn invalid_manifest_at_a_source_is_reported_not_skipped() {
    let mut w = world();
    std::fs::write(w.tmp.0.join("user/bad.toml"), "[agent]\nname = 5\n").expect("write");
    w.config.shipped = vec![("bad".into(), manifest("bad", 80))];
    let err = resolve(&w.config, "bad").await.expect_err("invalid");
    let RegistryError::Invalid { origin, errors } = &err else {
        panic!("unexpected {err}")
    };
    assert!(matches!(origin, Source::UserLocal(_)));
    assert!(
        errors
            .iter()
            .any(|e| e.key() == Some("agent.name") && e.line() == Some(2)),
        "{err}"
    );
}

#[tokio::test]
async fn a_path_is_loaded_directly() {
    let w = world();
    let file = w.tmp.0.join("direct.toml");
    std::fs::write(&file, manifest("direct", 66)).expect("write");
    let name = file.to_str().expect("utf8");
    let r = resolve(&w.config, name).await.expect("file");
    assert_eq!(r.source, Source::File(file.clone()));
    assert_eq!(r.manifest.pty.cols, 66);
    let err = resolve(&w.config, "nowhere/x.toml")
        .await
        .expect_err("missing file");
    assert!(err.to_string().contains("cannot read manifest"), "{err}");
}

fn with_fast_path(fast_path: &str) -> Manifest {
    let src = format!("{}\n[fast_path]\n{fast_path}\n", manifest("b", 80));
    Manifest::parse(&src, "t").expect("valid").manifest
}

#[test]
fn binding_selection() {
    use Binding::*;
    use SkipReason::*;
    let all = "grpc = \"localhost:1\"\nstream_json = [\"b\"]\nacp_stdio = true\na2a_serve_at = \"http://h\"";
    const EVERYTHING: [Binding; 7] = Binding::PRIORITY;
    type Row = (
        &'static str,
        &'static [Binding],
        Binding,
        &'static [(Binding, SkipReason)],
    );
    let table: &[Row] = &[
        (all, &EVERYTHING, Grpc, &[]),
        (
            all,
            &[StreamJson, AcpStdio, A2a],
            StreamJson,
            &[(Grpc, NotSupportedByBuild)],
        ),
        (
            all,
            &[AcpStdio],
            AcpStdio,
            &[
                (Grpc, NotSupportedByBuild),
                (StreamJson, NotSupportedByBuild),
                (CodexAppServer, NotDeclared),
                (CodexExec, NotDeclared),
            ],
        ),
        (
            "stream_json = false\nacp_stdio = [\"b\", \"--acp\"]",
            &EVERYTHING,
            AcpStdio,
            &[
                (Grpc, NotDeclared),
                (StreamJson, NotDeclared),
                (CodexAppServer, NotDeclared),
                (CodexExec, NotDeclared),
            ],
        ),
        (
            "x-codex_exec = [\"codex\", \"exec\", \"--json\"]",
            &EVERYTHING,
            CodexExec,
            &[
                (Grpc, NotDeclared),
                (StreamJson, NotDeclared),
                (CodexAppServer, NotDeclared),
            ],
        ),
        (
            "x-codex_app_server = [\"codex\", \"app-server\"]\nx-codex_exec = [\"codex\", \"exec\", \"--json\"]",
            &EVERYTHING,
            CodexAppServer,
            &[(Grpc, NotDeclared), (StreamJson, NotDeclared)],
        ),
        (
            "a2a_serve_at = \"http://h\"",
            &EVERYTHING,
            A2a,
            &[
                (Grpc, NotDeclared),
                (StreamJson, NotDeclared),
                (CodexAppServer, NotDeclared),
                (CodexExec, NotDeclared),
                (AcpStdio, NotDeclared),
            ],
        ),
        (
            "",
            &EVERYTHING,
            Pty,
            &[
                (Grpc, NotDeclared),
                (StreamJson, NotDeclared),
                (CodexAppServer, NotDeclared),
                (CodexExec, NotDeclared),
                (AcpStdio, NotDeclared),
                (A2a, NotDeclared),
            ],
        ),
        (
            all,
            &[],
            Pty,
            &[
                (Grpc, NotSupportedByBuild),
                (StreamJson, NotSupportedByBuild),
                (CodexAppServer, NotDeclared),
                (CodexExec, NotDeclared),
                (AcpStdio, NotSupportedByBuild),
                (A2a, NotSupportedByBuild),
            ],
        ),
    ];
    for (i, (fp, supported, want, skipped)) in table.iter().enumerate() {
        let sel = select_binding(&with_fast_path(fp), supported);
        assert_eq!(sel.binding, *want, "row {i}");
        assert_eq!(sel.skipped, skipped.to_vec(), "row {i}");
    }
    let m = with_fast_path(all);
    assert_eq!(
        candidates(&m, &[StreamJson, A2a]),
        vec![StreamJson, A2a, Pty]
    );
    assert_eq!(
        select_binding(&m, &[StreamJson]).to_string(),
        "stream_json (skipped grpc: not supported by this build)"
    );
}

#[test]
fn binding_wire_names() {
    let names: Vec<&str> = Binding::PRIORITY.iter().map(|b| b.as_str()).collect();
    assert_eq!(
        names,
        [
            "grpc",
            "stream_json",
            "codex_app_server",
            "codex_exec",
            "acp_stdio",
            "a2a",
            "pty"
        ]
    );
    for b in Binding::PRIORITY {
        assert_eq!(Binding::from_wire(b.as_str()), Some(b));
        assert_eq!(serde_json::to_string(&b).expect("json"), format!("\"{b}\""));
    }
    // `[capabilities.x-binding.<binding>]` knows the same names.
    assert_eq!(names, capfleet_engine::manifest::BINDING_NAMES);
}

/// The shipped Codex manifest steers a running turn over the app-server
/// (`turn/steer`), not over `codex exec` (a process per turn): said per binding.
#[test]
fn codex_steers_over_the_app_server_only() {
    use capfleet_wire::driver::queued_input;
    let shipped =
        std::fs::read_to_string(crate::common::repo_root().join("config/agents/codex.toml"))
            .expect("shipped codex.toml");
    let m = capfleet_engine::manifest::Manifest::parse(&shipped, "codex.toml")
        .expect("the shipped manifest")
        .manifest;
    assert_eq!(queued_input(&m, Binding::CodexAppServer), Ok(()));
    let exec = queued_input(&m, Binding::CodexExec).expect_err("exec takes no input mid-turn");
    assert!(
        exec.contains("queued_input = false over codex_exec"),
        "{exec}"
    );
}

/// The shipped Gemini manifest starts `gemini --acp` where the installed binary's
/// `--help` lists it (the suite's pinned Gemini CLI), `--experimental-acp` where it
/// does not (an older CLI, stood in for by a script printing an older help), and
/// keeps `--acp` saying why when the help cannot be read. No version is compared.
#[test]
fn gemini_flag_is_settled_by_the_installed_binarys_help() {
    let shipped =
        std::fs::read_to_string(crate::common::repo_root().join("config/agents/gemini-acp.toml"))
            .expect("shipped gemini-acp.toml");
    let resolve = |path_dirs: Vec<PathBuf>| {
        let config = RegistryConfig {
            path_dirs,
            shipped: vec![("gemini-acp".into(), shipped.clone())],
            probe_timeout: Some(Duration::from_secs(60)),
            ..RegistryConfig::default()
        };
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(Registry::new(config).resolve("gemini-acp"))
            .expect("resolved")
    };
    let acp_argv = |r: &Resolved| match &r.manifest.fast_path.acp_stdio {
        capfleet_engine::manifest::AcpFastPath::Argv(a) => a.clone(),
        other => panic!("{other:?}"),
    };
    let pinned = crate::common::peer("gemini");
    let real = resolve(vec![pinned.parent().expect("bin dir").to_owned()]);
    assert_eq!(acp_argv(&real)[1], "--acp", "{:?}", real.flags);
    assert_eq!(real.flags[0].used, "--acp");
    let tmp = Tmp::new();
    let bin = tmp.dir("old");
    write_script(
        &bin.join("gemini"),
        "echo '      --experimental-acp    Starts the agent in ACP mode  [boolean]'",
    );
    let old = resolve(vec![bin]);
    assert_eq!(acp_argv(&old)[1], "--experimental-acp", "{:?}", old.flags);
    assert_eq!(old.manifest.startup.command[1], "--experimental-acp");
    assert!(
        old.flags[0].why.contains("does not list --acp"),
        "{:?}",
        old.flags
    );
    let missing = resolve(vec![tmp.dir("empty")]);
    assert_eq!(acp_argv(&missing)[1], "--acp");
    assert!(
        missing.flags[0].why.contains("not found on PATH"),
        "{:?}",
        missing.flags
    );
}
