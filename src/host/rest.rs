//! Reads at the heartbeat (issue 25, cost at rest): whether this server's datagrams
//! may wait for its next wakeup. A leader at rest then wakes once per heartbeat: its
//! driver reads the UDP sockets at each wakeup before the timers, so the ACKs of one
//! LEAD are taken just before the next leaves. The decision is the host's (one socket
//! carries every group); the daemon and the simulator apply it (docs/PROTOCOL.md,
//! "Reads at the heartbeat").

use super::*;

impl Host {
    /// True when the datagrams that arrive for this server may wait until its next
    /// wakeup (at the latest its next deadline, a heartbeat away) rather than wake it.
    ///
    /// Only while every group's core is a leader at rest (`Node::at_rest`: a valid
    /// lease on current acknowledgements, no round, handoff, unfit wait or quiet period,
    /// no write pending), this host is not stopping, no write is pending or held
    /// datagrams wait for one, no RESIGN waits for supervisors, and every supervisor's
    /// stop timers stay ahead: the SIGTERM instant of the lease end now known comes
    /// after the next deadline plus the round-trip bound, so the renewal read at the
    /// next wakeup re-arms them in time (see `stop_timers_ahead`). As of `now`; the
    /// driver asks again after each input.
    pub fn datagrams_may_wait(&self, now: Time) -> bool {
        if self.sabotage.defer_always {
            return true;
        }
        !self.groups.is_empty()
            && self.stopping.is_none()
            && !self.write_pending()
            && !self.boot_pending
            && self.held.is_empty()
            && self.release_deadline(now).is_none()
            && self
                .groups
                .iter()
                .all(|g| g.want.is_none() && g.resign_until.is_none() && g.node.at_rest(now))
            && (0..self.groups.len()).all(|g| self.stop_timers_ahead(g, now))
    }

    /// True when group `g` has no supervisor, or when the earliest SIGTERM instant its
    /// supervisors may hold (the group's lease end minus the largest `--grace` and
    /// `run`'s MARGIN) comes later than the next deadline plus the round-trip bound.
    /// Reading at the heartbeat delays each renewal, and with it the re-arming of stop
    /// timers (`Notice::ArmTimers`) and the renewal lines, by up to a heartbeat: at
    /// heartbeat 100 ms, K 3 and the default `--grace` of 100 ms the lease known after
    /// a tick (2.94 heartbeats from a LEAD a heartbeat old) leaves 74 ms before
    /// SIGTERM, less than a heartbeat, so such a leader reads at once (as before), at
    /// every instant: that is decided from the configuration first, so the answer does
    /// not flip between renewal and tick.
    fn stop_timers_ahead(&self, g: usize, now: Time) -> bool {
        if self.registry.supervisors(g) == 0 {
            return true;
        }
        let grace = self
            .registry
            .graces(g)
            .map(|(_, _, grace)| grace)
            .max()
            .unwrap_or_default();
        // First the configuration: a grace that cannot fit a renewal read a heartbeat
        // late in steady state (SIGTERM grace + MARGIN before a lease that rests on a
        // LEAD a heartbeat old, against the next tick plus rtt) never defers. The
        // instants below alone said yes just after each renewal and no at each tick,
        // and the daemon left and rejoined the poll set every heartbeat.
        let node = &self.groups[g].node;
        let room = node
            .lease_len()
            .saturating_sub(node.heartbeat() * 2 + node.rtt());
        if grace + crate::supervise::MARGIN >= room {
            return false;
        }
        let Some(until) = self.groups[g].node.status(now).lease_until else {
            return false;
        };
        let term = crate::supervise::stop_at(until.as_nanos(), grace).term_ns;
        let next = self.next_deadline(now).max(now);
        term > (next + node.rtt()).as_nanos()
    }
}
