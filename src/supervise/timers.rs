//! The stop timers of `electctl run` (issue 25): two CLOCK_BOOTTIME timerfds, one that
//! fires at the SIGTERM instant of the lease end and one at its SIGKILL instant
//! ([`super::lease::stop_at`]).
//!
//! `run` makes them once and passes them to the daemon with SCM_RIGHTS on `supervise`;
//! the daemon re-arms them at every renewal from its own lease end, so a steady leader's
//! `run` and enforcer sleep through renewals. A daemon that does not take them (older,
//! or it refused them) sends every renewal as a line, and `run` arms them itself from
//! each line. `run` and its enforcer only poll them and never read them (a read by one
//! would clear the expiry the other waits for); each stops watching a timer once it has
//! acted on it, and a later arming clears the expiry.
//!
//! Whoever arms them arms only instants derived from a lease end the daemon holds, so a
//! stopped, blocked or killed `run` or daemon leaves them at the last one (S5).

use super::lease::StopAt;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// CLOCK_BOOTTIME as `/proc/PID/fdinfo` of a timerfd names it (`clockid: 7`).
const BOOTTIME_ID: &str = "7";

/// The stop timers: SIGTERM and SIGKILL instants of the last lease end armed.
#[derive(Debug)]
pub struct StopTimers {
    term: OwnedFd,
    kill: OwnedFd,
}

/// Why descriptors passed with `supervise` were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimersRefused {
    /// Not two descriptors.
    Count(usize),
    /// Descriptor `i` (0: SIGTERM, 1: SIGKILL) is no timerfd.
    NotATimer(usize),
    /// Descriptor `i` is a timerfd on another clock than CLOCK_BOOTTIME.
    NotBootClock(usize),
}

impl std::fmt::Display for TimersRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimersRefused::Count(n) => write!(
                f,
                "supervise: stop timers refused: {n} descriptors passed, 2 expected (SIGTERM and SIGKILL timerfds)"
            ),
            TimersRefused::NotATimer(i) => write!(
                f,
                "supervise: stop timers refused: descriptor {i} passed is not a timerfd"
            ),
            TimersRefused::NotBootClock(i) => write!(
                f,
                "supervise: stop timers refused: descriptor {i} passed is not a CLOCK_BOOTTIME timerfd"
            ),
        }
    }
}

fn boot_timer() -> std::io::Result<OwnedFd> {
    // SAFETY: timerfd_create returns a new descriptor or -1.
    let fd = unsafe {
        libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The time left before `fd` fires (zero: fired, or never armed); None: no timerfd.
fn left(fd: RawFd) -> Option<Duration> {
    // SAFETY: an all-zero itimerspec is valid; timerfd_gettime fills it.
    let mut cur: libc::itimerspec = unsafe { std::mem::zeroed() };
    // SAFETY: timerfd_gettime writes one itimerspec; EINVAL if `fd` is no timerfd.
    if unsafe { libc::timerfd_gettime(fd, &mut cur) } != 0 {
        return None;
    }
    let v = cur.it_value;
    Some(Duration::new(v.tv_sec as u64, v.tv_nsec as u32))
}

/// Arms `fd` for the boot-clock instant `at_ns` (absolute; 0 would disarm, so at least 1).
fn arm_at(fd: RawFd, at_ns: u64) -> std::io::Result<()> {
    let at = at_ns.max(1);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            tv_nsec: (at % 1_000_000_000) as libc::c_long,
        },
    };
    // SAFETY: timerfd_settime on a timerfd with a valid itimerspec.
    let r =
        unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The clock of the timerfd `fd` of this process, as its fdinfo names it.
fn clock_of(fd: RawFd) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("clockid:"))
        .map(|v| v.trim().to_string())
}

impl StopTimers {
    /// Two fresh, disarmed CLOCK_BOOTTIME timers (close-on-exec, non-blocking).
    pub fn create() -> std::io::Result<StopTimers> {
        Ok(StopTimers {
            term: boot_timer()?,
            kill: boot_timer()?,
        })
    }

    /// The timers passed with a `supervise` (SIGTERM's first): exactly two
    /// CLOCK_BOOTTIME timerfds, taken out of `fds`, or refused (then `fds` is left as
    /// it was: the caller closes them, off the event loop, as they may be anything).
    pub fn from_passed(fds: &mut Vec<OwnedFd>) -> Result<StopTimers, TimersRefused> {
        if fds.len() != 2 {
            return Err(TimersRefused::Count(fds.len()));
        }
        for (i, fd) in fds.iter().enumerate() {
            if left(fd.as_raw_fd()).is_none() {
                return Err(TimersRefused::NotATimer(i));
            }
            if clock_of(fd.as_raw_fd()).as_deref() != Some(BOOTTIME_ID) {
                return Err(TimersRefused::NotBootClock(i));
            }
        }
        let kill = fds.pop().expect("two");
        let term = fds.pop().expect("two");
        Ok(StopTimers { term, kill })
    }

    /// Arms both timers for `at` (SIGKILL's first: a process that looks between the two
    /// calls never sees a SIGTERM instant later than the SIGKILL one it knows).
    pub fn arm(&self, at: StopAt) -> std::io::Result<()> {
        arm_at(self.kill.as_raw_fd(), at.kill_ns)?;
        arm_at(self.term.as_raw_fd(), at.term_ns)
    }

    /// True while the SIGTERM instant has not come: the lease last armed leaves room
    /// for the grace (false before any arming).
    pub fn room(&self) -> bool {
        left(self.term.as_raw_fd()).is_some_and(|d| !d.is_zero())
    }

    /// True once the SIGKILL instant has come (or nothing was ever armed).
    pub fn kill_due(&self) -> bool {
        left(self.kill.as_raw_fd()).is_none_or(|d| d.is_zero())
    }

    /// The time left before the SIGKILL instant (for log lines).
    pub fn kill_in(&self) -> Duration {
        left(self.kill.as_raw_fd()).unwrap_or_default()
    }

    /// The SIGTERM timer's descriptor (to poll, to pass on).
    pub fn term_fd(&self) -> RawFd {
        self.term.as_raw_fd()
    }

    /// The SIGKILL timer's descriptor (to poll, to pass on).
    pub fn kill_fd(&self) -> RawFd {
        self.kill.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_descriptors_must_be_two_boot_clock_timers() {
        let t = StopTimers::create().unwrap();
        assert!(!t.room() && t.kill_due(), "disarmed: no room");
        let now = crate::time::boot_now().as_nanos();
        t.arm(StopAt {
            term_ns: now + 1_000_000_000,
            kill_ns: now + 2_000_000_000,
        })
        .unwrap();
        assert!(t.room() && !t.kill_due());
        let dup = |fd: RawFd| {
            // SAFETY: F_DUPFD_CLOEXEC of our own descriptor; the copy is ours.
            unsafe { OwnedFd::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0)) }
        };
        let ok = StopTimers::from_passed(&mut vec![dup(t.term_fd()), dup(t.kill_fd())]).unwrap();
        assert!(ok.room(), "the same timers");
        assert_eq!(
            StopTimers::from_passed(&mut vec![dup(t.term_fd())]).unwrap_err(),
            TimersRefused::Count(1)
        );
        let mut p = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let e = StopTimers::from_passed(&mut vec![dup(t.term_fd()), r]).unwrap_err();
        assert_eq!(e, TimersRefused::NotATimer(1));
        assert!(e.to_string().contains("not a timerfd"), "{e}");
        drop(w);
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let mono = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        assert!(mono >= 0);
        // SAFETY: a fresh descriptor.
        let mono = unsafe { OwnedFd::from_raw_fd(mono) };
        assert_eq!(
            StopTimers::from_passed(&mut vec![mono, dup(t.kill_fd())]).unwrap_err(),
            TimersRefused::NotBootClock(0)
        );
    }
}
