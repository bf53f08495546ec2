//! The stop timer of `electctl run` (issue 25): one CLOCK_BOOTTIME timerfd that fires
//! at the SIGTERM instant of the last lease end armed, and whose interval carries the
//! SIGKILL instant ([`super::lease::stop_at`]).
//!
//! `run` makes it once and passes it to the daemon with SCM_RIGHTS on `supervise`; the
//! daemon re-arms it at every renewal from its own lease end, so a steady leader's `run`
//! and enforcer sleep through renewals. A daemon that does not take it (older, or it
//! refused it) sends every renewal as a line, and `run` arms it itself from each line.
//!
//! **One arming a renewal, both instants at once** (issue 25, twenty-first round; it was
//! two timers, two `timerfd_settime` calls a renewal, ordered so that SIGTERM stayed at
//! or before SIGKILL in between). An arming sets `it_value` to the SIGTERM instant
//! (absolute) and `it_interval` to [`INTERVAL_BASE_NS`] plus the time from SIGTERM to
//! SIGKILL. One system call sets both, so no state between two calls exists. Whoever
//! looks ([`look`]) reads the pair with `timerfd_gettime`: before the timer fires,
//! `it_value` is the time left to SIGTERM (at most a lease, far below half the base);
//! once it fired, the kernel forwards it by the interval, so `it_value` is the time to
//! the fired SIGTERM instant plus the interval (more than half the base). A look gives
//! only times *left*, all from
//! the one `timerfd_gettime` and none from a clock read beside it: a process stopped
//! between a clock read and the look would otherwise see every instant early by the
//! stop (the review of this change: an early SIGKILL with no SIGTERM while the lease
//! was renewed). Fired: the time to SIGKILL is the time left less the base.
//!
//! `run` and the enforcer only poll the stop timer and look at it, never read it (a
//! read by one would clear the expiry the other waits for). Once it has fired, each
//! sleeps until the SIGKILL instant on an alarm of its own ([`Alarm`]: a timerfd never
//! passed to anyone), and stops watching the stop timer, which stays readable.
//!
//! Whoever arms it arms only instants derived from a lease end the daemon holds, so a
//! stopped, blocked or killed `run` or daemon leaves it at the last one (S5).

use super::lease::StopAt;
use std::cell::Cell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// CLOCK_BOOTTIME as `/proc/PID/fdinfo` of a timerfd names it (`clockid: 7`).
const BOOTTIME_ID: &str = "7";

/// The stop timer's interval less the time from SIGTERM to SIGKILL: 2^56 ns, about
/// 2.3 years. Half of it tells a fired timer (time left above it) from one that has not
/// fired (time left at most a lease). A process that looks at a fired timer more than a
/// whole base after it fired would read a SIGTERM instant one base late; the enforcer
/// wakes when it fires.
pub const INTERVAL_BASE_NS: u64 = 1 << 56;

/// The longest time from SIGTERM to SIGKILL an interval may carry (an hour: `--grace`
/// is bounded far below by the lease); a longer one read back is taken as zero.
const MAX_GRACE_NS: u64 = 3_600_000_000_000;

/// What a look at the stop timer finds: times left (ns) from the moment of the look,
/// all from one `timerfd_gettime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// Never armed (or not a timer armed this way): nothing holds the command up.
    Unarmed,
    /// Armed, not fired: SIGTERM in `term_in` (0: come, the kernel not having run the
    /// expiry yet), SIGKILL in `kill_in`.
    Armed { term_in: u64, kill_in: u64 },
    /// Fired; SIGKILL in `kill_in` (0: come).
    Fired { kill_in: u64 },
}

impl Look {
    /// True while the SIGTERM instant has not come.
    pub fn room(self) -> bool {
        matches!(self, Look::Armed { term_in, .. } if term_in > 0)
    }

    /// The time left to the SIGKILL instant (0: due, and at once when nothing is armed).
    pub fn kill_in(self) -> u64 {
        match self {
            Look::Unarmed => 0,
            Look::Armed { kill_in, .. } | Look::Fired { kill_in } => kill_in,
        }
    }
}

/// Decodes a timer's (time left, interval) (see the module).
pub fn decode(left_ns: u64, interval_ns: u64) -> Look {
    if interval_ns < INTERVAL_BASE_NS {
        // Not armed by `arm` (never armed: both zero). Nothing says how long the
        // command may run: it may not.
        return Look::Unarmed;
    }
    let gap = interval_ns - INTERVAL_BASE_NS;
    let gap = if gap > MAX_GRACE_NS { 0 } else { gap };
    if left_ns > interval_ns / 2 {
        // Fired at T, looked at t: left = T + base + gap - t, SIGKILL at T + gap.
        Look::Fired {
            kill_in: left_ns.saturating_sub(INTERVAL_BASE_NS),
        }
    } else {
        Look::Armed {
            term_in: left_ns,
            kill_in: left_ns + gap,
        }
    }
}

/// Looks at the stop timer `fd` (see the module); None: `fd` is no timerfd.
pub fn look(fd: RawFd) -> Option<Look> {
    // SAFETY: an all-zero itimerspec is valid; timerfd_gettime fills it.
    let mut cur: libc::itimerspec = unsafe { std::mem::zeroed() };
    // SAFETY: timerfd_gettime writes one itimerspec; EINVAL if `fd` is no timerfd.
    if unsafe { libc::timerfd_gettime(fd, &mut cur) } != 0 {
        return None;
    }
    let ns = |t: libc::timespec| (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64;
    Some(decode(ns(cur.it_value), ns(cur.it_interval)))
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

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Arms `fd` for the boot-clock instant `at_ns` (absolute; 0 would disarm, so at least
/// 1) with the interval `interval_ns`.
fn arm_at(fd: RawFd, at_ns: u64, interval_ns: u64) -> std::io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: timespec(interval_ns),
        it_value: timespec(at_ns.max(1)),
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

/// Why descriptors passed with `supervise` were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimersRefused {
    /// Not one descriptor (an older `run` passes two: it then registers without them).
    Count(usize),
    /// The descriptor passed is no timerfd.
    NotATimer,
    /// The descriptor passed is a timerfd on another clock than CLOCK_BOOTTIME.
    NotBootClock,
}

impl std::fmt::Display for TimersRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimersRefused::Count(n) => write!(
                f,
                "supervise: stop timers refused: {n} descriptors passed, 1 expected (the stop timer, a CLOCK_BOOTTIME timerfd)"
            ),
            TimersRefused::NotATimer => write!(
                f,
                "supervise: stop timers refused: the descriptor passed is not a timerfd"
            ),
            TimersRefused::NotBootClock => write!(
                f,
                "supervise: stop timers refused: the descriptor passed is not a CLOCK_BOOTTIME timerfd"
            ),
        }
    }
}

/// A process's own alarm for the SIGKILL instant, once the stop timer has fired: a
/// CLOCK_BOOTTIME timerfd never passed on, armed only when the instant changes.
#[derive(Debug)]
pub struct Alarm {
    fd: OwnedFd,
    armed: Cell<u64>,
}

impl Alarm {
    pub fn create() -> std::io::Result<Alarm> {
        Ok(Alarm {
            fd: boot_timer()?,
            armed: Cell::new(0),
        })
    }

    /// The descriptor to sleep on until the SIGKILL instant: the stop timer `stop_fd`
    /// while it is armed and has not fired (it fires at the SIGTERM instant first, and
    /// a renewal moves both), else this alarm, armed for the SIGKILL instant: the clock
    /// read *before* the look plus the time left to it, so never later than armed (a
    /// stop between the two makes it early, and the sleeper then looks again).
    pub fn until_kill(&self, stop_fd: RawFd) -> RawFd {
        let now = crate::time::boot_now().as_nanos();
        let l = look(stop_fd).unwrap_or(Look::Unarmed);
        if let Look::Armed { .. } = l {
            return stop_fd;
        }
        let at = (now + l.kill_in()).max(1);
        if self.armed.get() != at && arm_at(self.fd.as_raw_fd(), at, 0).is_ok() {
            self.armed.set(at);
        }
        if self.armed.get() == at {
            self.fd.as_raw_fd()
        } else {
            // The alarm could not be armed: the stop timer then, readable once fired,
            // so the sleeper spins on it rather than sleep past SIGKILL.
            stop_fd
        }
    }
}

/// The stop timer as one process holds it: `run`'s (with its own alarm), the daemon's
/// (passed with `supervise`), the enforcer's (handed on as a descriptor).
#[derive(Debug)]
pub struct StopTimers {
    timer: OwnedFd,
    /// The SIGKILL alarm of `run` or the enforcer; None in the daemon's copy.
    alarm: Option<Alarm>,
}

impl StopTimers {
    /// A fresh, disarmed CLOCK_BOOTTIME stop timer (close-on-exec, non-blocking), and
    /// the alarm of the process that makes it.
    pub fn create() -> std::io::Result<StopTimers> {
        Ok(StopTimers {
            timer: boot_timer()?,
            alarm: Some(Alarm::create()?),
        })
    }

    /// The stop timer handed on as `fd` (the enforcer's), with an alarm of its own.
    pub fn adopt(fd: OwnedFd) -> std::io::Result<StopTimers> {
        Ok(StopTimers {
            timer: fd,
            alarm: Some(Alarm::create()?),
        })
    }

    /// The stop timer passed with a `supervise`: exactly one CLOCK_BOOTTIME timerfd,
    /// taken out of `fds`, or refused (then `fds` is left as it was: the caller closes
    /// them, off the event loop, as they may be anything).
    pub fn from_passed(fds: &mut Vec<OwnedFd>) -> Result<StopTimers, TimersRefused> {
        if fds.len() != 1 {
            return Err(TimersRefused::Count(fds.len()));
        }
        let fd = fds[0].as_raw_fd();
        if look(fd).is_none() {
            return Err(TimersRefused::NotATimer);
        }
        if clock_of(fd).as_deref() != Some(BOOTTIME_ID) {
            return Err(TimersRefused::NotBootClock);
        }
        Ok(StopTimers {
            timer: fds.pop().expect("one"),
            alarm: None,
        })
    }

    /// Arms the stop timer for `at`: SIGTERM's instant and, in the interval, the time
    /// to SIGKILL's, with one `timerfd_settime` (see the module). `at` has SIGTERM at or
    /// before SIGKILL ([`super::lease::stop_at`]); one that has not is armed with
    /// SIGKILL at SIGTERM's instant.
    pub fn arm(&self, at: StopAt) -> std::io::Result<()> {
        let gap = at.kill_ns.saturating_sub(at.term_ns).min(MAX_GRACE_NS);
        arm_at(self.timer.as_raw_fd(), at.term_ns, INTERVAL_BASE_NS + gap)
    }

    /// What the stop timer says now (Unarmed when it cannot be read).
    pub fn look(&self) -> Look {
        look(self.timer.as_raw_fd()).unwrap_or(Look::Unarmed)
    }

    /// True while the SIGTERM instant has not come: the lease last armed leaves room
    /// for the grace (false before any arming).
    pub fn room(&self) -> bool {
        self.look().room()
    }

    /// True once the SIGKILL instant has come (or nothing was ever armed).
    pub fn kill_due(&self) -> bool {
        self.look().kill_in() == 0
    }

    /// The time left before the SIGKILL instant (for log lines).
    pub fn kill_in(&self) -> Duration {
        Duration::from_nanos(self.look().kill_in())
    }

    /// The stop timer's descriptor (to poll for the SIGTERM instant, to pass on).
    pub fn fd(&self) -> RawFd {
        self.timer.as_raw_fd()
    }

    /// The descriptor to sleep on until the SIGKILL instant ([`Alarm::until_kill`]).
    /// The daemon's copy has no alarm: the stop timer's own descriptor then.
    pub fn kill_fd(&self) -> RawFd {
        match &self.alarm {
            Some(a) => a.until_kill(self.fd()),
            None => self.fd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(t: u64, k: u64) -> StopAt {
        StopAt {
            term_ns: t,
            kill_ns: k,
        }
    }

    fn dup(fd: RawFd) -> OwnedFd {
        // SAFETY: F_DUPFD_CLOEXEC of our own descriptor; the copy is ours.
        unsafe { OwnedFd::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0)) }
    }

    fn readable(fd: RawFd, timeout_ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own.
        unsafe { libc::poll(&mut p, 1, timeout_ms) == 1 }
    }

    /// The decoding, case by case: nothing armed, armed, fired (the kernel forwarded
    /// it by the interval), come but not yet run by the kernel, and a gap out of range.
    /// Only times left, from the one read: no clock read beside it.
    #[test]
    fn a_look_tells_armed_from_fired_and_carries_sigkill() {
        let b = INTERVAL_BASE_NS;
        assert_eq!(decode(0, 0), Look::Unarmed);
        assert_eq!(decode(5 * MS, 0), Look::Unarmed, "a one-shot timer");
        assert_eq!(decode(5 * MS, b - 1), Look::Unarmed);
        let armed = decode(300 * MS, b + 100 * MS);
        assert_eq!(
            armed,
            Look::Armed {
                term_in: 300 * MS,
                kill_in: 400 * MS
            }
        );
        assert!(armed.room());
        // Fired 40 ms ago: the next expiry is a whole interval after the SIGTERM instant.
        let fired = decode(b + 100 * MS - 40 * MS, b + 100 * MS);
        assert_eq!(fired, Look::Fired { kill_in: 60 * MS });
        assert!(!fired.room());
        // Fired more than the gap ago: SIGKILL due.
        assert_eq!(decode(b + 100 * MS - 150 * MS, b + 100 * MS).kill_in(), 0);
        // Come, the kernel not having run the expiry: no room, SIGKILL a gap later.
        let come = decode(0, b + 100 * MS);
        assert!(!come.room());
        assert_eq!(come.kill_in(), 100 * MS);
        // A gap above the bound reads as none: SIGKILL with SIGTERM.
        assert_eq!(decode(300 * MS, b + MAX_GRACE_NS + 1).kill_in(), 300 * MS);
        assert_eq!(Look::Unarmed.kill_in(), 0);
        assert!(!Look::Unarmed.room());
    }

    /// Armed for real: one timerfd_settime carries both instants, read back never later
    /// than armed and within a few ms of it, before and after the timer fires; a later
    /// arming clears the expiry.
    #[test]
    fn one_arming_carries_both_instants() {
        let t = StopTimers::create().unwrap();
        assert_eq!(t.look(), Look::Unarmed);
        assert!(!t.room() && t.kill_due(), "disarmed: no room");
        let now = crate::time::boot_now().as_nanos();
        let a = at(now + 5_000 * MS, now + 5_150 * MS);
        t.arm(a).unwrap();
        let Look::Armed { term_in, kill_in } = t.look() else {
            panic!("{:?}", t.look())
        };
        assert!(
            term_in <= 5_000 * MS && term_in + 50 * MS > 5_000 * MS,
            "{term_in}"
        );
        assert_eq!(kill_in - term_in, 150 * MS);
        assert!(t.room() && !t.kill_due() && !readable(t.fd(), 0));
        // Into the past by 30 ms: fires at once, and the look finds when.
        let now = crate::time::boot_now().as_nanos();
        let a = at(now - 30 * MS, now + 120 * MS);
        t.arm(a).unwrap();
        assert!(readable(t.fd(), 1000), "an instant past fires at once");
        for _ in 0..3 {
            let Look::Fired { kill_in } = t.look() else {
                panic!("{:?}", t.look())
            };
            let left = a.kill_ns - crate::time::boot_now().as_nanos();
            assert!(
                kill_in >= left && kill_in < left + 50 * MS,
                "{kill_in} {left}"
            );
            assert!(!t.room() && !t.kill_due());
            assert!(readable(t.fd(), 0), "a look does not clear the expiry");
        }
        // A renewal clears it.
        let now = crate::time::boot_now().as_nanos();
        t.arm(at(now + 5_000 * MS, now + 5_100 * MS)).unwrap();
        assert!(t.room() && !readable(t.fd(), 0));
    }

    /// The alarm: while the stop timer has not fired, the sleeper watches it; once it
    /// has, the alarm, which turns readable at the SIGKILL instant and not before.
    #[test]
    fn the_alarm_wakes_at_the_sigkill_instant() {
        let t = StopTimers::create().unwrap();
        let now = crate::time::boot_now().as_nanos();
        t.arm(at(now + 5_000 * MS, now + 5_100 * MS)).unwrap();
        assert_eq!(t.kill_fd(), t.fd(), "not fired: sleep on the stop timer");
        let now = crate::time::boot_now().as_nanos();
        let a = at(now - 10 * MS, now + 150 * MS);
        t.arm(a).unwrap();
        let k = t.kill_fd();
        assert_ne!(k, t.fd(), "fired: sleep on the alarm");
        assert_eq!(t.kill_fd(), k, "the same alarm");
        assert!(
            !readable(k, 50),
            "the alarm rang before the SIGKILL instant"
        );
        assert!(readable(k, 1000), "the alarm did not ring");
        let rang = crate::time::boot_now().as_nanos();
        assert!(rang >= a.kill_ns - 5 * MS && rang <= a.kill_ns + 500 * MS);
        assert!(t.kill_due());
        // Nothing armed: the alarm rings at once.
        let u = StopTimers::create().unwrap();
        assert!(readable(u.kill_fd(), 1000));
    }

    #[test]
    fn a_passed_descriptor_must_be_one_boot_clock_timer() {
        let t = StopTimers::create().unwrap();
        let now = crate::time::boot_now().as_nanos();
        t.arm(at(now + 1_000 * MS, now + 2_000 * MS)).unwrap();
        let ok = StopTimers::from_passed(&mut vec![dup(t.fd())]).unwrap();
        assert!(ok.room(), "the same timer");
        // The daemon's arming is seen through run's copy.
        ok.arm(at(now - MS, now + 100 * MS)).unwrap();
        assert!(!t.room() && readable(t.fd(), 1000));
        let e = StopTimers::from_passed(&mut vec![dup(t.fd()), dup(t.fd())]).unwrap_err();
        assert_eq!(e, TimersRefused::Count(2));
        assert!(
            e.to_string().contains("2 descriptors passed, 1 expected"),
            "{e}"
        );
        let mut p = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let e = StopTimers::from_passed(&mut vec![r]).unwrap_err();
        assert_eq!(e, TimersRefused::NotATimer);
        assert!(e.to_string().contains("not a timerfd"), "{e}");
        drop(w);
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let mono = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        assert!(mono >= 0);
        // SAFETY: a fresh descriptor.
        let mono = unsafe { OwnedFd::from_raw_fd(mono) };
        assert_eq!(
            StopTimers::from_passed(&mut vec![mono]).unwrap_err(),
            TimersRefused::NotBootClock
        );
    }
}
