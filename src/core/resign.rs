//! A planned handoff (SPEC section 6, Resign; section 14, yield to a server): the
//! leader's side (stop reporting leader, wait for local supervisors, then two RESIGNs)
//! and the follower's (released by the RESIGN of the leadership it follows).

use super::*;

/// A planned handoff in progress (SPEC section 6, Resign).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Resign {
    /// No handoff under way.
    Idle,
    /// No longer reporting leader; waiting for local supervisors to confirm that their
    /// commands exited, at most until `until` (the lease end). No LEAD leaves meanwhile.
    Waiting {
        term: u64,
        seq: u64,
        until: Time,
        to: Option<usize>,
    },
    /// The first RESIGN left; the second is due at `at`.
    Again {
        term: u64,
        seq: u64,
        at: Time,
        to: Option<usize>,
    },
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
            self.send_lead_msg(term, seq, true, to, PeerSet::EMPTY, false);
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

    /// True while a planned handoff waits for local supervisors.
    pub fn resign_pending(&self) -> bool {
        matches!(self.resign, Resign::Waiting { .. })
    }

    /// True once no handoff is under way (both RESIGNs have been queued, or none began):
    /// a stopping daemon may exit.
    pub fn resign_complete(&self) -> bool {
        self.resign == Resign::Idle
    }

    /// The RESIGN deadline: a handoff waited for supervisors until the lease end, or
    /// its second RESIGN is due.
    pub(super) fn on_resign_timer(&mut self, now: Time) {
        match self.resign {
            Resign::Waiting { .. } => {
                info!(
                    "{}lease ended before every local supervisor confirmed: resigning now",
                    self.log_tag
                );
                self.send_resign(now);
            }
            Resign::Again { term, seq, to, .. } => {
                self.resign = Resign::Idle;
                self.send_lead_msg(term, seq, true, to, PeerSet::EMPTY, false);
            }
            Resign::Idle => {}
        }
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
        self.send_lead_msg(term, seq + 1, true, to, PeerSet::EMPTY, false);
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
        self.resign_round = true;
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
}
