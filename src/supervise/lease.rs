//! The lease and grace arithmetic of `run`: the daemon's timers as a line carries them,
//! and whether `--grace` fits the least lease a steady leader can have left (SPEC 11).

use std::time::Duration;

/// How long before the lease end the command is SIGKILLed; SIGTERM comes this plus the
/// grace before it. Covers signal delivery, the kernel reaping a process group, and
/// scheduling delays of this supervisor.
pub const MARGIN: Duration = Duration::from_millis(20);

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
