//! The CANDIDATE (SPEC section 6): the tally board, and the moves between FOLLOWER
//! and LEADER (a LEAD accepted, VOTEs of a majority, a re-election, the step-down).
//! The leader's own state is in [`Leadership`] (`leadership.rs`), a handoff in
//! `resign.rs`.

use super::*;

pub use super::leadership::{Leadership, SENT_WINDOW};

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

/// A LEAD that is not a RESIGN, as the follower's path reads it.
#[derive(Copy, Clone, Debug)]
pub(super) struct LeadIn {
    pub term: u64,
    pub seq: u64,
    /// The hold it promises, in ms (`faith_hold`).
    pub hold_ms: u32,
    /// The followers asked to acknowledge it; empty: every follower.
    pub asked: PeerSet,
}

impl Node {
    pub(super) fn on_lead(&mut self, now: Time, s: usize, lead: LeadIn) {
        let LeadIn { term, seq, .. } = lead;
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
        self.on_lead_while_follower(now, s, lead);
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
    /// follow it, clear the tally board, and ACK to the leader if the LEAD asks this
    /// server to (`asked` empty: every follower), or if this server's fitness changed
    /// since its last ACK (the leader learns it a heartbeat sooner than at its next
    /// turn).
    fn on_lead_while_follower(&mut self, now: Time, s: usize, lead: LeadIn) {
        let LeadIn {
            term,
            seq,
            hold_ms,
            asked,
        } = lead;
        self.term = term;
        let hold = self.faith_hold(hold_ms);
        self.ack_hold_ms = ms_ceil(hold);
        self.update_promise(now, hold);
        // The ACK below leaves only once the term and the promise are on disk.
        self.persist();
        self.watch_leader(now, s, term, seq, hold);
        self.wait_for_next_turn(&asked);
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
        let my_turn = asked.is_empty() || asked.contains(self.ids[self.me]);
        if !my_turn && self.last_ack_unfit == Some(unfit) {
            self.counters.acks_not_asked += 1;
            return;
        }
        self.last_ack_unfit = Some(unfit);
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
        // Every ACK of this term follows the election: any fit one names a successor.
        self.unfit_from = (term, 0);
        self.unfit_wait = None;
        self.preempt_ask = None;
        if self.unfit() {
            warn!(
                "{}elected leader of term {term} as a last resort: no fit server claimed; health failing, handing over as soon as a fit server is known",
                self.log_tag
            );
        } else {
            info!("{}elected leader of term {term}", self.log_tag);
        }
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

    /// LEADER, the step-down deadline passed: the lease ended (or none came within
    /// K*HBT) without a majority renewing it.
    pub(super) fn on_step_down_timer(&mut self, now: Time) {
        let Some(l) = &self.leadership else { return };
        let had = l.lease_until().is_some();
        warn!(
            "{}lost quorum: stepping down from term {} ({})",
            self.log_tag,
            l.term,
            if had {
                "lease expired"
            } else {
                "no lease within K*HBT"
            }
        );
        self.step_down(now);
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
}
