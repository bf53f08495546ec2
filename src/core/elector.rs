//! The ELECTOR (SPEC section 5): WATCHING and VOTING, the slate of claims in the
//! current round, faith in the followed leader, and the `Node` handlers of the
//! elector's events (LEADs heard, claims, the round's timer, the vote). The decision
//! itself, a pure function of the slate, is in `decision.rs`.

use super::*;

pub use super::decision::{Abstain, Decision, DecisionInput, decide};

/// One server's claim in a round, taken from its ELECT.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The term the claimant proposes (its own term + 1).
    pub term: u64,
    /// The newest LEAD position (term, seq) the claimant has seen.
    pub last: (u64, u64),
    /// The claimant's priority (higher wins ties).
    pub priority: u8,
    /// Servers the claimant heard within K*HBT, itself included.
    pub heard: u8,
    /// The claimant says it may not lead now.
    pub ineligible: bool,
    /// With `ineligible`: the claimant is unhealthy only (not drained, not stopping, not
    /// resigning, its checks have had time to rise), so it may be elected as a last
    /// resort (SPEC section 13).
    pub last_resort: bool,
}

impl Claim {
    /// True when the claimant could be chosen: it says it may lead, is no witness
    /// (`witness`), and hears a majority (SPEC section 5; `ignore_heard` is the
    /// test-only breakage of that rule).
    pub(super) fn could_be_chosen(&self, witness: bool, quorum: usize, ignore_heard: bool) -> bool {
        !self.ineligible && !witness && (ignore_heard || usize::from(self.heard) >= quorum)
    }

    /// True when the claimant could be chosen as a last resort, in a round with no
    /// eligible claimant and no live leader: it is unhealthy only, no witness, and hears
    /// a majority (SPEC section 13).
    pub(super) fn could_be_last_resort(
        &self,
        witness: bool,
        quorum: usize,
        ignore_heard: bool,
    ) -> bool {
        self.ineligible
            && self.last_resort
            && !witness
            && (ignore_heard || usize::from(self.heard) >= quorum)
    }

    /// True when the claim may elect someone: eligible, or a last resort.
    pub(super) fn may_lead(&self) -> bool {
        !self.ineligible || self.last_resort
    }
}

/// The ELECTOR's two states.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ElectorState {
    /// Following a leader, or waiting to retry.
    Watching,
    /// Collecting claims for RTT before deciding.
    Voting,
}

impl ElectorState {
    /// The lower-case name used in status output.
    pub fn name(self) -> &'static str {
        match self {
            ElectorState::Watching => "watching",
            ElectorState::Voting => "voting",
        }
    }
}

/// The latest claim per server in the current round, indexed by server position.
#[derive(Clone, Debug)]
pub struct Slate {
    claims: Vec<Option<Claim>>,
    count: usize,
}

impl Slate {
    /// An empty slate for `n` servers.
    pub fn new(n: usize) -> Slate {
        Slate {
            claims: vec![None; n],
            count: 0,
        }
    }

    /// Records `claim` as the latest from server `idx`. A claim for the same term keeps
    /// the higher heard count: a renewed claim (`Node::refresh_claim`) only raises it,
    /// so a lower count for that term is the older copy, overtaken in the network.
    pub fn record(&mut self, idx: usize, mut claim: Claim) {
        if let Some(old) = self.claims[idx].filter(|c| c.term == claim.term) {
            claim.heard = claim.heard.max(old.heard);
        }
        if self.claims[idx].replace(claim).is_none() {
            self.count += 1;
        }
    }

    /// Forgets every claim.
    pub fn clear(&mut self) {
        if self.count > 0 {
            self.claims.iter_mut().for_each(|c| *c = None);
            self.count = 0;
        }
    }

    /// How many servers have a claim.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no server has a claim.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The claim of server `idx`, if any.
    pub fn get(&self, idx: usize) -> Option<&Claim> {
        self.claims[idx].as_ref()
    }

    /// The round's term: the highest proposed term among the claims.
    pub fn round_term(&self) -> Option<u64> {
        self.claims.iter().flatten().map(|c| c.term).max()
    }
}

impl Node {
    /// When server `i` was last heard, directly or through the followed leader.
    pub(super) fn last_heard(&self, i: usize) -> Option<Time> {
        self.peers[i].heard_at.max(self.peers[i].vouched_at)
    }

    /// Records that the leader `s`, in a LEAD that is the newest seen, reports the
    /// servers of `alive` heard.
    pub(super) fn vouch(&mut self, now: Time, s: usize, alive: PeerSet) {
        for id in alive.iter() {
            if let Some(i) = self.index.get(usize::from(id)).copied().flatten() {
                let i = usize::from(i);
                if i != self.me && i != s {
                    self.peers[i].vouched_at = Some(now);
                }
            }
        }
    }

    pub(super) fn leader_live(&self, now: Time) -> bool {
        self.leader.is_some() && now < self.faith_until
    }

    /// Servers heard within K*HBT + HBT, this one included. The extra heartbeat matters:
    /// a hold timer fires K*HBT after the last LEAD, a little late on a real scheduler,
    /// and the other followers were last heard by their ACKs of that same LEAD; with a
    /// window of exactly K*HBT every survivor counted only itself after a leader crash,
    /// and the first round elected nobody.
    pub(super) fn heard_count(&self, now: Time) -> u8 {
        let window = self.hold + self.cfg.heartbeat;
        let others = (0..self.ids.len())
            .filter(|&i| i != self.me)
            .filter(|&i| {
                self.last_heard(i)
                    .is_some_and(|t| now.saturating_since(t) <= window)
            })
            .count();
        u8::try_from(others + 1).unwrap_or(u8::MAX)
    }

    /// Forgets the leader and releases this server's faith in it (only a RESIGN of the
    /// followed leadership, or this server's own RESIGN, may do that).
    pub(super) fn release_leader(&mut self, now: Time) {
        self.leader = None;
        self.faith_until = self.faith_until.min(now);
    }

    pub(super) fn enter_voting(&mut self, now: Time) {
        self.elector = ElectorState::Voting;
        self.elector_deadline = now + self.cfg.rtt;
        self.counters.rounds += 1;
        let claim = Claim {
            term: self.term.saturating_add(1),
            last: self.last_seen,
            priority: self.cfg.servers[self.me].priority,
            heard: self.heard_count(now),
            // A server waiting to resign may not lead the next round either.
            // A sitting leader claims eligible even when unfit: it keeps its seat until a
            // fit server acknowledges it (SPEC 13), and a round must be able to re-elect
            // it in a higher term, or a server whose term ran ahead never follows it,
            // never ACKs, and is never handed the seat (swarm seed 5138).
            ineligible: self.claims_ineligible(),
            last_resort: self.claims_last_resort(now),
        };
        self.slate.record(self.me, claim);
        if now < self.quiet_until {
            // A server that may not vote yet stays out of other slates too: its claim
            // would make a majority slate that cannot elect anyone, and every such round
            // raises the others' terms for nothing.
            return;
        }
        debug!(
            "{}round opened: proposing term {} (heard {})",
            self.log_tag, claim.term, claim.heard
        );
        self.send_claim(&claim);
        self.decide_if_complete(now);
    }

    /// Sends this server's claim to every server as an ELECT.
    fn send_claim(&mut self, claim: &Claim) {
        let msg = self.message(
            claim.term,
            Body::Elect {
                last_term: claim.last.0,
                last_seq: claim.last.1,
                priority: claim.priority,
                heard: claim.heard,
                ineligible: claim.ineligible,
                last_resort: claim.last_resort,
            },
        );
        self.send(Dest::All, msg);
    }

    /// True when this server's claim must say INELIGIBLE now (see `enter_voting`).
    fn claims_ineligible(&self) -> bool {
        (self.unfit() && self.leadership.is_none()) || self.resigned_last || self.resign_pending()
    }

    /// True when this server's INELIGIBLE claim may still elect it as a last resort
    /// (SPEC section 13): it is unhealthy and nothing else, not drained, not stopping,
    /// not a witness, not resigning or just resigned, and its checks have had time to
    /// rise since it started (`set_last_resort`), so a cold start waits for a server
    /// that is fit rather than electing one that has merely not been checked yet.
    fn claims_last_resort(&self, now: Time) -> bool {
        self.claims_ineligible()
            && !self.healthy
            && !self.drained
            && !self.witness[self.me]
            && !self.resigned_last
            && !self.resign_pending()
            && self.last_resort_from.is_some_and(|t| now >= t)
            && !self.cfg.sabotage.no_last_resort
    }

    /// Sends this server's claim again when the claim it made in this round excluded it
    /// and no longer would: it said it heard fewer than Q servers and it now hears Q
    /// (SPEC section 14, cold start by preference), or it said INELIGIBLE and this
    /// server has turned fit since (a round already open when the only fit server
    /// recovered backed off instead of electing it). After a silence (a cold start, a heal)
    /// the first servers to open a round have heard nobody yet: their claims said
    /// `heard 1`, so only the last claimant was eligible, and since every group opens
    /// its round in lock step, every group voted for that one server (issue 22). The
    /// other claims arrive within the window, and so does this update; voters record the
    /// latest claim per sender and wait for it before deciding early
    /// (`slate_complete`). At most twice per round: each change happens once.
    pub(super) fn refresh_claim(&mut self, now: Time) {
        if self.elector != ElectorState::Voting || now < self.quiet_until {
            return;
        }
        let Some(mut claim) = self.slate.get(self.me).copied() else {
            return;
        };
        let heard = self.heard_count(now);
        let hears_more =
            usize::from(claim.heard) < self.quorum && usize::from(heard) >= self.quorum;
        let turned_fit = claim.ineligible && !self.claims_ineligible();
        // Its checks have now had time to rise: a last resort from here on.
        // (A claim that said eligible stays so for this round: only what it would now
        // say as an INELIGIBLE one can change, or a claim would be sent on every call.)
        let last_resort = claim.ineligible && !turned_fit && self.claims_last_resort(now);
        let turned_last_resort = last_resort != claim.last_resort;
        if !hears_more && !turned_fit && !turned_last_resort {
            return;
        }
        claim.heard = claim.heard.max(heard);
        claim.ineligible = claim.ineligible && !turned_fit;
        claim.last_resort = last_resort;
        self.slate.record(self.me, claim);
        debug!(
            "{}claim for term {} renewed (heard {heard}, eligible {}, last resort {})",
            self.log_tag, claim.term, !claim.ineligible, claim.last_resort
        );
        self.send_claim(&claim);
    }

    pub(super) fn retry_wait(&mut self) -> Duration {
        let rtt = crate::time::duration_nanos(self.cfg.rtt);
        let base = Duration::from_nanos(2 * rtt + self.rng.below(rtt));
        base.checked_mul(1 << self.retry_doublings.min(16))
            .unwrap_or(self.hold)
            .min(self.hold)
    }

    pub(super) fn finish_round(&mut self, now: Time) {
        let ignore_live = self.cfg.sabotage.ignore_live_leader;
        let resign_round = std::mem::take(&mut self.resign_round);
        let decision = decide(&DecisionInput {
            slate: &self.slate,
            quorum: self.quorum,
            witness: &self.witness,
            ids: &self.ids,
            quiet: now < self.quiet_until,
            live_leader: if self.leader_live(now) && !ignore_live {
                self.leader
            } else {
                None
            },
            voted: (self.voted_term, self.voted_for),
            ignore_heard: self.cfg.sabotage.ignore_heard,
            unranked: self.cfg.sabotage.unranked_claims,
            successor: self.successor,
            after_resign: self.resigned_last || resign_round,
        });
        if let (Some(p), Decision::Vote { candidate, .. }) = (self.successor.take(), decision) {
            if p == candidate {
                self.counters.successor_votes += 1;
            }
        }
        // A round with a majority slate is worth retrying soon (its heard counts may just
        // have been stale); a round without one backs off, so a cut-off server stays quiet.
        // A majority slate in which every claim says INELIGIBLE (every server unhealthy,
        // drained or a witness) cannot elect anyone until one turns fit, which restarts
        // the rounds at once (on_fit): back off too, rather than repeat it every 2-3 RTT.
        // Not after this server's own resignation: it is eligible again in the next round
        // (its INELIGIBLE claim was for this one only), so that round must come soon.
        let all_ineligible = !self.resigned_last
            && (0..self.ids.len()).all(|i| self.slate.get(i).is_none_or(|c| !c.may_lead()));
        if self.slate.len() >= self.quorum && !all_ineligible {
            self.retry_doublings = 0;
        } else {
            self.retry_doublings = self.retry_doublings.saturating_add(1);
        }
        self.elector = ElectorState::Watching;
        self.slate.clear();
        self.resigned_last = false;
        let wait = self.retry_wait();
        self.elector_deadline = now + wait;
        match decision {
            Decision::Vote { term, candidate } => self.cast_vote(now, term, candidate),
            Decision::Abstain(why) => {
                self.counters.abstentions += 1;
                if why != Abstain::NoMajority {
                    debug!("{}round closed without a vote: {why:?}", self.log_tag);
                }
            }
        }
    }

    pub(super) fn cast_vote(&mut self, now: Time, term: u64, candidate: usize) {
        self.counters.votes += 1;
        self.voted_term = term;
        self.voted_for = Some(candidate);
        self.term = self.term.max(term);
        self.persist();
        debug!(
            "{}voting for {} in term {term}",
            self.log_tag, self.ids[candidate]
        );
        if candidate == self.me {
            // A round after its resignation chose this server: its votes count again.
            self.refuse_votes_upto = self.refuse_votes_upto.min(term.saturating_sub(1));
            // Delivered locally, but only once the vote is durable, like any other.
            self.held.push_back(Held::SelfVote(term));
            self.release(now);
        } else {
            let msg = self.message(
                term,
                Body::Vote {
                    candidate: self.ids[candidate],
                },
            );
            self.send(Dest::One(self.ids[candidate]), msg);
        }
    }

    /// ELECT from `s` (SPEC section 5): a claim of a server that cannot be hearing our
    /// live leader is ignored in either state; otherwise one handler per state.
    pub(super) fn on_elect(&mut self, now: Time, s: usize, claim: Claim) {
        if self.leader_live(now) && self.is_straggler(&claim) {
            return;
        }
        match self.elector {
            ElectorState::Watching => self.on_elect_while_watching(now, s, claim),
            ElectorState::Voting => self.on_elect_while_voting(now, s, claim),
        }
    }

    /// WATCHING, ELECT: record the claim and enter VOTING.
    fn on_elect_while_watching(&mut self, now: Time, s: usize, claim: Claim) {
        // A claim for a term we have reached opens no round: it comes from a round that
        // just closed, or from a server behind us, which our next LEAD or our own retry
        // timer (always armed without a leader) will bring along. Without this, the
        // tail of one round's claims opened the next round at every server.
        if claim.term <= self.term {
            return;
        }
        self.slate.record(s, claim);
        self.enter_voting(now);
        self.decide_if_complete(now);
    }

    /// VOTING, ELECT: record the claim (the latest per sender); decide early once the
    /// slate is complete.
    fn on_elect_while_voting(&mut self, now: Time, s: usize, claim: Claim) {
        self.slate.record(s, claim);
        self.refresh_claim(now);
        self.decide_if_complete(now);
    }

    /// The ELECTOR's timer (SPEC section 5): one handler per state.
    pub(super) fn on_elector_timer(&mut self, now: Time) {
        match self.elector {
            // The hold, or the retry wait, ran out.
            ElectorState::Watching => self.enter_voting(now),
            // The VOTING window ended.
            ElectorState::Voting => self.finish_round(now),
        }
    }

    /// True once every server we can expect a claim from has made one: each server heard
    /// within K*HBT + HBT or never heard, except a leader whose hold has run out. Waiting the rest of
    /// the window could not change the slate, so the round may be decided now. Any slate
    /// is safe to decide on; this only saves up to RTT on every election, and makes a
    /// resignation's handoff nearly immediate (every server claims at once).
    pub(super) fn slate_complete(&self, now: Time) -> bool {
        if self.slate.len() < self.quorum {
            return false;
        }
        // Only a converged round: every claim proposes the same term. A server catching
        // up on a backlog of old claims waits the window out, instead of deciding one
        // round per stale claim (and raising its term each time).
        let e = self.slate.round_term();
        if (0..self.ids.len()).any(|i| self.slate.get(i).is_some_and(|c| Some(c.term) != e)) {
            return false;
        }
        // A live leader that claims INELIGIBLE has resigned: its RESIGN, sent first, is
        // still in flight. Deciding now would abstain for it and split the round.
        if let Some(l) = self.leader.filter(|_| self.leader_live(now)) {
            if self.slate.get(l).is_some_and(|c| c.ineligible) {
                return false;
            }
        }
        // A claim that may still be renewed (it said it heard fewer than Q, and its
        // claimant may hear more by now: `refresh_claim`) keeps the round open for the
        // rest of its window. Deciding without the update excluded, at a cold start,
        // every claimant but the last, in every group alike (issue 22). A claimant that
        // really hears too few costs the window, the full round of SPEC section 5.
        if !self.cfg.sabotage.ignore_heard
            && (0..self.ids.len()).any(|i| {
                self.slate.get(i).is_some_and(|c| {
                    c.may_lead() && !self.witness[i] && usize::from(c.heard) < self.quorum
                })
            })
        {
            return false;
        }
        let window = self.hold + self.cfg.heartbeat;
        let dead_leader = self.leader.filter(|_| !self.leader_live(now));
        // A server never heard since this one started is expected too: after a cold
        // start nobody has been heard yet, and a round decided on the first claims to
        // arrive left out the others, the preferred server among them (issue 22).
        // Waiting for it costs the rest of the window only while it stays silent.
        (0..self.ids.len()).all(|i| {
            self.slate.get(i).is_some()
                || Some(i) == dead_leader
                || self
                    .last_heard(i)
                    .is_some_and(|t| now.saturating_since(t) > window)
        })
    }

    pub(super) fn decide_if_complete(&mut self, now: Time) {
        if self.elector == ElectorState::Voting
            && !self.cfg.sabotage.full_window
            && self.slate_complete(now)
            && self.slate_has_eligible()
        {
            self.finish_round(now);
        }
    }

    /// True when some claim in the slate could be chosen. A round in which nobody is
    /// eligible (every server unhealthy or drained, say) is not decided early: it would
    /// end without a vote, so without raising the term, and every claim of that term
    /// arriving just after it (a duplicate, a late one) would open another round at
    /// once, whose claim did the same elsewhere: an ELECT storm at network speed. Left
    /// open for its window, a round absorbs them.
    pub(super) fn slate_has_eligible(&self) -> bool {
        let ignore_heard = self.cfg.sabotage.ignore_heard;
        (0..self.ids.len()).any(|i| {
            self.slate
                .get(i)
                .is_some_and(|c| c.could_be_chosen(self.witness[i], self.quorum, ignore_heard))
        })
    }

    /// True for a claim from a server that cannot be hearing our live leader: it proposes
    /// a term we are past, or (in our term) it is behind by at least max(K-1, 2) of the
    /// leader's LEADs (a follower whose hold expired missed K-1 at least; a healthy one
    /// is at most one behind, the LEAD in flight). Ignoring it is always safe (it only
    /// means we do not vote), and it keeps a cut-off or one-way-deaf follower from
    /// re-electing a healthy leader over and over: the leader's next LEAD it does hear
    /// brings it up to date.
    pub(super) fn is_straggler(&self, claim: &Claim) -> bool {
        let (term, seq) = self.last_seen;
        let lag = u64::from(self.cfg.missed_heartbeats - 1).max(2);
        if claim.term > term.saturating_add(1) {
            // Its term is ahead of our leader's: it cannot accept our leader's LEADs, and
            // only a round (re-electing our leader in its term) can bring the two
            // together. Ahead of the leadership, not of our own term: a leader whose own
            // term ran ahead of the term it leads (it voted for itself in a round that
            // did not re-elect it) ignored such a claimant as a straggler for good, and
            // the claimant never followed again (swarm seed 75336 of 100,000).
            return false;
        }
        claim.term <= self.term
            || claim.last.0 < term
            || (claim.last.0 == term && claim.last.1.saturating_add(lag) <= seq)
    }

    /// The faith a LEAD carrying `hold_ms` earns: max(own K*HBT, its hold), exactly.
    pub(super) fn faith_hold(&self, hold_ms: u32) -> Duration {
        self.hold.max(Duration::from_millis(u64::from(hold_ms)))
    }

    /// The ELECTOR's part of accepting a LEAD (from another server or from itself): the
    /// leader, its position, and faith until max(faith_until, now + hold). A later LEAD
    /// never shortens what an earlier one promised (SPEC section 5, WATCHING).
    pub(super) fn watch_leader(
        &mut self,
        now: Time,
        s: usize,
        term: u64,
        seq: u64,
        hold: Duration,
    ) {
        if self.leader != Some(s) && s != self.me {
            info!(
                "{}following leader {} in term {term}",
                self.log_tag, self.ids[s]
            );
        }
        self.leader = Some(s);
        self.successor = None;
        self.resign_round = false;
        self.faith_until = if self.cfg.sabotage.hold_replaced {
            now + hold
        } else {
            self.faith_until.max(now + hold)
        };
        self.last_seen = self.last_seen.max((term, seq));
        self.retry_doublings = 0;
        match self.elector {
            ElectorState::Watching => self.on_lead_while_watching(),
            ElectorState::Voting => self.on_lead_while_voting(term),
        }
    }

    /// After a LEAD that asked this follower and not every one (issue 25, targeted
    /// heartbeats): the timer that starts a round is its faith plus one heartbeat. A
    /// unicast leader sends such a LEAD only to the followers it asks, each every
    /// second heartbeat, so this follower's next LEAD comes two heartbeats later, or
    /// three when that one is lost: with the timer at its faith, one lost LEAD let it
    /// start a round against a healthy leader at K = 3. The faith itself (whom it votes
    /// for, and so the lease) is unchanged, and a crash is still found in time: the
    /// newest LEAD asked Q-1 followers, so any majority of survivors holds one that it
    /// did not ask, whose timer is at its faith (multicast: it had the LEAD unasked) or
    /// at the faith of the LEAD before plus a heartbeat, which is where the asked
    /// ones' faith ends. Its ELECT then opens the round at every follower whose faith
    /// is over, and the newest of them wins it, as without targeting.
    pub(super) fn wait_for_next_turn(&mut self, asked: &PeerSet) {
        if self.elector == ElectorState::Watching
            && self.leader.is_some_and(|l| l != self.me)
            && !asked.is_empty()
            && asked.contains(self.ids[self.me])
            && !self.cfg.sabotage.no_turn_wait
        {
            self.elector_deadline = self.faith_until + self.cfg.heartbeat;
        }
    }

    /// WATCHING, LEAD accepted: the timer is the faith.
    fn on_lead_while_watching(&mut self) {
        self.elector = ElectorState::Watching;
        self.slate.clear();
        self.elector_deadline = self.faith_until;
        // The round after a resignation is over (a leader followed): a server that
        // resigned is INELIGIBLE for that round only. Cleared in finish_round alone,
        // the flag outlived a round that a LEAD ended, and the next round, seconds
        // later, found this server INELIGIBLE for nothing.
        self.resigned_last = false;
    }

    /// VOTING, LEAD accepted: a LEAD of the round's term or later ends the round (back
    /// to WATCHING, as above); one of a lower term only says the old leader lives.
    fn on_lead_while_voting(&mut self, term: u64) {
        if self.slate.round_term().is_none_or(|e| term >= e) {
            self.on_lead_while_watching();
        }
    }

    /// Updates the hold promise for a LEAD accepted at `now` that earns `hold` of faith
    /// (SPEC section 4): it grows at once, and shrinks to `hold` only once the faith
    /// owed for longer holds has run out to within `hold`. So at every moment the
    /// promise covers the faith still owed, and is never a lifetime maximum.
    pub(super) fn update_promise(&mut self, now: Time, hold: Duration) {
        // After a restart the promise read from disk may still be owed, until the
        // quiet period ends, to the LEADs this server acknowledged before it crashed:
        // their faith died with the process. Shrunk at the first shorter LEAD, a
        // second crash left a shorter quiet period than a lease it had vouched for
        // (the simulator's "S2-disk", swarm seed 5828).
        let mut owed_until = self.faith_until;
        if !self.cfg.sabotage.restart_sheds_promise {
            owed_until = owed_until.max(self.quiet_until);
        }
        if hold >= self.promise || owed_until <= now + hold {
            if hold < self.promise {
                debug!(
                    "{}hold promise shrinks from {:?} to {hold:?}",
                    self.log_tag, self.promise
                );
            }
            self.promise = hold.max(self.promise_floor());
        }
        // What leaves next reflects this hold (the ACK of a LEAD that carries it, or
        // the LEAD itself): it waits for a pending write, which may already carry it
        // (a promise grown ahead by a staged reload asks for a write that holds
        // nothing, and growing no further asks for none). Without this the ACK left
        // with its hold on no disk (review of cd433a6:
        // tests/reload_stall_adversary.rs).
        // The bound is the lowest hold that may still land, not the disk's now: a
        // write that lowered the hold, asked for earlier, holds nothing and may land
        // after the datagram (second review).
        if ms_ceil(hold) > self.min_hold_pending() && self.requested.is_some() {
            self.write_holds = true;
        }
    }
}
