#[tokio::test]
async fn kill_sweeps_a_daemon_that_left_the_group() {
    let spec = SpawnSpec::new("sh")
        .args([
            "-c",
            "setsid sleep 30 >/dev/null 2>&1 </dev/null & sleep 30",
        ])
        .marked("test-daemon");
    let marker = spec.marker.clone().expect("marked");
    let mut group = spec.spawn().expect("spawn sh");
    let mut daemon_up = false;
    for _ in 0..250 {
        if sweep::processes_with_marker(sweep::MARKER_KEY, &marker).len() == 3 {
            daemon_up = true;
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    assert!(
        daemon_up,
        "sh, its sleep and the setsid daemon carry the marker"
    );
    group.kill(Duration::from_millis(500)).await.expect("kill");
    assert!(
        sweep::processes_with_marker(sweep::MARKER_KEY, &marker).is_empty(),
        "nothing of the tree survives, not even the daemon outside the group"
    );
}

use super::*;

fn sh(script: &str) -> ProcessGroup {
    SpawnSpec::new("sh")
        .arg("-c")
        .arg(script)
        .spawn()
        .expect("spawn sh")
}

/// The trap of `PR_SET_PDEATHSIG` (it fires when the forking *thread* exits): an
/// agent spawned from a thread that then ends lives on.
#[tokio::test]
async fn an_agent_survives_the_exit_of_the_thread_that_spawned_it() {
    let rt = tokio::runtime::Handle::current();
    let mut g = std::thread::spawn(move || {
        let _in_runtime = rt.enter();
        SpawnSpec::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep")
    })
    .join()
    .expect("the spawning thread ends");
    sleep(Duration::from_millis(300)).await;
    assert!(g.child().try_wait().expect("try_wait").is_none());
    assert!(
        group_alive(g.pgid()),
        "the agent outlives its spawning thread"
    );
    g.kill(Duration::from_secs(1)).await.expect("kill");
}

#[tokio::test]
async fn term_is_enough_for_a_polite_child() {
    let mut g = sh("sleep 30");
    let t = Instant::now();
    let status = g.kill(Duration::from_secs(5)).await.expect("kill");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(!status.success());
    assert!(!group_alive(g.pgid()));
}

#[tokio::test]
async fn kill_escalates_when_term_is_trapped() {
    let mut g = sh("trap '' TERM; sleep 30 & wait; sleep 30");
    sleep(Duration::from_millis(200)).await; // let the trap install
    let t = Instant::now();
    g.kill(Duration::from_millis(300)).await.expect("kill");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(300),
        "SIGTERM should have been ignored: {took:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(!group_alive(g.pgid()), "group survived SIGKILL");
}

#[tokio::test]
async fn grandchildren_die_with_the_group() {
    // The grandchild ignores TERM and outlives its parent's exit.
    let mut g = sh("(trap '' TERM; sleep 30) & sleep 30");
    sleep(Duration::from_millis(200)).await;
    let pgid = g.pgid();
    g.kill(Duration::from_millis(300)).await.expect("kill");
    assert!(!group_alive(pgid), "a grandchild survived in group {pgid}");
}

/// bubblewrap's outer process exits without reaping its in-sandbox init, which stays
/// a zombie in the spawn's group until the machine's init reaps it (seconds later, or
/// never). The same state made here deterministically: a process spawned into the
/// agent's group by this test, its parent, and left unreaped while the group is
/// killed (the shell's `sleep`, killed with it and re-parented to init, is another
/// such zombie until init reaps it). The kill settles the group (nothing of it runs)
/// with the zombie still in it.
#[tokio::test]
async fn a_group_left_with_only_zombies_is_finished() {
    use std::os::unix::process::CommandExt as _;
    let mut g = sh("sleep 30");
    let pgid = g.pgid();
    let mut zombie = std::process::Command::new("true")
        .process_group(pgid)
        .spawn()
        .expect("spawn into the agent's group");
    let zpid = zombie.id();
    let zombie_state = || members::read_stat(zpid).ok().map(|s| (s.state, s.pgrp));
    for _ in 0..250 {
        if zombie_state() == Some(('Z', pgid)) {
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(zombie_state(), Some(('Z', pgid)), "a zombie in the group");
    assert_eq!(members::group_state(pgid), members::GroupState::Running);
    g.kill(Duration::from_secs(5)).await.expect("kill");
    assert_eq!(
        zombie_state(),
        Some(('Z', pgid)),
        "the zombie is still there, unreaped"
    );
    assert_eq!(members::group_state(pgid), members::GroupState::Zombies);
    assert!(!group_alive(pgid), "a group of zombies is finished");
    assert!(
        g.settled,
        "the kill settled the group: the keeper forgot it"
    );
    zombie.wait().expect("reap the zombie");
}

#[tokio::test]
async fn kill_group_without_child_handle() {
    let mut g = sh("trap '' TERM; sleep 30");
    sleep(Duration::from_millis(200)).await;
    let pgid = g.pgid();
    // Reap the leader in the background: this test is its parent.
    let reaper = tokio::spawn(async move { g.wait().await });
    assert!(kill_group(pgid, libc::SIGTERM, Duration::from_millis(200)).await);
    assert!(reaper.await.expect("join").is_ok());
}

#[test]
fn programs_are_found_on_the_path_or_as_given() {
    let dir = tempfile::tempdir().expect("dir");
    let exe = dir.path().join("agent-x");
    std::fs::write(&exe, "#!/bin/sh\n").expect("write");
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.path().as_os_str();
    let cwd = std::path::Path::new("/");
    let found = find_program("agent-x".as_ref(), cwd, Some(path));
    assert_eq!(found.as_deref(), Some(exe.as_path()));
    assert_eq!(find_program("agent-y".as_ref(), cwd, Some(path)), None);
    assert_eq!(
        find_program("not-executable".as_ref(), cwd, Some(path)),
        None
    );
    assert_eq!(
        find_program(&exe, cwd, None).as_deref(),
        Some(exe.as_path())
    );
    let relative = find_program("./agent-x".as_ref(), dir.path(), None);
    assert!(relative.is_some(), "./agent-x from its directory");
    assert!(
        find_program("sh".as_ref(), cwd, None).is_some(),
        "sh on PATH"
    );
}

#[test]
fn refuses_special_groups() {
    assert!(signal_group(0, 0).is_err());
    assert!(signal_group(1, 0).is_err());
    assert!(!group_alive(-5));
}

#[tokio::test]
async fn env_and_cwd_are_applied_and_environment_kept() {
    let dir = std::env::temp_dir();
    let mut g = SpawnSpec::new("sh")
        .args([
            "-c",
            "printf '%s|%s|%s' \"$CAPFLEET_T\" \"$PWD\" \"${PATH:+has-path}\"",
        ])
        .env("CAPFLEET_T", "v1")
        .cwd(&dir)
        .stdio(Io::Null, Io::Piped, Io::Null)
        .spawn()
        .expect("spawn");
    let out = g.stdout_to_end().await;
    let canon = std::fs::canonicalize(&dir).expect("canon");
    let parts: Vec<&str> = out.split('|').collect();
    assert_eq!(parts[0], "v1");
    assert_eq!(std::fs::canonicalize(parts[1]).expect("pwd"), canon);
    assert_eq!(parts[2], "has-path");
}
