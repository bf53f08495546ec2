//! Health, drain and preference (SPEC sections 13 and 14): what this server may
//! claim, what it knows of its peers' fitness, and when a leader hands over.

use super::*;

impl Node {
    /// Sets this server's health (its checks and supervisors, SPEC section 13). An
    /// unhealthy server claims INELIGIBLE and says UNFIT in its ACKs; an unhealthy
    /// leader hands over as soon as another server is known to be fit, and keeps
    /// leading while none is.
    pub fn set_health(&mut self, now: Time, healthy: bool) {
        self.on_time(now);
        let was = self.unfit();
        self.healthy = healthy;
        self.on_unfit(now, was);
        self.consider_handover(now);
        self.check_invariants(now);
    }

    /// A leader that just turned unfit sends a LEAD at once: its UNFIT flag tells the
    /// followers, and their ACKs of it say who is fit now. A handover waits for those.
    pub(super) fn on_unfit(&mut self, now: Time, was_unfit: bool) {
        if was_unfit && !self.unfit() {
            // Turned fit: without a live leader, a round now, not at the backed-off
            // retry (rounds back off while every claim is INELIGIBLE).
            if self.elector == ElectorState::Watching
                && self.leadership.is_none()
                && !self.leader_live(now)
            {
                self.retry_doublings = 0;
                self.elector_deadline = self.elector_deadline.min(now);
                self.on_time(now);
            } else if self.elector == ElectorState::Voting && self.leadership.is_none() {
                // A round under way: this server's claim said INELIGIBLE; say eligible.
                self.retry_doublings = 0;
                self.refresh_claim(now);
                self.decide_if_complete(now);
            }
            return;
        }
        if was_unfit || !self.unfit() || self.resign != Resign::Idle {
            return;
        }
        if self.leadership.is_some() {
            self.send_lead(now);
        }
        if let Some(l) = &self.leadership {
            self.unfit_from = (l.term, l.seq);
            self.unfit_wait = Some(now + self.cfg.rtt);
        }
    }

    /// Drains (true) or undrains this server (`electctl drain`, SPEC section 13). The
    /// drain is persisted; a drained leader hands over as an unhealthy one does.
    pub fn set_drained(&mut self, now: Time, drained: bool) {
        self.on_time(now);
        let was = self.unfit();
        self.drained = drained;
        self.persist();
        self.on_unfit(now, was);
        self.consider_handover(now);
        self.check_invariants(now);
    }

    /// From when this server may be elected as a last resort while unhealthy (SPEC
    /// section 13): its start plus the time its checks need to rise (check-rise x
    /// check-interval + check-timeout), so that a cold start does not elect a server
    /// that has merely not been checked yet; `None` while it stops (a stopping server
    /// never leads). A round under way hears the change.
    pub fn set_last_resort(&mut self, now: Time, from: Option<Time>) {
        if self.last_resort_from == from {
            return;
        }
        self.on_time(now);
        self.last_resort_from = from;
        self.refresh_claim(now);
        self.check_invariants(now);
    }

    /// The health last set by `set_health`.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// True while drained.
    pub fn drained(&self) -> bool {
        self.drained
    }

    /// True when this server may not lead now: a witness, unhealthy or drained.
    pub fn unfit(&self) -> bool {
        self.witness[self.me] || !self.healthy || self.drained
    }

    /// Whether server `id` could take over now, for `status`: `Some(true)` when its
    /// latest ACK (or, from the followed leader, LEAD) within K*HBT + HBT said it could
    /// lead; `Some(false)` when it said it could not (a witness never can); `None` when
    /// no such report came within that window (a follower hears no other follower's
    /// ACKs). ELECT claims do not count here (see `Peer::report`).
    pub fn peer_fit(&self, now: Time, id: u16) -> Option<bool> {
        let i = usize::from(self.index[usize::from(id.min(255))]?);
        let window = self.hold + self.cfg.heartbeat;
        // A leader sends no ACKs: a follower's reports reach only the leader, and a
        // report that went stale is unknown, not unfit.
        let (at, fit) = self.peers[i].report?;
        if now.saturating_since(at) > window {
            return None;
        }
        Some(fit && !self.witness[i])
    }

    /// Records a fitness report from server `s`: `fit_since` restarts after a report
    /// that said unfit or after a silence longer than K*HBT + HBT.
    pub(super) fn note_fitness(&mut self, now: Time, s: usize, fit: bool) {
        let window = self.hold + self.cfg.heartbeat;
        let fresh = self.peers[s]
            .fit_at
            .is_some_and(|t| now.saturating_since(t) <= window);
        if !fit {
            // Remembered as a report (for `peer_fit`); `known_fit` needs `fit_since`.
            self.peers[s].fit_since = None;
            self.peers[s].fit_at = Some(now);
            return;
        }
        if !fresh || self.peers[s].fit_since.is_none() {
            self.peers[s].fit_since = Some(now);
        }
        self.peers[s].fit_at = Some(now);
    }

    /// Server `i` acknowledged, as fit, a LEAD of this leader at or after position
    /// `from` and no older than the one before the newest: it is alive and fit now.
    pub(super) fn acked_fit_since(&self, i: usize, from: (u64, u64)) -> bool {
        let Some(l) = &self.leadership else {
            return false;
        };
        let ack = self.peers[i].fit_ack;
        ack >= from && ack.0 == l.term && ack.1.saturating_add(2) >= l.seq
    }

    /// Server `i` was reported fit within K*HBT + HBT and never unfit since.
    pub(super) fn known_fit(&self, now: Time, i: usize) -> bool {
        let window = self.hold + self.cfg.heartbeat;
        i != self.me
            && !self.witness[i]
            && self.peers[i].fit_since.is_some()
            && self.peers[i]
                .fit_at
                .is_some_and(|t| now.saturating_since(t) <= window)
    }

    /// Wait for the answers to the LEAD sent when this server turned unfit: all of them
    /// from the servers heard lately, or RTT.
    fn awaiting_unfit_answers(&self, now: Time) -> bool {
        let from = self.unfit_from;
        let window = self.hold + self.cfg.heartbeat;
        let answered = (0..self.ids.len()).all(|i| {
            i == self.me
                || self.witness[i]
                || self.peers[i].ack_pos >= from
                || self.peers[i]
                    .heard_at
                    .is_none_or(|t| now.saturating_since(t) > window)
        });
        !answered && self.unfit_wait.is_some_and(|t| now < t)
    }

    /// True while this unfit leader has not yet chosen its successor: it waits (at most
    /// RTT from turning unfit) for the answers to the LEAD it sent then, and hands over
    /// once they are in if one was fit (`consider_handover`). The daemon holds a
    /// `drain` answer meanwhile, so that it can say whom it hands over to. As of the
    /// last call that drove this node: the wait ends at a deadline of its own
    /// (`Timer::UnfitWait`), so a driver that asks after each drive is never early.
    pub fn choosing_successor(&self) -> bool {
        let now = self.last_now;
        self.unfit()
            && self.resign == Resign::Idle
            && self.is_leader(now)
            && self.awaiting_unfit_answers(now)
    }

    /// A leader with a valid lease hands over when it is unfit and another server is
    /// known fit, or when a server of higher priority has been fit for `preempt-delay`
    /// (SPEC sections 13, 14). The successor is the fit server of highest priority, then
    /// smallest id.
    pub(super) fn consider_handover(&mut self, now: Time) {
        if self.resign != Resign::Idle || !self.is_leader(now) {
            return;
        }
        // An ask left behind by preempt-delay turned off (SIGHUP) kept this leader
        // unsettled (every follower acknowledging every LEAD) for the rest of its
        // term. One left behind by turning unfit would hand over at once, on old
        // answers, once fit again: it ends once its RTT has passed, as when no
        // preemption is due (`asked_before_preempt`: one LEAD per RTT).
        let expired = self.preempt_ask.is_some_and(|a| now >= a.until);
        if self.cfg.preempt_delay.is_none() || (self.unfit() && expired) {
            self.preempt_ask = None;
        }
        let mine = self.cfg.servers[self.me].priority;
        let best = |want: &dyn Fn(usize) -> bool| {
            (0..self.ids.len())
                .filter(|&i| self.known_fit(now, i) && want(i))
                .max_by_key(|&i| (self.cfg.servers[i].priority, std::cmp::Reverse(self.ids[i])))
        };
        let (to, reason) = if self.unfit() {
            let reason = if self.drained {
                Handover::Drain
            } else {
                Handover::Health
            };
            let from = self.unfit_from;
            if self.awaiting_unfit_answers(now) {
                return;
            }
            (best(&|i| self.acked_fit_since(i, from)), reason)
        } else if let Some(delay) = self.cfg.preempt_delay {
            // A server named successor keeps the seat for the delay before preempting.
            let named = self
                .named_at
                .is_some_and(|t| now.saturating_since(t) < delay);
            // No detours (SPEC sections 14, 15): the seat goes to the most preferred
            // server known fit, once it has been fit for the delay, and to nobody while
            // it has not. Handing it to a less preferred one that happened to be fit
            // for the delay first moved the group twice (1 -> 3 -> 2, issue 22), its
            // processor stopped and started twice.
            let waited = |i: usize| {
                self.peers[i]
                    .fit_since
                    .is_some_and(|t| now.saturating_since(t) >= delay)
            };
            let detours = self.cfg.sabotage.preempt_detours;
            let top = best(&|i| {
                !named
                    && self.cfg.servers[i].priority > mine
                    && self.acked_fit_since(i, (0, 0))
                    && (!detours || waited(i))
            });
            let p = top.filter(|&i| waited(i));
            let p = if detours {
                p
            } else {
                self.asked_before_preempt(now, p)
            };
            (p, Handover::Preempt)
        } else {
            (None, Handover::Preempt)
        };
        if let Some(to) = to {
            info!(
                "{}handing over to server {} ({})",
                self.log_tag,
                self.ids[to],
                match reason {
                    Handover::Health => "this server is unhealthy",
                    Handover::Drain => "this server is drained",
                    _ => "it has higher priority and was fit for preempt-delay",
                }
            );
            self.begin_resign(now, Some(to), reason);
        }
    }

    /// A preemption to `to` goes ahead on fresh reports only (SPEC 14, no detours).
    /// The first time it is due, this leader sends a LEAD at once (every follower
    /// acknowledges it: a leader that may be preempted asks everyone) and waits until
    /// every live server preferred to `to` has acknowledged it, or RTT; then
    /// `consider_handover` chooses again on the answers, and a preferred server that
    /// has just turned fit keeps the seat for its own delay. `None` while waiting, and
    /// when no preemption is due (which ends a wait once its RTT has passed). A
    /// successor that changes during the wait, or is gone for a moment, is judged on
    /// the same LEAD's answers: at most one such LEAD per RTT, however the reports
    /// change.
    fn asked_before_preempt(&mut self, now: Time, to: Option<usize>) -> Option<usize> {
        let Some(to) = to else {
            // A wait under way outlives a moment without a successor: one that comes
            // back within RTT is judged on the same LEAD's answers. Ending it here let
            // a preferred server whose reports alternate fit and unfit send a LEAD per
            // report (tests/preempt_ask.rs).
            if self.preempt_ask.is_some_and(|a| now >= a.until) {
                self.preempt_ask = None;
            }
            return None;
        };
        let term = self.leadership.as_ref()?.term;
        match self.preempt_ask.as_mut() {
            Some(a) if a.from.0 == term && (now < a.until || a.to == to) => {
                a.to = to;
                let (from, until) = (a.from, a.until);
                if now < until && !self.preferred_answered(now, to, from) {
                    return None;
                }
                self.preempt_ask = None;
                Some(to)
            }
            _ => {
                debug!(
                    "{}preemption by server {} due: asking every follower first",
                    self.log_tag, self.ids[to]
                );
                let until = now + self.cfg.rtt;
                // Set before the LEAD leaves: a leader with an ask under way is not
                // settled, so the LEAD asks every follower (`asked_acks`).
                self.preempt_ask = Some(PreemptAsk {
                    from: (term, u64::MAX),
                    to,
                    until,
                });
                self.send_lead(now);
                let l = self.leadership.as_ref()?;
                self.preempt_ask = Some(PreemptAsk {
                    from: (l.term, l.seq),
                    to,
                    until,
                });
                None
            }
        }
    }

    /// Every server that would be chosen before `to` and was heard lately has
    /// acknowledged the LEAD at `from` or a later one.
    fn preferred_answered(&self, now: Time, to: usize, from: (u64, u64)) -> bool {
        let window = self.hold + self.cfg.heartbeat;
        let rank = |i: usize| (self.cfg.servers[i].priority, std::cmp::Reverse(self.ids[i]));
        let mine = self.cfg.servers[self.me].priority;
        (0..self.ids.len()).all(|i| {
            i == self.me
                || self.witness[i]
                || self.cfg.servers[i].priority <= mine
                || rank(i) <= rank(to)
                || self.peers[i].ack_pos >= from
                || self.peers[i]
                    .heard_at
                    .is_none_or(|t| now.saturating_since(t) > window)
        })
    }

    /// Applies a new `preempt-delay` (SIGHUP). Fitness already heard keeps counting:
    /// `fit_since` does not depend on the delay, so the new value applies at once.
    pub fn set_preempt_delay(&mut self, now: Time, delay: Option<Duration>) {
        self.on_time(now);
        self.cfg.preempt_delay = delay;
        self.consider_handover(now);
        self.check_invariants(now);
    }
}
