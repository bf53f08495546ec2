//! The CANDIDATE's data (SPEC section 6): the tally board of a follower and the
//! acknowledgement table and lease of a leader.

use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// How many recent LEADs a leader remembers to match ACKs against. An ACK of an older
/// LEAD could only yield a lease that ended long ago, so dropping it is safe.
pub const SENT_WINDOW: usize = 64;

/// Per voter, the highest term in which it voted for this server.
#[derive(Clone, Debug)]
pub struct Tally {
    terms: Vec<u64>,
}

impl Tally {
    /// An empty board for `n` servers.
    pub fn new(n: usize) -> Tally {
        Tally { terms: vec![0; n] }
    }

    /// Records a vote of `voter` in `term`; returns how many voters' entries name `term`.
    pub fn record(&mut self, voter: usize, term: u64, stale_tallies: bool) -> usize {
        let e = &mut self.terms[voter];
        *e = (*e).max(term);
        if stale_tallies {
            // Test-only breakage: count votes of any term, as the paper's board did.
            return self.terms.iter().filter(|&&t| t > 0).count();
        }
        self.terms.iter().filter(|&&t| t == term).count()
    }

    /// Forgets every vote.
    pub fn clear(&mut self) {
        self.terms.iter_mut().for_each(|t| *t = 0);
    }
}

/// A leader's state: its term, LEAD sequence, acknowledgements and lease.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// The term this server leads.
    pub term: u64,
    /// The seq of the last LEAD sent in `term`.
    pub seq: u64,
    /// When this server became leader (kept across re-elections).
    pub since: Time,
    /// When the next heartbeat is due.
    pub next_lead_at: Time,
    /// (term, seq, lease end) of recent LEADs.
    sent: VecDeque<(u64, u64, Time)>,
    /// Per server, the latest lease end among the LEADs it acknowledged.
    acked: Vec<Option<Time>>,
    lease_until: Option<Time>,
    scratch: Vec<Time>,
    /// The longest lease length any LEAD of this leadership was sent with.
    longest: Duration,
    /// The lease end moved earlier at some point (must never happen).
    regressed: bool,
}

impl Leadership {
    /// A new leadership of `term` for `n` servers, starting at `now`.
    pub fn new(term: u64, n: usize, now: Time) -> Leadership {
        Leadership {
            term,
            seq: 0,
            since: now,
            next_lead_at: now,
            sent: VecDeque::with_capacity(SENT_WINDOW),
            acked: vec![None; n],
            lease_until: None,
            scratch: Vec::with_capacity(n),
            longest: Duration::ZERO,
            regressed: false,
        }
    }

    /// Records that LEAD (term, seq) left at `now` promising `lease_len` of faith; the
    /// leader counts as having acknowledged it. Each LEAD keeps the lease length it was
    /// sent with, so a timer reload never stretches a promise already made.
    pub fn record_send(&mut self, me: usize, now: Time, lease_len: Duration) {
        if self.sent.len() == SENT_WINDOW {
            self.sent.pop_front();
        }
        let end = now + lease_len;
        self.longest = self.longest.max(lease_len);
        self.sent.push_back((self.term, self.seq, end));
        // Keep the latest end, as for any voter: after a reload to a shorter hold, a
        // new LEAD's end can come before one already reported to supervisors, and the
        // lease must never move earlier than what was reported (the swarm found a
        // yield that waited only for the shorter end while `electctl run` enforced
        // the longer one).
        let e = &mut self.acked[me];
        *e = Some(e.map_or(end, |old| old.max(end)));
    }

    /// Records ACK(term, seq) from `voter`; returns false if that LEAD is unknown.
    pub fn record_ack(&mut self, voter: usize, term: u64, seq: u64) -> bool {
        let Some(&(_, _, at)) = self.sent.iter().rev().find(|s| s.0 == term && s.1 == seq) else {
            return false;
        };
        let e = &mut self.acked[voter];
        *e = Some(e.map_or(at, |old| old.max(at)));
        true
    }

    /// Recomputes the lease: the Q-th latest lease end among the acknowledged LEADs.
    pub fn update_lease(&mut self, quorum: usize) {
        self.scratch.clear();
        self.scratch.extend(self.acked.iter().flatten());
        if self.scratch.len() < quorum {
            self.lease_until = None;
            return;
        }
        let k = self.scratch.len() - quorum;
        let (_, qth, _) = self.scratch.select_nth_unstable(k);
        let qth = *qth;
        self.regressed |= self.lease_until.is_some_and(|old| qth < old);
        self.lease_until = Some(qth);
    }

    /// True if the lease end ever moved earlier (an invariant the core checks: every
    /// end reported to a supervisor must stay valid).
    pub fn regressed(&self) -> bool {
        self.regressed
    }

    /// The longest lease length any LEAD of this leadership was sent with: no lease
    /// ends later than now plus this (an invariant the core checks).
    pub fn longest_lease(&self) -> Duration {
        self.longest
    }

    /// The end of the lease, if acknowledgements from a majority ever gave one.
    pub fn lease_until(&self) -> Option<Time> {
        self.lease_until
    }

    /// True while the lease is valid at `now`.
    pub fn lease_valid(&self, now: Time) -> bool {
        self.lease_until.is_some_and(|u| now < u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_only_votes_of_one_term() {
        let mut t = Tally::new(5);
        assert_eq!(t.record(0, 3, false), 1);
        assert_eq!(t.record(1, 4, false), 1);
        assert_eq!(t.record(2, 4, false), 2);
        assert_eq!(t.record(0, 4, false), 3);
        assert_eq!(
            t.record(0, 3, false),
            0,
            "a late lower vote counts for nothing"
        );
        assert_eq!(t.record(3, 4, false), 4, "and never lowers an entry");
        t.clear();
        assert_eq!(t.record(1, 4, false), 1);
        assert_eq!(t.record(2, 5, true), 2, "the broken board mixes terms");
    }

    #[test]
    fn lease_is_qth_newest_ack_plus_length() {
        let ms = |m: u64| Time(m * 1_000_000);
        let len = Duration::from_millis(100);
        let mut l = Leadership::new(7, 5, ms(0));
        l.seq = 1;
        l.record_send(0, ms(10), len);
        l.update_lease(3);
        assert_eq!(l.lease_until(), None, "the leader alone is no majority");
        assert!(l.record_ack(1, 7, 1));
        assert!(!l.record_ack(2, 7, 2), "unknown LEAD");
        assert!(!l.record_ack(2, 6, 1), "other term");
        l.seq = 2;
        l.record_send(0, ms(20), len);
        assert!(l.record_ack(2, 7, 2));
        l.update_lease(3);
        // acks: self 20, v1 10, v2 20 -> third newest is 10.
        assert_eq!(l.lease_until(), Some(ms(110)));
        assert!(l.lease_valid(ms(109)) && !l.lease_valid(ms(110)));
        assert!(l.record_ack(1, 7, 2));
        assert!(
            l.record_ack(1, 7, 1),
            "an older ack never lowers the newest"
        );
        l.update_lease(3);
        assert_eq!(l.lease_until(), Some(ms(120)));
        // A longer promise from now on does not stretch what was acknowledged before.
        l.seq = 3;
        l.record_send(0, ms(30), Duration::from_millis(500));
        l.update_lease(3);
        assert_eq!(l.lease_until(), Some(ms(120)));
    }
}
