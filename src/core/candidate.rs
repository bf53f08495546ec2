//! The CANDIDATE (SPEC section 6): the tally board of a follower, the acknowledgement
//! table and lease of a leader, and the `Node` handlers of LEADs, VOTEs, ACKs, the
//! heartbeat, the resignation and the step-down.

use super::*;

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
    /// When this server began leading `term` (a re-election restarts it): the window
    /// of K*HBT in which a leadership may still gather its lease.
    pub term_since: Time,
    /// When the next heartbeat is due.
    pub next_lead_at: Time,
    /// (term, seq, lease end) of recent LEADs.
    sent: VecDeque<(u64, u64, Time)>,
    /// Per server, the latest lease end among the LEADs it acknowledged.
    acked: Vec<Option<Time>>,
    lease_until: Option<Time>,
    /// The lease held when this server was re-elected, if it was still valid then: the
    /// lease of the new term never ends before it (SPEC section 6, re-election).
    floor: Option<Time>,
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
            term_since: now,
            next_lead_at: now,
            sent: VecDeque::with_capacity(SENT_WINDOW),
            acked: vec![None; n],
            lease_until: None,
            floor: None,
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
        self.acked.iter_mut().for_each(|a| *a = None);
        self.lease_until = self.floor;
    }

    /// Recomputes the lease: the Q-th latest lease end among the acknowledged LEADs of
    /// this term, never before the floor kept at a re-election.
    pub fn update_lease(&mut self, quorum: usize) {
        self.scratch.clear();
        self.scratch.extend(self.acked.iter().flatten());
        if self.scratch.len() < quorum {
            self.lease_until = self.floor;
            return;
        }
        let k = self.scratch.len() - quorum;
        let (_, qth, _) = self.scratch.select_nth_unstable(k);
        let qth = (*qth).max(self.floor.unwrap_or(Time::ZERO));
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
    /// Begins a planned handoff (SIGTERM, `yield`); returns false when not leader.
    ///
    /// The role stops being reported as leader at once and no LEAD leaves any more, so
    /// the lease end is fixed. The RESIGN that releases the followers waits for
    /// `handle_released` (every local supervisor has confirmed that its command exited)
    /// or for the lease end, whichever comes first (SPEC section 6, Resign).
    pub fn handle_yield(&mut self, now: Time) -> bool {
        self.handle_yield_to(now, None)
    }

    /// Begins a planned handoff to server `to` (`yield ID`, SPEC section 14): the RESIGN
    /// names it, and voters choose it when it makes an eligible claim in the round that
    /// follows (otherwise the usual choice). `None`, an unknown id or this server's own
    /// is a plain yield. Returns false when not leader.
    pub fn handle_yield_to(&mut self, now: Time, to: Option<u16>) -> bool {
        self.on_time(now);
        let to = to
            .and_then(|id| self.index[usize::from(id.min(255))])
            .map(usize::from)
            .filter(|&i| i != self.me);
        let ok = self.begin_resign(now, to, Handover::Yield);
        self.check_invariants(now);
        ok
    }

    pub(super) fn begin_resign(&mut self, now: Time, to: Option<usize>, reason: Handover) -> bool {
        if self.leadership.is_none() || matches!(self.resign, Resign::Waiting { .. }) {
            return false;
        }
        if let Resign::Again { term, seq, to, .. } = self.resign {
            // Re-elected within HBT/10 of an earlier resignation, whose second RESIGN is
            // still due: send that copy now (a duplicate, early) so this leadership can
            // be handed over too, rather than refusing a yield of a server that reports
            // leader (found by tests/groups.rs, yielding one group repeatedly).
            self.resign = Resign::Idle;
            self.send_lead_msg(term, seq, true, to);
        }
        let Some(l) = self.leadership.take() else {
            return false;
        };
        self.counters.handovers[reason as usize] += 1;
        self.drop_held_leads(l.term);
        self.tally.clear();
        self.push_event(Event::SteppedDown { term: l.term });
        let until = l.lease_until().filter(|&u| u > now).unwrap_or(now);
        self.push_event(Event::Resigning {
            term: l.term,
            until,
            to: to.map(|i| self.ids[i]),
            reason,
        });
        info!(
            "{}resigning leadership of term {} ({}{}): the RESIGN waits for local supervisors, {} ms at most",
            self.log_tag,
            l.term,
            reason.name(),
            to.map_or(String::new(), |i| format!(", to server {}", self.ids[i])),
            until.saturating_since(now).as_millis()
        );
        self.resign = Resign::Waiting {
            term: l.term,
            seq: l.seq,
            until,
            to,
        };
        if self.cfg.sabotage.resign_early || until <= now {
            self.send_resign(now);
        }
        true
    }

    /// Every local supervisor has confirmed that its command exited: the RESIGN of a
    /// planned handoff may leave now. Does nothing when no handoff is waiting.
    pub fn handle_released(&mut self, now: Time) {
        self.on_time(now);
        self.send_resign(now);
        self.check_invariants(now);
    }

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

    /// True while a planned handoff waits for local supervisors.
    pub fn resign_pending(&self) -> bool {
        matches!(self.resign, Resign::Waiting { .. })
    }

    /// True once no handoff is under way (both RESIGNs have been queued, or none began):
    /// a stopping daemon may exit.
    pub fn resign_complete(&self) -> bool {
        self.resign == Resign::Idle
    }

    /// Emits held outputs, in order, while no write is outstanding.
    pub(super) fn release(&mut self, now: Time) {
        while self.requested.is_none() {
            let Some(h) = self.held.pop_front() else {
                break;
            };
            match h {
                Held::Send(dest, msg) => self.emit_send(dest, msg),
                Held::SelfVote(term) => {
                    self.push_event(Event::Voted {
                        term,
                        candidate: self.cfg.id,
                    });
                    self.on_vote(now, self.me, term);
                }
                Held::Reelect(term) => self.apply_reelection(now, term),
            }
        }
    }

    pub(super) fn step_down_at(&self, l: &Leadership) -> Time {
        // A new leader gets K*HBT to gather a lease; after that it must keep one.
        (l.term_since + self.hold).max(l.lease_until().unwrap_or(Time::ZERO))
    }

    /// The servers this leader heard within two heartbeats (itself included): the
    /// `alive` map of its LEADs. Only direct hearing counts, never a vouch.
    pub(super) fn alive(&self) -> PeerSet {
        let mut set = PeerSet::EMPTY;
        set.insert(self.ids[self.me]);
        let now = self.last_now;
        for (i, p) in self.peers.iter().enumerate() {
            if p.heard_at
                .is_some_and(|t| now.saturating_since(t) <= self.cfg.heartbeat * 2)
            {
                set.insert(self.ids[i]);
            }
        }
        set
    }

    pub(super) fn on_lead(&mut self, now: Time, s: usize, term: u64, seq: u64, hold_ms: u32) {
        if term < self.term {
            self.counters.stale_leads += 1;
            return;
        }
        // Released by a RESIGN (no leader, its position recorded): a LEAD at or before
        // that position was sent before the RESIGN and overtaken by it. Accepting it
        // would bring back faith in a leadership that has ended, and this server would
        // abstain in the round that picks the successor (a yield to a named server
        // then fell back to the usual choice; the swarm found it by reordering).
        if self.leader.is_none() && (term, seq) <= self.last_seen {
            self.counters.stale_leads += 1;
            return;
        }
        if self.leadership.is_some() {
            self.on_lead_while_leader(now, s, term);
        }
        self.on_lead_while_follower(now, s, term, seq, hold_ms);
    }

    /// LEADER, a LEAD of another server at or above our term: step down (an error if
    /// it is our own term: SPEC section 8 says that cannot happen), then follow it.
    fn on_lead_while_leader(&mut self, now: Time, s: usize, term: u64) {
        let Some(l) = &self.leadership else { return };
        if term == l.term {
            error!(
                "{}leader {} also claims term {term}: stepping down",
                self.log_tag, self.ids[s]
            );
            self.counters.dual_leader += 1;
            self.push_event(Event::DualLeader {
                term,
                other: self.ids[s],
            });
        } else {
            info!(
                "{}leader {} of term {term} supersedes term {}",
                self.log_tag, self.ids[s], l.term
            );
        }
        self.step_down(now);
    }

    /// FOLLOWER, LEAD accepted: adopt its term and hold (on disk before the ACK),
    /// follow it, clear the tally board, and ACK to the leader.
    fn on_lead_while_follower(&mut self, now: Time, s: usize, term: u64, seq: u64, hold_ms: u32) {
        self.term = term;
        let hold = self.faith_hold(hold_ms);
        self.update_promise(now, hold);
        // The ACK below leaves only once the term and the promise are on disk.
        self.persist();
        self.watch_leader(now, s, term, seq, hold);
        self.tally.clear();
        // UNFIT also when this server hears too few servers to be elected: a leader
        // that counted it fit would hand over to a server no round can choose.
        // Not set for being a witness (a witness is never a successor anyway, and older
        // builds drop flagged ACKs), but set during the startup quiet period, when this
        // server could not take over (it may not vote).
        let unfit = !self.healthy
            || self.drained
            || now < self.quiet_until
            || usize::from(self.heard_count(now)) < self.quorum;
        let ack = self.message(term, Body::Ack { seq, unfit });
        // To the leader only: nobody else uses it, and idle traffic stays linear in
        // the number of servers (the LEAD's `alive` map tells the others who lives).
        let dest = if self.cfg.sabotage.ack_to_all {
            Dest::All
        } else {
            Dest::One(self.ids[s])
        };
        self.send(dest, ack);
    }

    /// A LEAD with RESIGN: releases this server only if it ends the leadership it
    /// follows (same leader, same term, a seq above the last seen). A late or duplicated
    /// RESIGN of any other leadership is ignored (SPEC section 5).
    pub(super) fn on_resign(&mut self, now: Time, s: usize, term: u64, seq: u64, successor: u16) {
        let follows = if self.cfg.sabotage.volatile_led {
            term >= self.term && self.leader.is_none_or(|l| l == s)
        } else {
            self.leader == Some(s) && self.last_seen.0 == term && seq > self.last_seen.1
        };
        if !follows || self.leadership.is_some() {
            debug!(
                "{}ignored a RESIGN of term {term} seq {seq} from {} (not the followed leadership)",
                self.log_tag, self.ids[s]
            );
            return;
        }
        self.successor = self.index[usize::from(successor.min(255))].map(usize::from);
        if self.successor == Some(self.me) {
            self.named_at = Some(now);
        }
        match self.successor {
            Some(p) => info!(
                "{}leader {} resigned term {term}, handing over to server {}",
                self.log_tag, self.ids[s], self.ids[p]
            ),
            None => info!(
                "{}leader {} resigned term {term}",
                self.log_tag, self.ids[s]
            ),
        }
        self.term = self.term.max(term);
        self.last_seen = self.last_seen.max((term, seq));
        self.release_leader(now);
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
        // A round held open for this resignation may now be complete.
        self.decide_if_complete(now);
    }

    pub(super) fn on_vote(&mut self, now: Time, voter: usize, term: u64) {
        if term < self.term
            || self.witness[self.me]
            || self.resign_pending()
            || term <= self.refuse_votes_upto
        {
            return;
        }
        let count = self
            .tally
            .record(voter, term, self.cfg.sabotage.stale_tallies);
        if count < self.quorum {
            return;
        }
        match self.leadership {
            None => self.on_quorum_while_follower(now, term),
            Some(_) => self.on_quorum_while_leader(now, term),
        }
    }

    /// FOLLOWER, VOTEs of a majority for `term`: become LEADER of it.
    fn on_quorum_while_follower(&mut self, now: Time, term: u64) {
        // Never lead a term already led (persisted, so across restarts too): late or
        // duplicated VOTEs must not revive a leadership that was given up, whose RESIGN
        // may already have released the followers.
        if term <= self.led_term {
            return;
        }
        self.led_term = term;
        self.term = term;
        self.persist();
        self.leadership = Some(Leadership::new(term, self.ids.len(), now));
        self.counters.elected += 1;
        self.push_event(Event::Elected { term });
        info!("{}elected leader of term {term}", self.log_tag);
        self.send_lead(now);
    }

    /// LEADER, VOTEs of a majority for a higher `term`: re-elected, same leader. The
    /// lease goes on in the old term until
    /// led_term = term is on disk: reported at once, the new term could be led a second
    /// time by a restart that the write did not survive (late VOTEs of that term elect
    /// it again; swarm seed 31270).
    fn on_quorum_while_leader(&mut self, now: Time, term: u64) {
        let led = self.leadership.as_ref().map_or(u64::MAX, |l| l.term);
        if term > led && term > self.led_term {
            self.led_term = term;
            self.term = term;
            self.persist();
            self.held.push_back(Held::Reelect(term));
            self.release(now);
        }
    }

    /// A re-election whose led_term is durable now takes effect: LEADs of the new term,
    /// reported as the term led.
    pub(super) fn apply_reelection(&mut self, now: Time, term: u64) {
        let keep_acks = self.cfg.sabotage.reelect_keeps_acks;
        let Some(l) = self.leadership.as_mut().filter(|l| term > l.term) else {
            return;
        };
        l.begin_term(term, now, keep_acks);
        self.push_event(Event::Elected { term });
        debug!("{}re-elected in term {term}", self.log_tag);
        self.send_lead(now);
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
        let (term, seq) = {
            let l = self
                .leadership
                .as_mut()
                .expect("send_lead needs leadership");
            l.seq += 1;
            l.next_lead_at = now + self.cfg.heartbeat;
            l.record_send(self.me, now, self.lease_len);
            l.update_lease(self.quorum);
            (l.term, l.seq)
        };
        self.send_lead_msg(term, seq, false, None);
        // A healthy leader never starts a round against itself.
        self.watch_leader(now, self.me, term, seq, hold);
    }

    /// Forgets the heartbeats of `term` still waiting for a write: that leadership
    /// has ended, and a LEAD leaving later would promise a hold this server may no
    /// longer have on disk (the swarm found one after a reload shrank the promise).
    /// Not sending a LEAD is always safe.
    pub(super) fn drop_held_leads(&mut self, term: u64) {
        self.held.retain(|h| {
            !matches!(h, Held::Send(_, m) if m.term == term
                && matches!(m.body, Body::Lead { resign: false, .. }))
        });
    }

    pub(super) fn send_lead_msg(&mut self, term: u64, seq: u64, resign: bool, to: Option<usize>) {
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
            },
        );
        self.send(Dest::All, msg);
    }

    /// Sends the first RESIGN of a waiting handoff and schedules the second. Followers
    /// are released only now, once no local command can still run.
    pub(super) fn send_resign(&mut self, now: Time) {
        let Resign::Waiting { term, seq, to, .. } = self.resign else {
            return;
        };
        // A restarted server's previous incarnation may have reported a lease that runs
        // until its quiet period ends at the latest (its last LEAD left before the
        // restart, and the quiet period, max(K*HBT, the hold promise on disk), covers
        // any lease it could have computed). A RESIGN releases followers from the faith
        // that lease rests on, so it waits for the quiet period too. Without this, a
        // restart that live-leader VOTEs re-elected at once, followed by a handover (a
        // check that has not risen yet), let the next lease overlap the old one.
        if now < self.quiet_until && !self.cfg.sabotage.resign_early {
            info!(
                "{}the RESIGN of term {term} waits for the quiet period after the restart",
                self.log_tag
            );
            self.resign = Resign::Waiting {
                term,
                seq,
                until: self.quiet_until,
                to,
            };
            return;
        }
        self.send_lead_msg(term, seq + 1, true, to);
        self.resign = Resign::Again {
            term,
            seq: seq + 2,
            at: now + self.cfg.heartbeat / 10,
            to,
        };
        // Its own vote in the round that follows goes to the successor too.
        self.successor = to;
        self.push_event(Event::Resigned { term });
        info!("{}RESIGN of term {term} sent", self.log_tag);
        self.resigned_last = true;
        // VOTEs of a round already in flight (cast for this server as the live leader)
        // must not make it lead again at once: a yield hands over. Volatile on purpose:
        // leading such a term would be safe (it never led it), only not a handoff, and
        // a persisted mark cost a whole extra round after a restart (the swarm's L1).
        self.refuse_votes_upto = self.refuse_votes_upto.max(term.saturating_add(1));
        if self.leader == Some(self.me) {
            self.release_leader(now);
        }
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
    }

    pub(super) fn step_down(&mut self, now: Time) {
        let Some(l) = self.leadership.take() else {
            return;
        };
        self.drop_held_leads(l.term);
        self.push_event(Event::SteppedDown { term: l.term });
        if self.leader == Some(self.me) {
            // Its lease has ended (or a newer leader superseded it): its own vote is free.
            self.release_leader(now);
        }
        self.tally.clear();
        if self.elector == ElectorState::Watching {
            let wait = self.retry_wait();
            self.elector_deadline = self.elector_deadline.min(now + wait);
        }
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
