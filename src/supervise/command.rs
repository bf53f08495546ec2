//! The command's process lifecycle: start it in a process group of its own with its
//! lease enforcer, reap it, SIGTERM on a planned stop or near the lease end, SIGKILL
//! after the grace, and the backoff between restarts.

use super::Supervisor;
use super::enforce::{Enforcer, LEASE_ENDED};
use super::lease::MARGIN;
use crate::time::boot_now;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the process group of a child we started and have not reaped.
    unsafe { libc::kill(-(child.id() as i32), sig) };
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), if available.
pub(super) fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(super) struct Running {
    child: Child,
    pub(super) exit_fd: Option<OwnedFd>,
    term: u64,
    started: Instant,
    /// SIGTERM was sent: SIGKILL at this boot-clock time unless it exits first.
    pub(super) kill_at_ns: Option<u64>,
    /// The process that stops the command by the lease end even if this one stalls.
    pub(super) enforcer: Option<Enforcer>,
}

impl Supervisor<'_> {
    /// Records an exit of the command (or a failure to start it) for --max-restarts.
    fn count_exit(&mut self) {
        if let Some(w) = self.restarts.as_mut() {
            w.exit(Instant::now());
        }
    }

    pub(super) fn reap(&mut self) {
        let Some(r) = self.running.as_mut() else {
            return;
        };
        if r.exit_fd.is_some() && self.ready.is_some_and(|w| !w.child) {
            // Its pidfd was not readable: it had not exited when ppoll returned.
            return;
        }
        // SAFETY: waitid with WNOWAIT only looks: the exited leader stays a zombie, so
        // its process group id cannot be reused before the group is killed below.
        let exited = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                r.child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            ) == 0
                && info.si_pid() != 0
        };
        if !exited {
            return;
        }
        // Nothing of its process group may outlive it: the confirmation says "exited".
        signal_group(&r.child, libc::SIGKILL);
        if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
            self.retired.push(e);
        }
        let status = match r.child.wait() {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        say!(
            "command of term {} exited ({status}) after {:?}",
            r.term,
            r.started.elapsed()
        );
        // Stopped by the enforcer (this process was stopped or blocked past the time
        // it owed the SIGTERM), or on a stop this process has only just learned of, is
        // not an exit by itself: no backoff, and it does not count for --max-restarts.
        let lease_ending = !self.timers.room();
        let by_itself = r.kill_at_ns.is_none() && self.leader && !lease_ending;
        if by_itself {
            // It exited by itself while leader: restart later, with a doubling backoff.
            if r.started.elapsed() > Duration::from_secs(10) {
                self.backoff = Duration::from_millis(100);
            }
            self.next_start = Instant::now() + self.backoff;
            self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
        }
        self.running = None;
        if by_itself {
            self.count_exit();
        }
    }

    /// Hands the lease end on to the enforcer; a command whose enforcer is gone is
    /// stopped as on a planned stop (nothing would stop it if this process stalled).
    /// Reaps retired enforcers.
    pub(super) fn watch_enforcer(&mut self) {
        self.retired.retain_mut(|e| !e.exited());
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let Some(e) = r.enforcer.as_mut() else {
            return;
        };
        let quiet = e.exit_fd().is_some() && self.ready.is_some_and(|w| !w.enforcer);
        if !quiet && e.exited() {
            r.enforcer = None;
            if r.kill_at_ns.is_none() {
                self.enforcer_lost = true;
            }
        }
    }

    /// SIGTERM on a planned stop or near the lease end; SIGKILL after the grace or at
    /// `MARGIN` before the lease end, whichever comes first. Signals go first, log
    /// lines after (and those never block).
    pub(super) fn enforce(&mut self) {
        let grace_ns = crate::time::duration_nanos(self.opts.grace);
        let Some(r) = self.running.as_mut() else {
            return;
        };
        let now = boot_now().as_nanos();
        if r.kill_at_ns.is_none() {
            let why = if self.stopping {
                "electctl run is stopping"
            } else if !self.leader {
                "electd no longer leads"
            } else if self.enforcer_lost {
                "the lease enforcer process exited"
            } else if !self.timers.room() {
                "the lease ends without a renewal"
            } else {
                return;
            };
            // After the grace, or at the SIGKILL timer if that comes first (below).
            let kill_at = now + grace_ns;
            if let Some(e) = r.enforcer.as_mut() {
                e.terminating();
            }
            signal_group(&r.child, libc::SIGTERM);
            r.kill_at_ns = Some(kill_at);
            let left = self.timers.kill_in() + MARGIN;
            say!(
                "{why}: SIGTERM to the command of term {} (lease {} ms left, SIGKILL in {} ms unless it exits)",
                r.term,
                left.as_millis(),
                (self.timers.kill_in().as_nanos() as u64).min(grace_ns) / 1_000_000
            );
        }
        if r.kill_at_ns
            .is_some_and(|k| now >= k || self.timers.kill_due())
        {
            signal_group(&r.child, libc::SIGKILL);
            let term = r.term;
            let _ = r.child.wait();
            if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
                self.retired.push(e);
            }
            self.running = None;
            say!("the command of term {term} did not exit in time: SIGKILL");
        }
    }

    pub(super) fn maybe_start(&mut self) {
        if self.running.is_some()
            || self.stopping
            || !self.leader
            || self.checked.is_none()
            || !self.timers.room()
            || Instant::now() < self.next_start
        {
            return;
        }
        // The enforcer first, so that the command's own process can hand itself over
        // before its exec (`Enforcer::guard`): whatever happens to this process from
        // here on, no command runs that its enforcer does not hold.
        let enforcer = match Enforcer::start(self.opts.grace, &self.timers) {
            Ok(e) => e,
            Err(e) => {
                // Nothing would stop it if this process stalled: not started.
                say!("cannot start the lease enforcer ({e}): the command was not started");
                self.next_start = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
                self.count_exit();
                return;
            }
        };
        let argv = &self.opts.argv;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("ELECTD_TERM", self.term.to_string())
            .env("ELECTD_GROUP", self.group.as_deref().unwrap_or("default"))
            .env("ELECTD_ROLE", "leader")
            .process_group(0);
        enforcer.guard(&mut cmd, &self.timers);
        match cmd.spawn() {
            Ok(child) => {
                let exit_fd = pidfd(child.id());
                self.enforcer_lost = false;
                say!(
                    "leader in term {} ({} ms of lease left): started pid {}",
                    self.term,
                    (self.timers.kill_in() + MARGIN).as_millis(),
                    child.id()
                );
                self.running = Some(Running {
                    exit_fd,
                    child,
                    term: self.term,
                    started: Instant::now(),
                    kill_at_ns: None,
                    enforcer: Some(enforcer),
                });
            }
            Err(e) => {
                if let Some(e) = enforcer.retire() {
                    self.retired.push(e);
                }
                if e.raw_os_error() == Some(LEASE_ENDED) {
                    // This process was held between its look and the command's exec:
                    // no exit of the command, and no start until a renewal gives room.
                    say!(
                        "the lease of term {} ended before the command's exec: not started",
                        self.term
                    );
                    return;
                }
                say!("cannot start {}: {e}", argv[0]);
                self.next_start = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
                self.count_exit();
            }
        }
    }
}
