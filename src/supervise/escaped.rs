//! Processes of the command that left its process group (`setsid`, a daemonizing
//! double fork, a shell's job control): the group signals of a stop do not reach them,
//! so they would run on after the lease (the twenty-third round's review).
//!
//! `run` is a child subreaper (PR_SET_CHILD_SUBREAPER): an orphan of the command's
//! tree is adopted by `run`, not by init, so every process the command started stays
//! a descendant of `run`. At each stop, `run` signals its descendants outside the
//! command's group as it signals the group, and it reaps the adopted ones that exit.
//! The enforcer does the same for a stalled `run`, from `run`'s pid (its parent's,
//! while that is still `run`).
//! A process that leaves `run`'s tree entirely (it would have to be started by
//! something else) is beyond it; a cgroup would hold those too.

use std::collections::HashMap;

/// One process, from /proc/PID/stat.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Proc {
    pub(super) pid: i32,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
}

/// At most this many processes are looked at (a bound on the walk).
const MAX_PROCS: usize = 1 << 20;

/// Parses the fields after the command name: state, ppid, pgrp.
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    // The command name may hold spaces and parentheses: the last ')' ends it.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let _state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Proc { pid, ppid, pgrp })
}

/// Every process now (bounded); those that vanish meanwhile are skipped.
fn all() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .take(MAX_PROCS)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &stat)
        })
        .collect()
}

/// The descendants of `root` in `procs`, leaving out `skip` and theirs.
fn below(procs: &[Proc], root: i32, skip: &[i32]) -> Vec<Proc> {
    let mut kids: HashMap<i32, Vec<Proc>> = HashMap::new();
    for p in procs {
        kids.entry(p.ppid).or_default().push(*p);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for k in kids.get(&p).into_iter().flatten() {
            // A pid seen twice (a loop in a racy snapshot) is not walked again.
            if skip.contains(&k.pid) || k.pid == root || out.iter().any(|o: &Proc| o.pid == k.pid) {
                continue;
            }
            out.push(*k);
            todo.push(k.pid);
        }
    }
    out
}

/// Sends `sig` to every descendant of this process outside the process group `pgid`
/// (not to `skip`: the enforcers, nor below them); the pids signalled. Walked again
/// until a pass finds none new (one may fork meanwhile), at most four times.
pub(super) fn signal_outside(pgid: i32, skip: &[i32], sig: i32) -> Vec<i32> {
    // SAFETY: getpid(2) cannot fail.
    signal_outside_of(unsafe { libc::getpid() }, pgid, skip, sig)
}

/// As [`signal_outside`], for the descendants of `root` (the enforcer: of its `run`).
pub(super) fn signal_outside_of(root: i32, pgid: i32, skip: &[i32], sig: i32) -> Vec<i32> {
    let mut done: Vec<i32> = Vec::new();
    for _ in 0..4 {
        let new: Vec<i32> = below(&all(), root, skip)
            .into_iter()
            .filter(|p| p.pgrp != pgid && !done.contains(&p.pid))
            .map(|p| p.pid)
            .collect();
        if new.is_empty() {
            break;
        }
        for &p in &new {
            // SAFETY: kill(2) on a descendant of this process (a process of the
            // command's tree, which this process started).
            unsafe { libc::kill(p, sig) };
        }
        done.extend(new);
    }
    done
}

/// Makes this process a child subreaper, so orphans of the command's tree are adopted
/// by it (and stay its descendants).
pub(super) fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl(2) with an integer argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reaps exited children that are none of `known` (adopted orphans); bounded. Stops at
/// the first exited child that is known (its own path reaps it).
pub(super) fn reap_adopted(known: &[i32]) {
    for _ in 0..64 {
        // SAFETY: waitid with WNOWAIT only looks at an exited child of ours.
        let pid = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            if libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            ) != 0
            {
                return;
            }
            info.si_pid()
        };
        if pid == 0 || known.contains(&pid) {
            return;
        }
        let mut status = 0;
        // SAFETY: waitpid on an exited child of ours that nothing else reaps.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        assert_eq!(
            parse_stat(7, "7 (sleep) S 1 7 7 0 -1 4194560"),
            Some(Proc {
                pid: 7,
                ppid: 1,
                pgrp: 7
            })
        );
        assert_eq!(
            parse_stat(9, "9 (a) b (c) R 3 4 4 0").map(|p| (p.ppid, p.pgrp)),
            Some((3, 4))
        );
        assert_eq!(parse_stat(9, "9 (x"), None);
        assert_eq!(parse_stat(9, "9 (x) S y 4"), None);
    }

    #[test]
    fn descendants_skip_the_enforcer_and_what_is_below_it() {
        let p = |pid, ppid| Proc {
            pid,
            ppid,
            pgrp: pid,
        };
        let procs = [
            p(10, 1),
            p(11, 10),
            p(12, 11),
            p(13, 10),
            p(14, 13),
            p(20, 1),
        ];
        let mut got: Vec<i32> = below(&procs, 10, &[13]).iter().map(|p| p.pid).collect();
        got.sort();
        assert_eq!(got, vec![11, 12]);
        // A racy snapshot with a loop terminates.
        let looped = [p(1, 2), p(2, 1)];
        assert!(below(&looped, 1, &[]).len() <= 2);
    }
}
