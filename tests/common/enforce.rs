//! A command and its enforcer, started as `electctl run` starts them: the enforcer
//! first, then the command, which leads a process group of its own and announces
//! itself to the enforcer before its exec; the enforcer sleeps on the stop timer
//! `timers`. Shared by tests/enforcer.rs and tests/review21.rs.

use electd::supervise::StopTimers;
use electd::supervise::enforce::Enforcer;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// Starts the enforcer `exe __enforce` with `grace` from SIGTERM to SIGKILL, then
/// `argv` in a process group of its own, handed over to it as `run` does
/// ([`Enforcer::guard`]).
pub fn start_enforced(
    exe: &Path,
    timers: &StopTimers,
    grace: Duration,
    argv: &[&str],
) -> (Child, Enforcer) {
    let e = Enforcer::start_with(exe, grace, timers).expect("enforcer");
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]).process_group(0);
    e.guard(&mut cmd, timers);
    (cmd.spawn().expect("command"), e)
}
