//! The lease and grace arithmetic of `run`: the daemon's timers as a line carries them,
//! whether `--grace` fits the least lease a steady leader can have left (SPEC 11), and
//! the two instants a command is stopped at for a lease end ([`stop_at`]), which the
//! daemon (timers passed with `supervise`) and `run` (its fallback) both arm from.

use std::time::Duration;

/// How long before the lease end the command is SIGKILLed; SIGTERM comes this plus the
/// grace before it. Covers signal delivery, the kernel reaping a process group, and
/// scheduling delays of this supervisor.
pub const MARGIN: Duration = Duration::from_millis(20);

/// The boot-clock instants (ns) at which a command on a lease ending at `until_ns` gets
/// SIGTERM and SIGKILL: `grace + MARGIN` and `MARGIN` before the end.
///
/// The one place of this arithmetic: the daemon arms a supervisor's stop timers with it
/// at every renewal, `run` arms them with it from each line when the daemon does not
/// take them, and `run` and the enforcer act when those timers fire, with no arithmetic
/// of their own on "now" (which a process that was stopped would get wrong).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StopAt {
    /// SIGTERM: `grace + MARGIN` before the lease end.
    pub term_ns: u64,
    /// SIGKILL: `MARGIN` before the lease end.
    pub kill_ns: u64,
}

/// The stop instants for the lease end `until_ns` and the grace `grace` (see [`StopAt`]).
/// Never later than the lease end minus the margin; an instant that saturates to 0 is
/// given as 1 (0 would disarm a timer rather than fire it).
pub fn stop_at(until_ns: u64, grace: Duration) -> StopAt {
    let margin = crate::time::duration_nanos(MARGIN);
    let grace = crate::time::duration_nanos(grace);
    let kill_ns = until_ns.saturating_sub(margin).max(1);
    StopAt {
        term_ns: kill_ns.saturating_sub(grace).max(1),
        kill_ns,
    }
}

/// The daemon's timers, as a supervisor line carries them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Timers {
    /// K*HBT*(1-2*rho): the lease a majority's acknowledgement gives.
    pub lease_len: Duration,
    /// The heartbeat: how often the lease is renewed.
    pub heartbeat: Duration,
    /// The round-trip bound: how late the acknowledgements of a renewal may come.
    pub rtt: Duration,
}

impl Timers {
    /// The lease as the grace budget counts it: `lease_len` with the microsecond that
    /// the core takes off every lease (`LEASE_MARGIN`, so that no tie of instants
    /// decides safety) given back. That microsecond is no time a command can use, and
    /// without this it cost the largest grace a whole millisecond (154 ms became 153 at
    /// heartbeat 100 ms, rtt 20 ms, K 3, drift 0.01). The supervisor's own `MARGIN`
    /// (20 ms) is what covers scheduling and signal delivery.
    pub fn budget_lease(&self) -> Duration {
        self.lease_len.saturating_add(crate::core::LEASE_MARGIN)
    }
}

/// Refuses a grace that cannot work against these timers (SPEC 11: exit 2 at start).
///
/// Just before a renewal, a leader's lease can have as little as
/// `lease_len - heartbeat - rtt` left (its last acknowledged LEAD left a heartbeat ago,
/// and the acks of the next may take up to `rtt`). SIGTERM goes out when `grace + MARGIN` is left, so that
/// must fit below it, or the command would be stopped in steady state and a planned
/// stop could not give the whole grace.
pub fn check_grace(grace: Duration, t: &Timers) -> Result<(), String> {
    let budget = t.budget_lease().saturating_sub(t.heartbeat + t.rtt);
    if grace + MARGIN <= budget {
        return Ok(());
    }
    let max = max_grace(t);
    Err(format!(
        "--grace {}ms cannot work against this daemon's lease: the lease lasts {} ms and is renewed every {} ms (heartbeat) with acknowledgements within {} ms (rtt), so just before a renewal it may have only {} ms left; the grace plus the {} ms safety margin must fit in that. Use --grace {}ms or less, or give electd a longer heartbeat or more missed-heartbeats",
        grace.as_millis(),
        t.budget_lease().as_millis(),
        t.heartbeat.as_millis(),
        t.rtt.as_millis(),
        budget.as_millis(),
        MARGIN.as_millis(),
        max.as_millis()
    ))
}

/// The largest `--grace` that [`check_grace`] accepts against these timers.
pub fn max_grace(t: &Timers) -> Duration {
    t.budget_lease()
        .saturating_sub(t.heartbeat + t.rtt)
        .saturating_sub(MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timers(lease_ms: u64, hbt_ms: u64, rtt_ms: u64) -> Timers {
        Timers {
            lease_len: Duration::from_millis(lease_ms),
            heartbeat: Duration::from_millis(hbt_ms),
            rtt: Duration::from_millis(rtt_ms),
        }
    }

    /// Nothing is armed later than the lease end minus grace and margin (SIGTERM) or
    /// minus the margin (SIGKILL); a lease already over gives instants already past.
    #[test]
    fn stop_instants_come_before_the_lease_end() {
        let g = Duration::from_millis(150);
        let s = stop_at(1_000_000_000, g);
        assert_eq!(s.kill_ns, 1_000_000_000 - 20_000_000);
        assert_eq!(s.term_ns, 1_000_000_000 - 170_000_000);
        for until in [0, 1, 5_000_000, 169_999_999, 170_000_000, u64::MAX] {
            let s = stop_at(until, g);
            assert!(s.term_ns >= 1 && s.kill_ns >= 1, "{until}: 0 would disarm");
            assert!(s.term_ns <= s.kill_ns);
            let bound = |d: u64| until.saturating_sub(d).max(1);
            assert!(s.kill_ns <= bound(20_000_000), "{until}");
            assert!(s.term_ns <= bound(170_000_000), "{until}");
        }
    }

    #[test]
    fn grace_must_fit_before_a_renewal() {
        // heartbeat 100ms, rtt 20ms, K=3, drift 0.01: lease 294 ms, 174 ms before renewal.
        let t = timers(294, 100, 20);
        let e = check_grace(Duration::from_millis(300), &t).unwrap_err();
        assert!(
            e.contains("--grace 300ms") && e.contains("154ms or less"),
            "{e}"
        );
        assert!(check_grace(Duration::from_millis(155), &t).is_err());
        assert!(check_grace(Duration::from_millis(154), &t).is_ok());
        assert!(check_grace(Duration::from_millis(100), &t).is_ok());
        // Defaults (heartbeat 1s, rtt 100ms): up to 1820 ms.
        let t = timers(2940, 1000, 100);
        assert!(check_grace(Duration::from_millis(1820), &t).is_ok());
        assert!(check_grace(Duration::from_millis(1821), &t).is_err());
        // A lease shorter than a heartbeat: nothing fits, no panic.
        assert!(check_grace(Duration::ZERO, &timers(50, 100, 20)).is_err());
    }
}
