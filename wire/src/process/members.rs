//! Who is in a process group: the one place capfleet reads it (the group kill's
//! settle, [`super::group_alive`], the keeper's last sweep).
//!
//! A group is *finished* once none of its members runs: every one gone, or a zombie.
//! `killpg(pgid, 0)` alone cannot tell, since it succeeds while a zombie is left, and
//! zombies are left in the normal course of things: bubblewrap's outer process exits
//! as soon as its in-sandbox init reports the program's status, without reaping that
//! init, which is re-parented to the machine's init — a zombie in the spawn's group
//! until that init reaps it (seconds later where init reaps on a timer; never in a
//! container whose init does not reap). Counting it as alive held every sandboxed
//! session's end for as long (the group kill waited out its settle).
//!
//! Treating a zombie as gone is right for every group, not only sandboxed ones: a
//! zombie runs no code, holds no memory or descriptors and takes no signal, so
//! nothing of the agent is left to stop. What it still holds is its pid, which keeps
//! the group's number from being reused while it lasts; forgetting the group then
//! (the keeper's [`super::keeper::unregister`]) is safe for the same reason: a
//! later `SIGKILL` of that number reaches only the zombie. A zombie whose parent
//! still runs in the group leaves that parent counted, so the group is not finished
//! before it is.

use std::io;

/// Where a process group stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    /// A member still runs (or may: the group exists and is not ours to read).
    Running,
    /// Members are left, all of them zombies: nothing of the group runs.
    Zombies,
    /// No member left.
    Gone,
}

impl GroupState {
    /// Nothing of the group runs any more.
    pub(crate) fn finished(self) -> bool {
        self != GroupState::Running
    }
}

/// The state of group `pgid`: `killpg(pgid, 0)` first (a gone group costs one
/// system call), then, while it has members, their states from `/proc`.
pub(crate) fn group_state(pgid: i32) -> GroupState {
    match super::signal_group(pgid, 0) {
        Ok(()) => {}
        // EPERM: the group exists but belongs to someone else; it cannot be ours to
        // settle, and whether it runs is not ours to judge.
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => return GroupState::Running,
        Err(_) => return GroupState::Gone,
    }
    if any_running(|g| g == pgid) {
        GroupState::Running
    } else {
        GroupState::Zombies
    }
}

/// Whether a process of a group `wanted` holds runs (zombies and dead entries do
/// not count); one pass over `/proc`.
pub(crate) fn any_running(wanted: impl Fn(i32) -> bool) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // No `/proc` to read: nothing can be told apart, so nothing is finished.
        return true;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| read_stat(pid).ok())
        .any(|s| s.running() && wanted(s.pgrp))
}

/// The fields of `/proc/PID/stat` read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// The state letter: `R`, `S`, `D`, `T`, ..., `Z` (zombie), `X` (dead).
    pub(crate) state: char,
    pub(crate) pgrp: i32,
}

impl Stat {
    fn running(self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// `/proc/PID/stat` of `pid` (an error once it is reaped).
pub(crate) fn read_stat(pid: u32) -> io::Result<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::other(format!("/proc/{pid}/stat unreadable")))
}

/// `pid (comm) state ppid pgrp …`: `comm` may hold spaces and parentheses, so the
/// fields are counted from its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let pgrp = f.nth(1)?.parse().ok()?;
    Some(Stat { state, pgrp })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_past_a_command_name_with_parentheses() {
        let line = "4242 (a) b (c)) Z 1 4240 4240 0 -1 4194564 0 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'Z',
                pgrp: 4240
            })
        );
        assert_eq!(parse_stat("4242 (a"), None);
    }
}
