//! A command and its enforcer, started as `electctl run` starts them: the command
//! leads a process group of its own, and the enforcer watches it through a pidfd and
//! the stop timer `timers`. Shared by tests/enforcer.rs and tests/review21.rs.

use electd::supervise::StopTimers;
use electd::supervise::enforce::Enforcer;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// Starts `argv` in a process group of its own, then the enforcer `exe __enforce` for
/// it with `grace` from SIGTERM to SIGKILL.
pub fn start_enforced(
    exe: &Path,
    timers: &StopTimers,
    grace: Duration,
    argv: &[&str],
) -> (Child, Enforcer) {
    let cmd = Command::new(argv[0])
        .args(&argv[1..])
        .process_group(0)
        .spawn()
        .expect("command");
    // SAFETY: pidfd_open on our child's pid; a non-negative result is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, cmd.id() as libc::pid_t, 0) };
    assert!(fd >= 0, "pidfd_open");
    // SAFETY: a fresh descriptor.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let e = Enforcer::start_with(exe, cmd.id(), Some(&pidfd), grace, timers).expect("enforcer");
    (cmd, e)
}
