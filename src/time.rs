//! Time as the core sees it: nanoseconds on one server's boot clock.
//!
//! The core never reads a clock; every input carries `now: Time`. The daemon passes
//! CLOCK_BOOTTIME ([`boot_now`]), the simulator passes each node's own drifting virtual
//! clock.
//!
//! Why the boot clock (SPEC section 8): every lease is measured on it: the core's `now`,
//! `lease_until_ns` and `now_ns` in `status`, and the deadlines `electctl run` enforces.
//! CLOCK_MONOTONIC stops while the system is suspended, so a leader resuming from a
//! suspend would believe in a lease that ended long ago in real time; CLOCK_BOOTTIME
//! keeps counting through a suspend. Durations that are not leases (the grace timer of
//! a hook, restart backoff, idle sweeps) may stay on `std::time::Instant`.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on one server's monotonic clock, in nanoseconds from an arbitrary origin.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The origin of the clock.
    pub const ZERO: Time = Time(0);

    /// Builds a time from nanoseconds since the clock's origin.
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }

    /// Nanoseconds since the clock's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_nanos(d)))
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(duration_nanos(d)))
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (584 years).
///
/// In u64 arithmetic: `as_nanos` gives a u128, and its conversion was several times the
/// instructions at each of the many places the heartbeat's path adds a duration to a
/// time (issue 25).
///
/// Saturating rather than checked steps: the same results (a product that saturates
/// stays `u64::MAX` after the add), without a branch at each inlined use.
pub fn duration_nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// The current CLOCK_BOOTTIME reading: the clock every lease is measured on.
///
/// It counts through a system suspend (CLOCK_MONOTONIC does not), so a lease end taken
/// before a suspend is already past when the system resumes, as it is in real time.
pub fn boot_now() -> Time {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; CLOCK_BOOTTIME exists since Linux 2.6.39.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_BOOTTIME");
    Time(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The u64 arithmetic gives what the u128 conversion gave, saturating at the same
    /// place (issue 25, tenth round).
    #[test]
    fn duration_nanos_is_the_u128_conversion_saturated() {
        let reference = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let max_secs = u64::MAX / 1_000_000_000;
        let max_sub = (u64::MAX % 1_000_000_000) as u32;
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(100),
            Duration::new(1, 999_999_999),
            Duration::new(max_secs, max_sub),
            Duration::new(max_secs, max_sub + 1),
            Duration::new(max_secs, 999_999_999),
            Duration::new(max_secs + 1, 0),
            Duration::from_nanos(u64::MAX),
            Duration::MAX,
        ] {
            assert_eq!(duration_nanos(d), reference(d), "{d:?}");
        }
        assert_eq!(duration_nanos(Duration::from_nanos(u64::MAX)), u64::MAX);
        assert_eq!(
            duration_nanos(Duration::new(max_secs, max_sub + 1)),
            u64::MAX
        );
    }

    #[test]
    fn boot_clock_runs_and_is_at_least_the_monotonic_clock() {
        let a = boot_now();
        std::thread::sleep(Duration::from_millis(2));
        let b = boot_now();
        assert!(b.saturating_since(a) >= Duration::from_millis(2));
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: as above.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        // The boot clock also counts time spent suspended: never behind the monotonic one.
        assert!(boot_now().as_nanos() >= mono);
    }
}
