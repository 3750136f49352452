//! One input held to a target's promises ([`run`]), the search for an input that
//! breaks them ([`search`]), and the replay of every input that once did ([`replay`]).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::alloc::peak_of;
use crate::input::{SUITE, inputs};
use crate::targets::Target;

/// The most CPU time one input may take on its thread. Not a performance figure (the
/// bench has those): a decoder that takes seconds on a few kilobytes is quadratic or
/// stuck. CPU time, not wall time: a loaded machine (the suite's tests run side by
/// side on two cores) stretches the wall clock of an input, never its CPU time.
pub const TIME_LIMIT: Duration = Duration::from_secs(5);

/// A promise an input broke.
#[derive(Debug)]
pub enum Breach {
    Panic(String),
    Heap { peak: usize, bound: usize },
    Time(Duration),
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breach::Panic(m) => write!(f, "panicked: {m}"),
            Breach::Heap { peak, bound } => {
                write!(f, "held {peak} bytes of heap at once (bound {bound})")
            }
            Breach::Time(took) => write!(f, "took {took:?} (limit {TIME_LIMIT:?})"),
        }
    }
}

/// `t` decodes `input`: no panic, its heap and time within bounds.
pub fn run(t: &Target, input: &[u8]) -> Result<(), Breach> {
    let start = thread_cpu();
    let (outcome, peak) = peak_of(|| catch_unwind(AssertUnwindSafe(|| (t.run)(input))));
    let took = thread_cpu().saturating_sub(start);
    if let Err(payload) = outcome {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned());
        return Err(Breach::Panic(message));
    }
    let bound = t.memory.bound(input.len());
    match peak {
        Some(peak) if peak > bound => Err(Breach::Heap { peak, bound }),
        _ if took > TIME_LIMIT => Err(Breach::Time(took)),
        _ => Ok(()),
    }
}

/// The CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the
    // system defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Where the inputs that once broke a target are kept: `fuzz/regressions/<target>/`.
pub fn regressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions")
}

/// The number of random inputs per target in the suite: `CAPFLEET_FUZZ_CASES`, else
/// `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("CAPFLEET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Random inputs per target in the suite when `CAPFLEET_FUZZ_CASES` is not set: a
/// few seconds each on 2 cores.
pub const SUITE_CASES: u32 = 600;

/// A target's two tests in the suite: its random search (a new seed each run, printed
/// so that a failure can be replayed), and the replay of its seeds and kept inputs.
pub fn search_in_suite(t: &Target) {
    let seed = seed();
    eprintln!("CAPFLEET_FUZZ_SEED={seed}");
    search(t, cases(SUITE_CASES), seed, &regressions());
}

/// See [`search_in_suite`]; at least one input (the seeds) is replayed.
pub fn replay_in_suite(t: &Target) {
    assert!(replay(t, &regressions()) > 0, "`{}` has no seed", t.name);
}

/// The search's seed: `CAPFLEET_FUZZ_SEED`, else the clock (a new search each run,
/// and the seed printed so that a failure can be replayed).
pub fn seed() -> u64 {
    std::env::var("CAPFLEET_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
}

/// A random number generator for proptest from a 64-bit seed: xorshift, proptest's
/// default (ChaCha, in an unoptimized build, took a fifth of the time to make an input:
/// proptest seeds a generator for each lazy branch of a strategy).
pub fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(
            &(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes(),
        );
    }
    TestRng::from_seed(RngAlgorithm::XorShift, &bytes)
}

/// `cases` random inputs of `t`. The first that breaks a promise is shrunk, kept under
/// `keep/<target>/` and named in the panic, with the seed that found it.
pub fn search(t: &Target, cases: u32, seed: u64, keep: &Path) {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        max_global_rejects: cases,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng(seed));
    let outcome = runner.run(&inputs(t, SUITE), |input| {
        run(t, &input).map_err(|breach| TestCaseError::fail(breach.to_string()))
    });
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(reason, input)) => {
            let path = keep_input(keep, t.name, &input);
            panic!(
                "fuzz target `{}` {reason} on a {}-byte input (shrunk), kept as {} \
                 (CAPFLEET_FUZZ_SEED={seed} finds it again): {:?}",
                t.name,
                input.len(),
                path.display(),
                String::from_utf8_lossy(&input[..input.len().min(512)]),
            );
        }
        Err(TestError::Abort(why)) => panic!("fuzz target `{}`: search aborted: {why}", t.name),
    }
}

/// Writes `input` under `dir/<target>/` named by its FNV-1a hash; its path.
fn keep_input(dir: &Path, target: &str, input: &[u8]) -> PathBuf {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let dir = dir.join(target);
    let path = dir.join(format!("{hash:016x}.bin"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input)) {
        panic!("keeping the failing input as {}: {e}", path.display());
    }
    path
}

/// Every seed of `t` and every input kept under `keep/<target>/` decodes within the
/// promises; the number of inputs replayed.
pub fn replay(t: &Target, keep: &Path) -> usize {
    let mut inputs: Vec<(String, Vec<u8>)> = t
        .seeds()
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("seed piece {i}"), s))
        .collect();
    if let Ok(dir) = std::fs::read_dir(keep.join(t.name)) {
        for entry in dir {
            let path = entry.expect("regressions entry").path();
            let bytes = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("kept input {}: {e}", path.display()));
            inputs.push((path.display().to_string(), bytes));
        }
    }
    for (name, input) in &inputs {
        if let Err(breach) = run(t, input) {
            panic!("fuzz target `{}` {breach} on {name}", t.name);
        }
    }
    inputs.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_limit_counts_work_not_waiting() {
        let before = thread_cpu();
        std::thread::sleep(Duration::from_millis(300));
        let slept = thread_cpu().saturating_sub(before);
        assert!(
            slept < Duration::from_millis(100),
            "{slept:?} of CPU asleep"
        );
        let before = thread_cpu();
        while thread_cpu().saturating_sub(before) < Duration::from_millis(20) {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        assert!(thread_cpu() > before, "work is counted");
    }
}
