//! Processes timed by `wait4`, the flood script, baselines and arithmetic.

pub(crate) use crate::figures::{best_of, mb, median, ms, ratio};
use crate::{CHUNK, EXE};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// A flood turn of `frames` text frames of [`CHUNK`] bytes.
pub(crate) fn flood_script(dir: &Path, name: &str, frames: u64) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let mut f = std::fs::File::create(&path).expect("script");
    writeln!(
        f,
        "[[turn]]\nsteps = [ {{ flood = {}, chunk = {CHUNK} }} ]",
        frames * CHUNK
    )
    .expect("write script");
    path
}

/// The sim alone: one user frame in, the turn's frames to `out` (else /dev/null).
pub(crate) fn run_sim(script: &Path, user_frame: &Path, out: Option<&Path>) -> Usage {
    let mut c = Command::new(EXE);
    c.args(["sim", "--mode", "stream-json", "--script"])
        .arg(script)
        .stdin(std::fs::File::open(user_frame).expect("user frame"))
        .stderr(Stdio::null());
    match out {
        Some(path) => c.stdout(std::fs::File::create(path).expect("capture file")),
        None => c.stdout(Stdio::null()),
    };
    timed(c)
}

/// Runs to completion; wall time and the child's user+sys (its reaped descendants
/// included), from `wait4`.
pub(crate) fn timed(mut c: Command) -> Usage {
    let t0 = Instant::now();
    let child = c.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; `status` and `ru` are valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = t0.elapsed();
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{c:?} failed: status {status:#x}"
    );
    drop(child);
    Usage {
        wall,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    }
}

pub(crate) fn self_cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub(crate) fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

// ---- baselines and arithmetic ----------------------------------------------------

pub(crate) fn raw_parse(data: &[u8]) {
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("sim frames parse");
        std::hint::black_box(v);
    }
}

pub(crate) fn count_lines(data: &[u8]) -> usize {
    data.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
}

pub(crate) fn best_of_cpu(passes: usize, mut f: impl FnMut()) -> Duration {
    (0..passes)
        .map(|_| {
            let t = self_cpu();
            f();
            self_cpu() - t
        })
        .min()
        .expect("at least one pass")
}

pub(crate) fn median_usage(runs: &[Usage]) -> Usage {
    let mut walls: Vec<Duration> = runs.iter().map(|u| u.wall).collect();
    let mut cpus: Vec<Duration> = runs.iter().map(|u| u.cpu).collect();
    Usage {
        wall: median(&mut walls),
        cpu: median(&mut cpus),
    }
}
