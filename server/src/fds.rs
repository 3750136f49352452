//! The server's file descriptors: at start its soft `RLIMIT_NOFILE` is raised to the
//! hard limit (systemd's and most shells' soft 1024 is far below what a server
//! holding sockets and agents needs), and the connection cap is set from it so that
//! clients can never take the descriptors the runs need (journals, agents' pipes and
//! terminals, workspaces): [`reserve`] of them are kept out of the cap's reach.

/// The highest soft limit asked for when the hard one is unlimited.
const UNLIMITED_SOFT: u64 = 1 << 20;
/// The default cap, at most, however high the limit.
const DEFAULT_CAP_MAX: usize = 16_384;
/// The cap, at least (a limit too low for it is the operator's to raise).
const CAP_MIN: usize = 16;

/// Raise the soft open-file limit to the hard one; the soft limit now (the old one
/// when it cannot be raised).
pub(crate) fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } != 0 {
        return UNLIMITED_SOFT;
    }
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        UNLIMITED_SOFT
    } else {
        lim.rlim_max
    };
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit(2) reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } == 0 {
            return target;
        }
    }
    lim.rlim_cur
}

/// The descriptors kept for the runs and the server's own files: the server's (its
/// listener, logs, token file, runtime) and, per session the server may run at once,
/// its agent's pipes or terminal, its journal share and workspace.
pub(crate) fn reserve(max_sessions: usize) -> u64 {
    64 + 8 * max_sessions as u64
}

/// The connection cap for the open-file `limit` with `reserved` descriptors kept:
/// `asked` (`--max-connections`) or half the limit, never past what the reserve
/// leaves; and, when `asked` had to be lowered, why.
pub(crate) fn connection_cap(
    asked: Option<usize>,
    limit: u64,
    reserved: u64,
) -> (usize, Option<String>) {
    let room = usize::try_from(limit.saturating_sub(reserved))
        .unwrap_or(usize::MAX)
        .max(CAP_MIN);
    match asked {
        Some(n) if n > room => (
            room,
            Some(format!(
                "--max-connections {n} lowered to {room}: the open-file limit is {limit} and the runs keep {reserved}"
            )),
        ),
        Some(n) => (n.max(1), None),
        None => {
            let half = usize::try_from(limit / 2).unwrap_or(usize::MAX);
            (half.min(DEFAULT_CAP_MAX).min(room).max(CAP_MIN), None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_runs_their_descriptors() {
        let reserved = reserve(64);
        assert_eq!(reserved, 576);
        // systemd's soft 1024: half would be 512, the reserve leaves 448.
        assert_eq!(connection_cap(None, 1024, reserved), (448, None));
        assert_eq!(connection_cap(None, 4096, reserved), (2048, None));
        assert_eq!(connection_cap(None, 1 << 20, reserved), (16_384, None));
        let (cap, why) = connection_cap(Some(5000), 1024, reserved);
        assert_eq!(cap, 448);
        assert!(why.unwrap().contains("lowered to 448"));
        assert_eq!(connection_cap(Some(100), 1024, reserved), (100, None));
        assert_eq!(connection_cap(None, 100, reserved).0, CAP_MIN);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let soft = raise_nofile();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit(2) writes the struct we own.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) },
            0
        );
        assert_eq!(lim.rlim_cur, soft);
        assert!(lim.rlim_max == libc::RLIM_INFINITY || lim.rlim_cur == lim.rlim_max);
    }
}
