//! What the supervisor blocks on and for how long: ppoll(2) on the daemon's socket, the
//! command's and the enforcer's exits, the stop timer that is next due for a running
//! command, its own signals through a self-pipe, and a blocked stderr, with a timeout
//! equal to the next thing it must do.

use super::Supervisor;
use super::enforce::Enforcer;
use super::log;
use super::restarts::RestartWindow;
use crate::time::boot_now;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Re-check the command this often when no pidfd could be opened.
const CHILD_TICK: Duration = Duration::from_millis(10);

/// The longest ppoll(2): a `run` at rest (leader or not) wakes this often for nothing.
pub(super) const IDLE_WAKEUP: Duration = Duration::from_secs(60);

/// The write end of the self-pipe the signal handler writes to (-1: none).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::SeqCst);
    if fd >= 0 {
        // The byte says which: SIGCHLD only wakes the loop (an adopted orphan to reap).
        let b = [if sig == libc::SIGCHLD { b'c' } else { b's' }];
        // SAFETY: write(2) is async-signal-safe; a full pipe only loses a duplicate
        // (the pipe is drained whole at each wakeup, so a stop byte is never lost
        // behind a full pipe of SIGCHLD bytes for long: see `wait`).
        unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
    }
}

/// SIGTERM and SIGINT wake the loop through a pipe: no wakeup is lost between a check
/// and the wait.
pub(super) fn signal_pipe() -> Result<OwnedFd, String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    SIGNAL_PIPE.store(fds[1], Ordering::SeqCst);
    // SAFETY: installing an async-signal-safe handler (one write to the pipe).
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGCHLD, on_signal as *const () as libc::sighandler_t);
    }
    // SAFETY: fds[0] is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fds[0]) })
}

/// Which of the descriptors a ppoll(2) watched were ready when it returned: a step
/// skips the system calls that could only say "nothing yet" (a read that returns
/// EAGAIN, a waitid or wait4 of a process whose pidfd is not readable). ppoll is
/// level-triggered, so what turns ready after it returned wakes the next one at once.
/// Saves 3 of the 6 system calls of a leader's `run` per renewal line (issue 25).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ready {
    /// The daemon's socket (readable, closed or failed).
    pub(super) conn: bool,
    /// The command's pidfd (it exited).
    pub(super) child: bool,
    /// The enforcer's pidfd (it exited).
    pub(super) enforcer: bool,
    /// The exec pipe of a command being started (it exec'd or gave up).
    pub(super) exec: bool,
}

impl Supervisor<'_> {
    /// How long to block: until the next thing this supervisor must do.
    fn timeout(&self) -> Duration {
        let now_ns = boot_now().as_nanos();
        let after_ns = |t: u64| Duration::from_nanos(t.saturating_sub(now_ns));
        let now = Instant::now();
        // A backstop only: with a connection, everything comes as an event (see
        // `conn::Conn`: the daemon is never asked again), so a `run` at rest wakes once
        // a minute for nothing.
        let mut t = IDLE_WAKEUP;
        if self.conn.is_none() {
            t = t.min(self.next_connect.saturating_duration_since(now));
        }
        match &self.running {
            Some(r) => {
                // The lease end comes through the stop timers (watched in `wait`).
                if let Some(k) = r.kill_at_ns {
                    t = t.min(after_ns(k));
                }
                if let Some(d) = r.start_deadline() {
                    t = t.min(d.saturating_duration_since(now));
                }
                let enforcer_fd = r.enforcer.as_ref().map(Enforcer::exit_fd);
                if r.exit_fd.is_none() || enforcer_fd.is_some_and(|f| f.is_none()) {
                    t = t.min(CHILD_TICK);
                }
            }
            // A start is due only with room on the lease: without, the renewal that
            // gives it comes as a line (review of the one stop timer: a frozen daemon
            // made this a zero timeout, and `run` spun). An enforcer started and not
            // yet exec'd wakes this process through its exec pipe (below), or at its
            // limit.
            None if self.leader && self.timers.room() => {
                t = t.min(self.next_start.saturating_duration_since(now));
                if let Some(d) = self
                    .next_enforcer
                    .as_ref()
                    .and_then(Enforcer::exec_deadline)
                {
                    t = t.min(d.saturating_duration_since(now));
                }
            }
            None => {}
        }
        if let Some(at) = self.restarts.as_ref().and_then(RestartWindow::clears_at) {
            t = t.min(at.saturating_duration_since(now));
        }
        if !self.retired.is_empty() || !self.dying.is_empty() {
            t = t.min(CHILD_TICK);
        }
        t
    }

    /// Blocks in ppoll(2) on the daemon, the command's exit and our own signals.
    pub(super) fn wait(&mut self, sig: &OwnedFd) {
        let t = self.timeout();
        let mut fds = vec![libc::pollfd {
            fd: sig.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let at = |fds: &mut Vec<libc::pollfd>, fd: i32| {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            Some(fds.len() - 1)
        };
        let conn_at = self
            .conn
            .as_ref()
            .and_then(|c| at(&mut fds, c.stream.as_raw_fd()));
        let child_at = self
            .running
            .as_ref()
            .and_then(|r| r.exit_fd.as_ref())
            .and_then(|fd| at(&mut fds, fd.as_raw_fd()));
        // A running command's next stop instant: the stop timer until SIGTERM is sent,
        // then SIGKILL's (the alarm once the stop timer fired: a fired timer stays
        // readable, and is not watched once acted on).
        let _ = match self.running.as_ref().map(|r| r.kill_at_ns.is_some()) {
            Some(false) => at(&mut fds, self.timers.fd()),
            Some(true) => at(&mut fds, self.timers.kill_fd()),
            None => None,
        };
        let exec_at = self
            .running
            .as_ref()
            .and_then(|r| r.starting.as_ref())
            .and_then(|st| at(&mut fds, st.fd.as_raw_fd()));
        let next_at = self
            .next_enforcer
            .as_ref()
            .and_then(Enforcer::exec_fd)
            .and_then(|fd| at(&mut fds, fd));
        let enforcer = self.running.as_ref().and_then(|r| r.enforcer.as_ref());
        let enforcer_at = enforcer
            .and_then(Enforcer::exit_fd)
            .and_then(|fd| at(&mut fds, fd.as_raw_fd()));
        if let Some(fd) = log::flush() {
            // Lines wait for stderr: wake when it takes writes again.
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            });
        }
        let ts = libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of pollfd for the call; the mask is null.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        // A failed ppoll (EINTR) says nothing: the next step looks at everything. A
        // descriptor not watched (None) is looked at too.
        let ready = |i: Option<usize>| i.is_none_or(|i| fds[i].revents != 0);
        self.ready = (n >= 0).then(|| Ready {
            conn: ready(conn_at),
            child: ready(child_at),
            enforcer: ready(enforcer_at),
            exec: ready(exec_at) || next_at.is_some_and(|i| fds[i].revents != 0),
        });
        if fds[0].revents != 0 {
            let mut b = [0u8; 16];
            let mut stop = false;
            // Bounded by the pipe's size.
            loop {
                // SAFETY: reading into a local buffer from our non-blocking pipe.
                let n = unsafe { libc::read(sig.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
                if n <= 0 {
                    break;
                }
                stop |= b[..n as usize].contains(&b's');
            }
            if !stop {
                return;
            }
            if !self.stopping {
                say!("signal received: stopping");
            }
            self.stopping = true;
        }
    }
}
