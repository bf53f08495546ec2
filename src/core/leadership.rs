//! A leader's state (SPEC section 6): its term and LEAD sequence, the recent LEADs and
//! the acknowledgements that make its lease, and the `Node` handlers that change it
//! (the heartbeat, an ACK).

use super::*;

/// K*HBT*(1-2*rho): how long a majority's acknowledgement lets a leader lead.
pub(super) fn lease_len(hold: Duration, drift_ppm: u32) -> Duration {
    let ns = crate::time::duration_nanos(hold) as u128;
    let exact =
        Duration::from_nanos((ns * u128::from(1_000_000 - 2 * drift_ppm) / 1_000_000) as u64);
    // At the drift bound with no delay, the S2 margin is 2*rho^2*H (docs/PROTOCOL.md):
    // about a nanosecond for a short hold at rho = 0 (where it is zero outright). A
    // microsecond off the lease keeps that equality from being decided by clock
    // rounding (issue 20).
    exact.saturating_sub(LEASE_MARGIN)
}

/// Taken off every lease so that safety never rests on an exact tie of instants.
pub const LEASE_MARGIN: Duration = Duration::from_micros(1);

/// How many recent LEADs a leader remembers to match ACKs against. An ACK of an older
/// LEAD could only yield a lease that ended long ago, so dropping it is safe.
pub const SENT_WINDOW: usize = 64;

/// Heartbeats in a row whose every requested ACK arrived before the next LEAD, before
/// a new leadership asks only some followers to acknowledge (issue 25, sparse
/// acknowledgements). With sparse ACKs one lost ACK costs a heartbeat's renewal that a
/// second follower's ACK would otherwise have covered, so each ACK missed while sparse
/// doubles the streak needed, up to [`SPARSE_MAX`], and each `SPARSE_MAX` sparse
/// heartbeats without a miss halve it again: a lossy network keeps every follower
/// acknowledging (docs/PROTOCOL.md, "Sparse acknowledgements").
pub const SPARSE_AFTER: u32 = 16;

/// The longest streak of clean heartbeats a leader may need before it asks only some
/// followers again (see [`SPARSE_AFTER`]).
pub const SPARSE_MAX: u32 = 1024;

/// Up to this many servers the lease is computed on the stack (`update_lease`).
const SMALL: usize = 8;

/// A LEAD a leader remembers: its position, the end of the lease an acknowledgement
/// of it gives, and the followers it asked to acknowledge it (empty: all).
#[derive(Copy, Clone, Debug)]
struct Sent {
    term: u64,
    seq: u64,
    end: Time,
    asked: PeerSet,
}

/// A leader's state: its term, LEAD sequence, acknowledgements and lease.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// The term this server leads.
    pub term: u64,
    /// The seq of the last LEAD sent in `term`.
    pub seq: u64,
    /// When this server began leading `term` (a re-election restarts it): the window
    /// of K*HBT in which a leadership may still gather its lease.
    pub term_since: Time,
    /// When the next heartbeat is due.
    pub next_lead_at: Time,
    /// Recent LEADs.
    sent: VecDeque<Sent>,
    /// Per server, the latest lease end among the LEADs it acknowledged.
    acked: Vec<Option<Time>>,
    /// Per server, the newest (term, seq) of this leadership it acknowledged (the
    /// leader's own: its newest LEAD), for [`Leadership::acks_current`].
    acked_pos: Vec<(u64, u64)>,
    lease_until: Option<Time>,
    /// The lease held when this server was re-elected, if it was still valid then: the
    /// lease of the new term never ends before it (SPEC section 6, re-election).
    floor: Option<Time>,
    scratch: Vec<Time>,
    /// The longest lease length any LEAD of this leadership was sent with.
    longest: Duration,
    /// The lease end moved earlier at some point (must never happen).
    regressed: bool,
    /// LEADs in a row, up to the newest, whose requested ACKs had all come when the
    /// next one left (see `SPARSE_AFTER`).
    pub clean: u32,
    /// The streak of clean LEADs needed before LEADs ask only some followers.
    pub need: u32,
    /// Sparse LEADs in a row whose ACKs all came, towards halving `need`.
    sparse_run: u32,
}

impl Leadership {
    /// A new leadership of `term` for `n` servers, starting at `now`.
    pub fn new(term: u64, n: usize, now: Time) -> Leadership {
        Leadership {
            term,
            seq: 0,
            term_since: now,
            next_lead_at: now,
            sent: VecDeque::with_capacity(SENT_WINDOW),
            acked: vec![None; n],
            acked_pos: vec![(0, 0); n],
            lease_until: None,
            floor: None,
            scratch: Vec::with_capacity(n),
            longest: Duration::ZERO,
            regressed: false,
            clean: 0,
            need: SPARSE_AFTER,
            sparse_run: 0,
        }
    }

    /// Records that LEAD (term, seq) left at `now` promising `lease_len` of faith and
    /// asking `asked` to acknowledge it (empty: every follower); the leader counts as
    /// having acknowledged it. Each LEAD keeps the lease length it was sent with, so a
    /// timer reload never stretches a promise already made.
    pub fn record_send(&mut self, me: usize, now: Time, lease_len: Duration, asked: PeerSet) {
        if self.sent.len() == SENT_WINDOW {
            self.sent.pop_front();
        }
        let end = now + lease_len;
        self.longest = self.longest.max(lease_len);
        self.sent.push_back(Sent {
            term: self.term,
            seq: self.seq,
            end,
            asked,
        });
        // Keep the latest end, as for any voter: after a reload to a shorter hold, a
        // new LEAD's end can come before one already reported to supervisors, and the
        // lease must never move earlier than what was reported (the swarm found a
        // yield that waited only for the shorter end while `electctl run` enforced
        // the longer one).
        let e = &mut self.acked[me];
        *e = Some(e.map_or(end, |old| old.max(end)));
        self.acked_pos[me] = self.acked_pos[me].max((self.term, self.seq));
    }

    /// Records ACK(term, seq) from `voter`; returns false if that LEAD is unknown.
    pub fn record_ack(&mut self, voter: usize, term: u64, seq: u64) -> bool {
        let Some(at) = self
            .sent
            .iter()
            .rev()
            .find(|s| s.term == term && s.seq == seq)
            .map(|s| s.end)
        else {
            return false;
        };
        let e = &mut self.acked[voter];
        *e = Some(e.map_or(at, |old| old.max(at)));
        self.acked_pos[voter] = self.acked_pos[voter].max((term, seq));
        true
    }

    /// True when the lease rests on current acknowledgements (issue 25, reads at the
    /// heartbeat): every server of the group, this leader included, has acknowledged
    /// this term's LEAD before the newest (seq - 1, the one sent a heartbeat before
    /// the one in flight) or the newest itself. Then the Q-th newest acknowledged LEAD
    /// is at least seq - 1 for any quorum Q, so the lease ends no earlier than that
    /// LEAD's send time plus its lease length. Stricter than the lease needs (a
    /// majority) on purpose: a server that is down, cut off or losing ACKs keeps its
    /// leader reading datagrams at once, as before issue 25. False before the second
    /// LEAD of a term.
    ///
    /// With sparse acknowledgements a server need not have acknowledged a LEAD that
    /// did not ask it to: it must have acknowledged the newest LEAD up to seq - 1
    /// that asked it (`ids` maps server indices to ids).
    pub fn acks_current(&self, ids: &[u16]) -> bool {
        self.seq >= 2 && self.acked_through(ids, self.seq - 1)
    }

    /// True when the newest LEAD asked only some followers to acknowledge it.
    pub fn asks_some(&self) -> bool {
        self.sent.back().is_some_and(|s| !s.asked.is_empty())
    }

    /// Called as LEAD seq+1 is about to leave: were the ACKs that LEAD seq asked for
    /// (and, for those it did not ask, the newest that did) all read? Keeps the streak
    /// of clean heartbeats and the streak needed before asking only some followers.
    pub fn note_heartbeat(&mut self, ids: &[u16]) {
        let sparse = self.sent.back().is_some_and(|s| !s.asked.is_empty());
        if self.seq >= 1 && self.acked_through(ids, self.seq) {
            self.clean = self.clean.saturating_add(1);
            if sparse {
                self.sparse_run += 1;
                if self.sparse_run >= SPARSE_MAX {
                    self.sparse_run = 0;
                    self.need = (self.need / 2).max(SPARSE_AFTER);
                }
            }
        } else {
            if sparse {
                self.need = (self.need * 2).min(SPARSE_MAX);
            }
            self.clean = 0;
            self.sparse_run = 0;
        }
    }

    /// True when every server acknowledged the newest LEAD of this term up to `upto`
    /// that asked it to (or a later one). False if no remembered LEAD asked it.
    pub fn acked_through(&self, ids: &[u16], upto: u64) -> bool {
        let newest = (self.term, upto);
        // Plain loops over the window's two halves, newest first: the iterator chain
        // over the deque (rev, filter, find) was some 30 code lines and 300
        // instructions of a resting leader's heartbeat, asked twice (issue 25).
        let (older, newer) = self.sent.as_slices();
        'servers: for (&p, &id) in self.acked_pos.iter().zip(ids) {
            if p >= newest {
                continue;
            }
            for half in [newer, older] {
                for s in half.iter().rev() {
                    if s.term == self.term
                        && s.seq <= upto
                        && (s.asked.is_empty() || s.asked.contains(id))
                    {
                        // The newest LEAD up to `upto` that asked this server.
                        if p >= (s.term, s.seq) {
                            continue 'servers;
                        }
                        return false;
                    }
                }
            }
            // No remembered LEAD asked it.
            return false;
        }
        true
    }

    /// Re-elected in `term` at `now` (SPEC section 6): LEAD seq restarts, and from now
    /// on the lease rests only on acknowledgements of LEADs of `term`, with the lease
    /// still valid at `now` (if any) as a floor. An acknowledgement of the old term
    /// must not count again: the follower that gave it may since have followed a
    /// leader of a higher term, or been released by that leadership's RESIGN, and
    /// helped elect someone else (issue 20: two leases overlapped by ~200 ms).
    /// `keep_acks` is the test-only sabotage that reverts this.
    pub fn begin_term(&mut self, term: u64, now: Time, keep_acks: bool) {
        debug_assert!(term > self.term);
        self.term = term;
        self.seq = 0;
        if keep_acks {
            // The code before the fix, exactly: old ACKs count, the window runs on.
            return;
        }
        self.term_since = now;
        self.floor = self.lease_until.filter(|&u| u > now);
        self.sent.clear();
        self.clean = 0;
        self.acked.iter_mut().for_each(|a| *a = None);
        self.acked_pos.iter_mut().for_each(|a| *a = (0, 0));
        self.lease_until = self.floor;
    }

    /// Recomputes the lease: the Q-th latest lease end among the acknowledged LEADs of
    /// this term, never before the floor kept at a re-election.
    pub fn update_lease(&mut self, quorum: usize) {
        if self.acked.len() <= SMALL {
            // A few servers (every heartbeat of a usual cluster): the ends kept newest
            // first by insertion on the stack, no vector and no selection (issue 25).
            let mut top = [Time::ZERO; SMALL];
            let mut len = 0;
            for &t in self.acked.iter().flatten() {
                let mut i = len;
                while i > 0 && top[i - 1] < t {
                    top[i] = top[i - 1];
                    i -= 1;
                }
                top[i] = t;
                len += 1;
            }
            if len < quorum {
                self.lease_until = self.floor;
                return;
            }
            self.set_lease(top[quorum - 1]);
            return;
        }
        self.scratch.clear();
        self.scratch.extend(self.acked.iter().flatten());
        if self.scratch.len() < quorum {
            self.lease_until = self.floor;
            return;
        }
        let k = self.scratch.len() - quorum;
        let (_, qth, _) = self.scratch.select_nth_unstable(k);
        let qth = *qth;
        self.set_lease(qth);
    }

    /// The lease ends at `qth` (the Q-th latest acknowledged end), never before the
    /// floor.
    fn set_lease(&mut self, qth: Time) {
        let qth = qth.max(self.floor.unwrap_or(Time::ZERO));
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

impl Node {
    /// Sends this leader's next LEAD now if it is due within `within` (SPEC section 15:
    /// one datagram per destination per heartbeat carries every group a server leads).
    /// The driver calls it for each group it leads whenever another group's LEAD leaves,
    /// so the heartbeats of all groups fall into one flush and share one datagram.
    /// Always safe: a LEAD sent early only starts its lease and its followers' faith
    /// earlier, from its own send time. Returns true when a LEAD was queued.
    pub fn handle_heartbeat_due(&mut self, now: Time, within: Duration) -> bool {
        self.on_time(now);
        let due = match &self.leadership {
            Some(l) if self.resign == Resign::Idle => l.next_lead_at <= now + within,
            _ => false,
        };
        if due {
            self.send_lead(now);
        }
        self.check_invariants(now);
        due
    }

    /// True while this server is a leader at rest (issue 25): what it hears may wait
    /// for its next heartbeat, where the driver reads its datagrams before the timers.
    /// It leads with a valid lease that rests on current acknowledgements
    /// ([`Leadership::acks_current`]: every server acknowledged the LEAD before the one
    /// in flight), and nothing is under way that a datagram could move: no handoff
    /// (RESIGN waiting or due), no round (its elector watches itself, and no term
    /// above the one it leads has been seen or voted in), not unfit
    /// (unhealthy, drained, a last resort, a witness: a successor is being looked
    /// for), past its startup quiet period, and no write pending or outputs held
    /// behind one. Whatever this says, reading late is safe: the lease is counted
    /// from each LEAD's send time, not from when its ACK is read (docs/PROTOCOL.md,
    /// "Reads at the heartbeat").
    pub fn at_rest(&self, now: Time) -> bool {
        self.settled(now)
            && self
                .leadership
                .as_ref()
                .is_some_and(|l| l.acks_current(&self.ids))
            && self.requested.is_none()
            && self.held.is_empty()
    }

    /// True while this server leads with a valid lease and nothing under way that
    /// needs to hear from every follower at once: what [`Node::at_rest`] asks, but for
    /// the acknowledgements and pending writes. [`Node::asked_acks`] and `at_rest`
    /// add their own conditions on the acknowledgements.
    fn settled(&self, now: Time) -> bool {
        let Some(l) = &self.leadership else {
            return false;
        };
        self.resign == Resign::Idle
            && l.lease_valid(now)
            && self.elector == ElectorState::Watching
            && self.leader == Some(self.me)
            // No round of a higher term under way: after voting (for itself, as the
            // live leader) its elector watches itself again, while the VOTEs that
            // re-elect it are still coming; the followers that voted no longer ACK the
            // old term, so a heartbeat lost there cost a second round.
            && self.term == l.term
            && self.voted_term <= l.term
            && !self.unfit()
            && self.unfit_wait.is_none_or(|w| w <= now)
            && self.preempt_ask.is_none()
            && !self.may_be_preempted()
            && now >= self.quiet_until
    }

    /// The followers the next LEAD asks to acknowledge it (issue 25, sparse
    /// acknowledgements; docs/PROTOCOL.md): empty, meaning every follower, unless this
    /// leader is settled ([`Node::settled`]), every follower acknowledged the newest
    /// LEAD that asked it, `need` heartbeats in a row ([`SPARSE_AFTER`] to
    /// [`SPARSE_MAX`]) were clean, and the
    /// lease survives one lost ACK (`lease_len > 2*HBT + RTT`: the LEAD after a miss
    /// asks everyone, and their ACKs come before the lease of the last renewal ends).
    /// Then Q-1 followers, a window that moves by Q-1 each LEAD, so every follower is
    /// asked at least every second LEAD (2*(Q-1) >= N-1). The lease rule is unchanged:
    /// the Q-th newest acknowledged send time, whoever acknowledged.
    fn asked_acks(&self, now: Time, seq: u64) -> PeerSet {
        let n = self.ids.len();
        let want = self.quorum - 1;
        let fits = self.lease_len > self.cfg.heartbeat * 2 + self.cfg.rtt;
        let sparse = !self.cfg.sabotage.dense_acks
            && want + 1 < n
            && fits
            && self.settled(now)
            && self.leadership.as_ref().is_some_and(|l| {
                l.seq >= 1
                    && (self.cfg.sabotage.sparse_ignores_misses
                        || l.clean >= l.need
                    // If this LEAD's asked ACKs are lost, the lease rests on what is
                    // acknowledged already, sent with the lease length of its day: it
                    // must last until the ACKs of the next LEAD (one heartbeat of the
                    // current timers, plus an RTT). `fits` alone judged the new timers
                    // only: after a reload to a longer heartbeat, one lost ACK cost
                    // the lease (tests/sparse_adversary.rs). With RTT/4 of room: the
                    // next LEAD's timer may fire late and this clock may run fast
                    // against real time, and with the lease ending exactly RTT after
                    // the next LEAD's due time the swarm's L-rest lapsed (9 of 10,000
                    // seeds, reloads aimed at this edge, every delay RTT/2).
                    && (self.cfg.sabotage.sparse_ignores_lease_held
                        || l.lease_until().is_some_and(|u| {
                            u > now + self.cfg.heartbeat + self.cfg.rtt + self.cfg.rtt / 4
                        })))
            });
        let mut set = PeerSet::EMPTY;
        if !sparse {
            return set;
        }
        let others = n - 1;
        let start = (seq % others as u64) as usize * want % others;
        for j in 0..want {
            let f = (start + j) % others;
            let i = if f >= self.me { f + 1 } else { f };
            set.insert(self.ids[i]);
        }
        set
    }

    /// True when a server preferred to this one may take the seat (`preempt-delay` is
    /// set and a server of higher priority is configured): the handover waits for
    /// that server's fit ACKs, and the choice among several rests on which of them
    /// were heard (SPEC 14: no detours). Read a heartbeat late, a fit ACK of the most
    /// preferred server came after the delay of a less preferred one had run out, and
    /// the swarm's P-after saw the seat move twice.
    fn may_be_preempted(&self) -> bool {
        let mine = self.cfg.servers[self.me].priority;
        self.cfg.preempt_delay.is_some()
            && self
                .cfg
                .servers
                .iter()
                .enumerate()
                .any(|(i, s)| i != self.me && !self.witness[i] && s.priority > mine)
    }

    pub(super) fn step_down_at(&self, l: &Leadership) -> Time {
        // A new leader gets K*HBT to gather a lease; after that it must keep one.
        (l.term_since + self.hold).max(l.lease_until().unwrap_or(Time::ZERO))
    }

    /// The servers this leader heard within two heartbeats and an RTT (itself
    /// included): the `alive` map of its LEADs. Only direct hearing counts, never a
    /// vouch. With sparse acknowledgements a follower is asked every second LEAD, so
    /// its newest ACK is up to two heartbeats old when a LEAD leaves, a little more
    /// when that LEAD's timer fires late: the RTT covers that.
    pub(super) fn alive(&self) -> PeerSet {
        let mut set = PeerSet::EMPTY;
        set.insert(self.ids[self.me]);
        let now = self.last_now.as_nanos();
        // In nanoseconds, the window once: comparing Durations per peer converted each
        // age and re-added the window (issue 25). The same answer: an age saturates at
        // zero as `saturating_since` does, and a window past u64 nanoseconds (584
        // years) admits every age either way.
        let window = crate::time::duration_nanos(self.cfg.heartbeat * 2 + self.cfg.rtt);
        for (i, p) in self.peers.iter().enumerate() {
            if p.heard_at
                .is_some_and(|t| now.saturating_sub(t.as_nanos()) <= window)
            {
                set.insert(self.ids[i]);
            }
        }
        set
    }

    pub(super) fn on_ack(&mut self, s: usize, term: u64, seq: u64) {
        let quorum = self.quorum;
        if let Some(l) = &mut self.leadership {
            if l.record_ack(s, term, seq) {
                l.update_lease(quorum);
            } else {
                self.counters.unmatched_acks += 1;
            }
        }
    }

    pub(super) fn send_lead(&mut self, now: Time) {
        let hold = self.hold;
        // The leader hears itself: its own faith and hold promise cover each LEAD it
        // sends (its lease counts itself as acknowledged), on disk before it leaves.
        self.update_promise(now, hold);
        self.persist();
        // Did every ACK the previous LEAD asked for come? (Read before this LEAD, at
        // the latest at this heartbeat: docs/PROTOCOL.md, "Reads at the heartbeat".)
        let ids = &self.ids;
        if let Some(l) = self.leadership.as_mut() {
            l.note_heartbeat(ids);
        }
        let seq = self.leadership.as_ref().map_or(1, |l| l.seq + 1);
        let asked = self.asked_acks(now, seq);
        // Targeted only after a sparse LEAD: the first sparse LEAD after one that asked
        // everyone goes to everyone, so the follower it does not name has it, and
        // arms its timer from it, not from the dense LEAD a heartbeat older (which
        // left it with no room for a lost turn, and opened its round a heartbeat
        // before the named followers' faith ended after a crash: the review's
        // tests/targeted_adversary.rs).
        let targeted = !asked.is_empty()
            && !self.cfg.sabotage.untargeted
            && (self.cfg.sabotage.first_sparse_targeted
                || self.leadership.as_ref().is_some_and(|l| l.asks_some()));
        let (term, seq) = {
            let l = self
                .leadership
                .as_mut()
                .expect("send_lead needs leadership");
            l.seq += 1;
            l.next_lead_at = now + self.cfg.heartbeat;
            l.record_send(self.me, now, self.lease_len, asked);
            l.update_lease(self.quorum);
            (l.term, l.seq)
        };
        self.send_lead_msg(term, seq, false, None, asked, targeted);
        // A healthy leader never starts a round against itself.
        self.watch_leader(now, self.me, term, seq, hold);
    }

    pub(super) fn send_lead_msg(
        &mut self,
        term: u64,
        seq: u64,
        resign: bool,
        to: Option<usize>,
        acks: PeerSet,
        targeted: bool,
    ) {
        // Rounded up: a follower's faith must never end before the lease the leader
        // computes from its own exact hold (issue 10, finding 2).
        let hold_ms = if self.cfg.sabotage.hold_rounded_down {
            ms_floor(self.hold)
        } else {
            ms_ceil(self.hold)
        };
        let msg = self.message(
            term,
            Body::Lead {
                seq,
                hold_ms,
                resign,
                successor: to.map_or(0, |i| self.ids[i]),
                unfit: self.unfit(),
                alive: self.alive(),
                acks,
            },
        );
        // A LEAD that asks only some followers goes only to them (issue 25): a follower
        // not asked would read it only to keep its faith, which the LEAD it is asked
        // for next renews a heartbeat later (see `asked_acks`).
        let dest = if targeted {
            Dest::Only(acks)
        } else {
            Dest::All
        };
        self.send(dest, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [u16; 3] = [1, 2, 3];

    /// The stack path of `update_lease` (up to `SMALL` servers) gives the Q-th latest
    /// acknowledged end, as the selection over a vector does for more.
    #[test]
    fn the_small_lease_path_is_the_qth_latest_end() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let n = 1 + (next() % SMALL as u64) as usize;
            let mut l = Leadership::new(1, n, Time(0));
            for a in l.acked.iter_mut() {
                *a = (next() % 3 != 0).then(|| Time(next() % 5));
            }
            let quorum = n / 2 + 1;
            let mut ends: Vec<Time> = l.acked.iter().flatten().copied().collect();
            ends.sort_unstable_by(|a, b| b.cmp(a));
            l.update_lease(quorum);
            assert_eq!(
                l.lease_until(),
                ends.get(quorum - 1).copied(),
                "{:?}",
                l.acked
            );
        }
    }

    #[test]
    fn lease_is_qth_newest_ack_plus_length() {
        let ms = |m: u64| Time(m * 1_000_000);
        let len = Duration::from_millis(100);
        let mut l = Leadership::new(7, 5, ms(0));
        l.seq = 1;
        l.record_send(0, ms(10), len, PeerSet::EMPTY);
        l.update_lease(3);
        assert_eq!(l.lease_until(), None, "the leader alone is no majority");
        assert!(l.record_ack(1, 7, 1));
        assert!(!l.record_ack(2, 7, 2), "unknown LEAD");
        assert!(!l.record_ack(2, 6, 1), "other term");
        l.seq = 2;
        l.record_send(0, ms(20), len, PeerSet::EMPTY);
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
        l.record_send(0, ms(30), Duration::from_millis(500), PeerSet::EMPTY);
        l.update_lease(3);
        assert_eq!(l.lease_until(), Some(ms(120)));
    }

    /// Issue 25: the acknowledgements are current when every server acknowledged the
    /// LEAD before the newest (or the newest); one missing ACK makes them stale until
    /// that server acknowledges a later LEAD; a new term starts stale.
    #[test]
    fn acks_are_current_when_every_server_acked_the_previous_lead() {
        let ms = |m: u64| Time(m * 1_000_000);
        let len = Duration::from_millis(300);
        let mut l = Leadership::new(4, 3, ms(0));
        let send = |l: &mut Leadership, at: u64| {
            l.seq += 1;
            l.record_send(0, ms(at), len, PeerSet::EMPTY);
        };
        send(&mut l, 0);
        assert!(l.record_ack(1, 4, 1) && l.record_ack(2, 4, 1));
        assert!(
            !l.acks_current(&IDS),
            "no previous LEAD yet: the first one of a term"
        );
        send(&mut l, 100);
        assert!(
            l.acks_current(&IDS),
            "LEAD 1 acked by all, LEAD 2 in flight"
        );
        // LEAD 3 leaves; server 2's ACK of LEAD 2 is lost.
        assert!(l.record_ack(1, 4, 2));
        send(&mut l, 200);
        l.update_lease(2);
        assert!(!l.acks_current(&IDS), "server 2 missed LEAD 2");
        assert_eq!(
            l.lease_until(),
            Some(ms(400)),
            "the majority's lease (LEAD 2, acked by server 1) is unaffected by the check"
        );
        // A late ACK of LEAD 2 (or of LEAD 3) makes them current again.
        assert!(l.record_ack(2, 4, 3));
        assert!(l.acks_current(&IDS));
        send(&mut l, 300);
        assert!(l.record_ack(1, 4, 3));
        assert!(l.acks_current(&IDS), "both acked LEAD 3, LEAD 4 in flight");
        send(&mut l, 400);
        assert!(
            !l.acks_current(&IDS),
            "nobody acked LEAD 4 by the tick of LEAD 5"
        );
        assert!(l.record_ack(1, 4, 4));
        assert!(
            !l.acks_current(&IDS),
            "a majority is not enough: server 2 is behind"
        );
        assert!(l.record_ack(2, 4, 4));
        assert!(l.acks_current(&IDS));
        // A re-election: acknowledgements of the old term no longer count.
        l.begin_term(5, ms(450), false);
        assert!(!l.acks_current(&IDS));
        send(&mut l, 450);
        assert!(l.record_ack(1, 5, 1) && l.record_ack(2, 5, 1));
        assert!(!l.acks_current(&IDS), "first LEAD of term 5");
        send(&mut l, 550);
        assert!(l.acks_current(&IDS));
        assert!(
            !l.record_ack(1, 4, 4),
            "an ACK of the old term is no ACK of this one"
        );
    }

    /// Sparse acknowledgements: a server must have acknowledged the newest LEAD that
    /// asked it, not every LEAD; a LEAD that asked everyone asks it too.
    #[test]
    fn acks_are_current_when_every_server_acked_the_newest_lead_that_asked_it() {
        let ms = |m: u64| Time(m * 1_000_000);
        let len = Duration::from_millis(300);
        let only = |id: u16| {
            let mut s = PeerSet::EMPTY;
            s.insert(id);
            s
        };
        let mut l = Leadership::new(4, 3, ms(0));
        let send = |l: &mut Leadership, at: u64, asked: PeerSet| {
            l.seq += 1;
            l.record_send(0, ms(at), len, asked);
        };
        send(&mut l, 0, PeerSet::EMPTY);
        assert!(l.record_ack(1, 4, 1) && l.record_ack(2, 4, 1));
        send(&mut l, 100, only(2));
        assert!(l.record_ack(1, 4, 2), "asked: server 2 (index 1)");
        assert!(
            l.acked_through(&IDS, 2),
            "3 was asked last by LEAD 1 and acked it"
        );
        send(&mut l, 200, only(3));
        assert!(
            l.acks_current(&IDS),
            "LEAD 2 asked only server 2, which acked it"
        );
        assert!(
            !l.acked_through(&IDS, 3),
            "server 3 has not acked LEAD 3 yet"
        );
        assert!(l.record_ack(2, 4, 3));
        assert!(l.acked_through(&IDS, 3));
        send(&mut l, 300, only(2));
        // LEAD 4's ACK from server 2 is lost.
        send(&mut l, 400, PeerSet::EMPTY);
        assert!(
            !l.acks_current(&IDS),
            "server 2 did not ack LEAD 4, the newest that asked it"
        );
        assert!(
            l.acked_through(&IDS, 3),
            "up to LEAD 3 everything asked came"
        );
        assert!(l.record_ack(1, 4, 5));
        assert!(
            !l.acked_through(&IDS, 5),
            "LEAD 5 asked everyone; 3 is missing"
        );
        assert!(l.record_ack(2, 4, 5));
        assert!(l.acked_through(&IDS, 5));
    }
}
