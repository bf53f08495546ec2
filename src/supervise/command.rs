//! The command's process lifecycle: start it in a process group of its own with its
//! lease enforcer, reap it, SIGTERM on a planned stop or near the lease end, SIGKILL
//! after the grace, and the backoff between restarts.

use super::Supervisor;
use super::enforce::{Enforcer, LEASE_ENDED};
use super::lease::MARGIN;
use super::spawn::{Outcome, Prepared, Setup, Starting, reaped, spawn};
use super::timers::StopTimers;
use crate::time::boot_now;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How long the command's process may take from its fork to its exec (a few system
/// calls): one held longer (a debugger, a SIGSTOP) is killed and counts as a failed
/// start, so a leader does not go without its processor for ever.
pub(super) const START_LIMIT: Duration = Duration::from_secs(10);

fn signal_group(pid: libc::pid_t, sig: i32) {
    // SAFETY: kill(2) on the process group of a child we started and have not reaped.
    unsafe { libc::kill(-pid, sig) };
}

/// Reaps our child `pid` (blocking: call it once it has exited or was SIGKILLed).
fn wait_for(pid: libc::pid_t) -> std::io::Result<ExitStatus> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid(2) on a child of ours that nothing else reaps.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// True if our child `pid` has exited (it is left to be reaped), without blocking.
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: waitid with WNOWAIT only looks at our child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        ) == 0
            && info.si_pid() != 0
    }
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), if available.
pub(super) fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(super) struct Running {
    /// The command's process (and process group).
    pid: libc::pid_t,
    /// Before its exec: the pipe that says when it exec'd (or why it did not).
    pub(super) starting: Option<Starting>,
    /// It gave up before its exec with this errno (it exits; reaped as a failed start).
    start_error: Option<i32>,
    /// It died before its exec was seen (its exec pipe closed with it).
    unseen: bool,
    pub(super) exit_fd: Option<OwnedFd>,
    term: u64,
    started: Instant,
    /// SIGTERM was sent: SIGKILL at this boot-clock time unless it exits first.
    pub(super) kill_at_ns: Option<u64>,
    /// The process that stops the command by the lease end even if this one stalls.
    pub(super) enforcer: Option<Enforcer>,
}

impl Running {
    /// While it has not exec'd: when it must have (it is killed then).
    pub(super) fn start_deadline(&self) -> Option<Instant> {
        self.starting.as_ref().map(|_| self.started + START_LIMIT)
    }

    /// Reads the exec pipe of a start in progress; true while it is still before its
    /// exec. Once it exec'd, says so; once it gave up, keeps why (reaped later).
    fn settle(&mut self, timers: &StopTimers) -> bool {
        let Some(st) = self.starting.as_ref() else {
            return false;
        };
        match st.outcome() {
            Outcome::Pending => return true,
            // The pipe closes at the exec, or when the process dies before it (the
            // enforcer's SIGKILL at a lease end it saw first): only a live one exec'd.
            Outcome::Execed if exited(self.pid) => self.unseen = true,
            Outcome::Execed => say!(
                "leader in term {} ({} ms of lease left): started pid {}",
                self.term,
                (timers.kill_in() + MARGIN).as_millis(),
                self.pid
            ),
            Outcome::Failed(e) => self.start_error = Some(e),
        }
        self.starting = None;
        false
    }
}

impl Supervisor<'_> {
    /// Records an exit of the command (or a failure to start it) for --max-restarts.
    fn count_exit(&mut self) {
        if let Some(w) = self.restarts.as_mut() {
            w.exit(Instant::now());
        }
    }

    /// The processes that are not the command's: its enforcers and the processes
    /// SIGKILLed before their exec.
    fn not_the_commands(&self) -> Vec<i32> {
        self.retired
            .iter()
            .chain(self.running.iter().filter_map(|r| r.enforcer.as_ref()))
            .map(|e| e.id() as i32)
            .chain(self.dying.iter().copied())
            .collect()
    }

    /// `sig` to the command's group `pgid` and to what the command started outside it
    /// (`escaped`), which is said once per stop.
    fn signal_command(&mut self, pgid: libc::pid_t, sig: i32) {
        signal_group(pgid, sig);
        let skip = self.not_the_commands();
        let out = super::escaped::signal_outside(pgid, &skip, sig);
        if !out.is_empty() {
            say!(
                "{} process(es) of the command outside its process group (pids {out:?}): signal {sig} to them too; a processor should stay in its process group (no setsid, no daemonizing)",
                out.len()
            );
        }
    }

    /// A start that failed: try again after the backoff, and count it.
    fn start_failed(&mut self) {
        self.next_start = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(10));
        self.count_exit();
    }

    /// A start in progress: what its exec pipe says, and one held past [`START_LIMIT`]
    /// before its exec is SIGKILLed (a failed start).
    pub(super) fn watch_start(&mut self) {
        let Some(r) = self.running.as_mut() else {
            return;
        };
        if r.starting.is_none() || (self.ready.is_none_or(|w| w.exec) && !r.settle(&self.timers)) {
            return;
        }
        // At the limit, the pipe is read whatever ppoll said (this process may have
        // stalled since): one that exec'd meanwhile is not killed as a failed start.
        if r.started.elapsed() >= START_LIMIT && r.settle(&self.timers) {
            let (pid, term) = (r.pid, r.term);
            signal_group(pid, libc::SIGKILL);
            self.drop_running();
            say!(
                "the command's process (pid {pid}, term {term}) did not reach its exec within {} s: SIGKILL, and started again later",
                START_LIMIT.as_secs()
            );
            self.start_failed();
        }
    }

    /// Forgets the command (SIGKILLed, or reaped): its process, if not reaped yet, is
    /// reaped later without blocking; its enforcer retires.
    fn drop_running(&mut self) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
            self.retired.push(e);
        }
        if !reaped(r.pid) {
            self.dying.push(r.pid);
        }
    }

    pub(super) fn reap(&mut self) {
        self.dying.retain(|&pid| !reaped(pid));
        // Orphans of the command's tree that this subreaper adopted, once they exit.
        let mut known = self.not_the_commands();
        known.extend(self.running.as_ref().map(|r| r.pid));
        super::escaped::reap_adopted(&known);
        let Some(r) = self.running.as_mut() else {
            return;
        };
        if r.exit_fd.is_some() && self.ready.is_some_and(|w| !w.child) {
            // Its pidfd was not readable: it had not exited when ppoll returned.
            return;
        }
        // Only a look (WNOWAIT): the exited leader stays a zombie, so its process group
        // id cannot be reused before the group is killed below.
        if !exited(r.pid) {
            return;
        }
        // Nothing of its process group, nor of its tree, may outlive it: the
        // confirmation says "exited".
        let pid = r.pid;
        self.signal_command(pid, libc::SIGKILL);
        let Some(r) = self.running.as_mut() else {
            return;
        };
        if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
            self.retired.push(e);
        }
        r.settle(&self.timers);
        let status = match wait_for(r.pid) {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        if let Some(e) = r.start_error {
            let term = r.term;
            self.running = None;
            if e == LEASE_ENDED {
                // This process was held between its look and the command's exec:
                // no exit of the command, and no start until a renewal gives room.
                say!("the lease of term {term} ended before the command's exec: not started");
                return;
            }
            if e == libc::EPIPE {
                // Its hand-over found no enforcer to read it: it did not exec.
                say!("the lease enforcer exited before the command's exec: not started");
            } else {
                say!(
                    "cannot start {}: {}",
                    self.opts.argv[0],
                    std::io::Error::from_raw_os_error(e)
                );
            }
            self.start_failed();
            return;
        }
        if r.unseen {
            say!(
                "the command's process of term {} (pid {}) ended ({status}) before its exec was seen",
                r.term,
                r.pid
            );
        } else {
            say!(
                "command of term {} exited ({status}) after {:?}",
                r.term,
                r.started.elapsed()
            );
        }
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
    /// `MARGIN` before the lease end, whichever comes first. A command's process that
    /// has not exec'd yet is SIGKILLed at once: it has nothing to finish. Signals go
    /// first, log lines after (and those never block).
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
            if r.settle(&self.timers) {
                // Before its exec (it may exec as this is sent: it then dies with the
                // command unstarted or a few microseconds old). Its SIGKILL may wait
                // while a debugger holds it; it runs nothing more, so it is reaped
                // later, without blocking this process.
                let (pid, term) = (r.pid, r.term);
                signal_group(pid, libc::SIGKILL);
                self.drop_running();
                say!(
                    "{why}: SIGKILL to the command's process of term {term} (pid {pid}) before its exec"
                );
                return;
            }
            // After the grace, or at the SIGKILL timer if that comes first (below).
            let kill_at = now + grace_ns;
            if let Some(e) = r.enforcer.as_mut() {
                e.terminating();
            }
            r.kill_at_ns = Some(kill_at);
            let (pid, term) = (r.pid, r.term);
            self.signal_command(pid, libc::SIGTERM);
            let left = self.timers.kill_in() + MARGIN;
            say!(
                "{why}: SIGTERM to the command of term {term} (lease {} ms left, SIGKILL in {} ms unless it exits)",
                left.as_millis(),
                (self.timers.kill_in().as_nanos() as u64).min(grace_ns) / 1_000_000
            );
        }
        let Some(r) = self.running.as_ref() else {
            return;
        };
        if r.kill_at_ns
            .is_some_and(|k| now >= k || self.timers.kill_due())
        {
            let (pid, term) = (r.pid, r.term);
            self.signal_command(pid, libc::SIGKILL);
            let Some(r) = self.running.as_mut() else {
                return;
            };
            let _ = wait_for(r.pid);
            if let Some(e) = r.enforcer.take().and_then(Enforcer::retire) {
                self.retired.push(e);
            }
            self.running = None;
            say!("the command of term {term} did not exit in time: SIGKILL");
        }
    }

    /// An enforcer that is gone from the start, once it has exited.
    fn retire(&mut self, e: Enforcer) {
        if e.exec_deadline().is_some() {
            // Never exec'd (held, or stopped): nothing waits for it.
            // SAFETY: kill(2) on the enforcer this process started and has not reaped.
            unsafe { libc::kill(e.id() as i32, libc::SIGKILL) };
        }
        if let Some(e) = e.retire() {
            self.retired.push(e);
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
            // A start that no longer goes on: its enforcer, if any, goes (its pipe
            // closes before any command announced itself, so it exits).
            if self.running.is_none()
                && let Some(e) = self.next_enforcer.take()
            {
                self.retire(e);
            }
            return;
        }
        let term = self.term.to_string();
        let group = self.group.as_deref().unwrap_or("default");
        let set = [
            ("ELECTD_TERM", term.as_str()),
            ("ELECTD_GROUP", group),
            ("ELECTD_ROLE", "leader"),
        ];
        let argv = &self.opts.argv;
        let mut prepared = match Prepared::new(argv, &set) {
            Ok(p) => p,
            Err(e) => {
                say!("cannot start {}: {e}", argv[0]);
                self.start_failed();
                return;
            }
        };
        // The enforcer first, so that the command's own process can hand itself over
        // before its exec (`Enforcer::handover`): whatever happens to this process from
        // here on, no command runs that its enforcer does not hold. The command is
        // forked once the enforcer has exec'd (it then reads its pipe), which this
        // process does not wait for (review 24): `next_enforcer` until then.
        let Some(mut enforcer) = self.next_enforcer.take() else {
            match Enforcer::start(self.opts.grace, &self.timers) {
                Ok(e) => self.next_enforcer = Some(e),
                Err(e) => {
                    // Nothing would stop it if this process stalled: not started.
                    say!("cannot start the lease enforcer ({e}): the command was not started");
                    self.start_failed();
                }
            }
            return;
        };
        if enforcer.exec_overdue() {
            let pid = enforcer.id();
            // SAFETY: kill(2) on the enforcer this process started and has not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            self.retire(enforcer);
            say!(
                "the lease enforcer (pid {pid}) did not reach its exec within {} s: SIGKILL; the command was not started",
                START_LIMIT.as_secs()
            );
            self.start_failed();
            return;
        }
        if enforcer.exec_deadline().is_some() {
            // Not exec'd yet: its exec pipe wakes this process.
            self.next_enforcer = Some(enforcer);
            return;
        }
        if enforcer.exited() {
            say!("the lease enforcer exited before its exec: the command was not started");
            self.start_failed();
            return;
        }
        // Forked without waiting for its exec (`spawn`): a process held before it does
        // not hold this one; `watch_start` follows it.
        match spawn(
            &mut prepared,
            Setup::Command(&enforcer.handover(&self.timers)),
        ) {
            Ok(st) => {
                self.enforcer_lost = false;
                self.running = Some(Running {
                    pid: st.pid,
                    exit_fd: pidfd(st.pid as u32),
                    starting: Some(st),
                    start_error: None,
                    unseen: false,
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
                say!("cannot start {}: {e}", argv[0]);
                self.start_failed();
            }
        }
    }
}
