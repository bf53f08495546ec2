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
//!
//! The daemon, while it holds a connection's timers, is the only one arming them (`run`
//! arms them only from lines without `"timers":true`, and every line on that connection
//! has it), so it remembers the SIGTERM instant it armed last and orders the next arming
//! from that: two timerfd_settime calls a renewal, no timerfd_gettime (issue 25). The
//! first arming on a connection reads the timer (a previous connection's daemon may have
//! armed it). What is remembered only orders the two calls (SIGTERM at or before SIGKILL
//! in between); the instants armed, which S5 rests on, do not depend on it.

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
    /// The daemon's copy (passed with `supervise`): it arms them alone, so it may order
    /// its armings from `armed_term` rather than read the timer.
    sole_armer: bool,
    /// The SIGTERM instant this process armed last (`sole_armer` only; None: not armed
    /// yet here, or an arming failed half-way).
    armed_term: std::cell::Cell<Option<u64>>,
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

/// Which of the two stop timers is armed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmFirst {
    /// SIGTERM's: the new SIGTERM instant is earlier than the armed one (the instants
    /// move earlier: SIGKILL's first would, for a moment, come before the old SIGTERM).
    Term,
    /// SIGKILL's: the instants move later or stay (SIGTERM's first would, for a
    /// moment, come after the old SIGKILL), or nothing is armed.
    Kill,
}

/// The order that keeps SIGTERM at or before SIGKILL between the two armings, given
/// the SIGTERM instant armed now (`armed_term_ns`, None when disarmed or fired) and the
/// new instants `at` (whose SIGTERM is at or before its SIGKILL). Armed (t0, k0) with
/// t0 <= k0, new (t1, k1) with t1 <= k1: if t1 < t0, SIGTERM's first leaves (t1, k0),
/// and t1 < t0 <= k0; else SIGKILL's first leaves (t0, k1), and t0 <= t1 <= k1.
pub fn arm_order(armed_term_ns: Option<u64>, at: StopAt) -> ArmFirst {
    match armed_term_ns {
        Some(t0) if at.term_ns < t0 => ArmFirst::Term,
        _ => ArmFirst::Kill,
    }
}

impl StopTimers {
    /// Two fresh, disarmed CLOCK_BOOTTIME timers (close-on-exec, non-blocking).
    pub fn create() -> std::io::Result<StopTimers> {
        Ok(StopTimers {
            term: boot_timer()?,
            kill: boot_timer()?,
            sole_armer: false,
            armed_term: std::cell::Cell::new(None),
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
        Ok(StopTimers {
            term,
            kill,
            sole_armer: true,
            armed_term: std::cell::Cell::new(None),
        })
    }

    /// Arms both timers for `at`, in the order [`arm_order`] chooses from the SIGTERM
    /// instant armed now: every state between the two calls (seen by `run` or its
    /// enforcer, or left by a daemon paused or killed between them) keeps SIGTERM at or
    /// before SIGKILL, so the command never gets SIGKILL without its SIGTERM and grace.
    ///
    /// The daemon's copy orders from the SIGTERM instant it armed last, even one that
    /// has fired: [`arm_order`]'s argument holds for any armed pair t0 <= k0, fired or
    /// not (a fired timer reads as disarmed, which is why a read gives None then).
    pub fn arm(&self, at: StopAt) -> std::io::Result<()> {
        let armed = match self.armed_term.take() {
            Some(t0) if self.sole_armer => Some(t0),
            _ => left(self.term.as_raw_fd())
                .filter(|d| !d.is_zero())
                .map(|d| crate::time::boot_now().as_nanos() + d.as_nanos() as u64),
        };
        match arm_order(armed, at) {
            ArmFirst::Term => {
                arm_at(self.term.as_raw_fd(), at.term_ns)?;
                arm_at(self.kill.as_raw_fd(), at.kill_ns)?;
            }
            ArmFirst::Kill => {
                arm_at(self.kill.as_raw_fd(), at.kill_ns)?;
                arm_at(self.term.as_raw_fd(), at.term_ns)?;
            }
        }
        if self.sole_armer {
            self.armed_term.set(Some(at.term_ns.max(1)));
        }
        Ok(())
    }

    /// The SIGTERM instant the daemon's copy armed last, if it remembers one (tests).
    pub fn remembered_term(&self) -> Option<u64> {
        self.armed_term.get()
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

    /// Every intermediate state of an arming keeps SIGTERM at or before SIGKILL, the
    /// instants moving earlier, later, apart or together (review of runtimer: SIGKILL
    /// always first let a paused daemon leave SIGKILL before SIGTERM).
    #[test]
    fn arming_order_keeps_sigterm_first_in_between() {
        let at = |t, k| StopAt {
            term_ns: t,
            kill_ns: k,
        };
        let cases = [
            (at(100, 200), at(50, 80)),   // both earlier, past the old SIGTERM
            (at(100, 200), at(90, 150)),  // both earlier
            (at(100, 200), at(300, 400)), // both later, past the old SIGKILL
            (at(100, 200), at(150, 250)), // both later
            (at(100, 200), at(100, 200)), // the same
            (at(100, 200), at(120, 180)), // inside
            (at(100, 200), at(80, 220)),  // around
        ];
        for (old, new) in cases {
            let order = arm_order(Some(old.term_ns), new);
            let between = match order {
                ArmFirst::Term => at(new.term_ns, old.kill_ns),
                ArmFirst::Kill => at(old.term_ns, new.kill_ns),
            };
            assert!(
                between.term_ns <= between.kill_ns,
                "{old:?} -> {new:?}: {order:?} first leaves {between:?}"
            );
        }
        assert_eq!(arm_order(None, at(1, 2)), ArmFirst::Kill, "nothing armed");
        assert_eq!(arm_order(Some(100), at(50, 80)), ArmFirst::Term);
        // Armed for real: later instants, then earlier, then later; each lands.
        let t = StopTimers::create().unwrap();
        let now = crate::time::boot_now().as_nanos();
        for (a, b) in [(5, 6), (3, 4), (7, 8)] {
            t.arm(at(now + a * 1_000_000_000, now + b * 1_000_000_000))
                .unwrap();
            let term = left(t.term_fd()).unwrap();
            let kill = left(t.kill_fd()).unwrap();
            assert!(term < kill && kill.as_secs() < b, "{term:?} {kill:?}");
        }
    }

    /// The daemon's copy orders its armings from the SIGTERM instant it armed last, not
    /// from a read of the timer (issue 25: one system call fewer a renewal). That is the
    /// order a read gives while the timer has not fired, and once it has, the order
    /// still keeps SIGTERM at or before SIGKILL between the two calls. `run`'s own copy
    /// (it shares the timers with a daemon that may arm them) remembers nothing.
    #[test]
    fn the_daemons_copy_orders_from_what_it_armed() {
        let at = |t: u64, k: u64| StopAt {
            term_ns: t,
            kill_ns: k,
        };
        let mine = StopTimers::create().unwrap();
        let dup = |fd: RawFd| {
            // SAFETY: F_DUPFD_CLOEXEC of our own descriptor; the copy is ours.
            unsafe { OwnedFd::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0)) }
        };
        let daemon =
            StopTimers::from_passed(&mut vec![dup(mine.term_fd()), dup(mine.kill_fd())]).unwrap();
        assert_eq!(daemon.remembered_term(), None, "nothing armed here yet");
        let ms = 1_000_000u64;
        let now = crate::time::boot_now().as_nanos();
        // Later, earlier, the same, then into the past (fired), then earlier still
        // (past), then later again (future).
        let steps = [
            at(now + 5_000 * ms, now + 6_000 * ms),
            at(now + 3_000 * ms, now + 4_000 * ms),
            at(now + 3_000 * ms, now + 4_000 * ms),
            at(
                now.saturating_sub(500 * ms).max(3),
                now.saturating_sub(400 * ms).max(3),
            ),
            at(2, 3),
            at(now + 7_000 * ms, now + 8_000 * ms),
        ];
        let mut armed: Option<StopAt> = None;
        for step in steps {
            if let Some(old) = armed {
                let remembered = daemon.remembered_term();
                assert_eq!(remembered, Some(old.term_ns));
                let read = left(daemon.term_fd())
                    .filter(|d| !d.is_zero())
                    .map(|d| crate::time::boot_now().as_nanos() + d.as_nanos() as u64);
                let order = arm_order(remembered, step);
                if read.is_some() && step.term_ns.abs_diff(old.term_ns) > ms {
                    // Not fired: the read finds the same order (its instant is within
                    // a clock read of the remembered one). For the same instants the
                    // read may land a few us late and choose SIGTERM's first, the
                    // memory SIGKILL's: both leave the same pair in between.
                    assert_eq!(order, arm_order(read, step), "{old:?} -> {step:?}");
                }
                let between = match order {
                    ArmFirst::Term => at(step.term_ns, old.kill_ns),
                    ArmFirst::Kill => at(old.term_ns, step.kill_ns),
                };
                assert!(
                    between.term_ns <= between.kill_ns,
                    "{old:?} -> {step:?}: {order:?} first leaves {between:?}"
                );
            }
            daemon.arm(step).unwrap();
            armed = Some(step);
            assert_eq!(daemon.remembered_term(), Some(step.term_ns));
            // The shared timers hold the new instants, seen through run's copy.
            let fired = step.term_ns <= crate::time::boot_now().as_nanos();
            assert_eq!(mine.room(), !fired, "{step:?}");
        }
        // run's copy never trusts a memory: the daemon arms behind its back.
        mine.arm(at(now + 9_000 * ms, now + 9_500 * ms)).unwrap();
        assert_eq!(mine.remembered_term(), None);
    }

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
