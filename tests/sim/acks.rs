//! ACKs lost at rest (`Sim::lose_acks`; issue 25, sparse acknowledgements): an
//! adversary on one leadership's acknowledgements that keeps to the premise of the
//! lease-at-rest property (docs/PROTOCOL.md, "Sparse acknowledgements"): of each LEAD,
//! at most N-Q followers' ACKs to the leader are lost or come after the next LEAD, so
//! every LEAD would still be acknowledged by a majority (the leader counting as one) if
//! it asked everyone. Nothing else is touched: the LEADs, the ACKs' copies to the other
//! followers, every other message.
//!
//! Within that budget it aims where sparse acknowledgements are weakest. It strikes in
//! bursts of consecutive LEADs, each begun at the first LEAD that asks only some
//! followers (or, after `max_wait` LEADs that all ask everyone, at a dense one). In a
//! burst, a sparse LEAD loses the ACKs of the followers it asked (all of them when
//! they are at most N-Q, which is always so for odd N; for even N all but the one that
//! reached the leader most recently, so the lease moves as little as possible); a
//! dense LEAD loses N-Q ACKs of followers drawn at random. A lost ACK is dropped, or
//! (`late_pm`) delivered late. Every choice is drawn from the run's
//! generator: a seed replays.
//!
//! A correct leader keeps its lease through any such burst: the LEAD after a miss asks
//! everyone, a majority acknowledges it, and a sparse LEAD leaves only while the lease
//! already held outlasts the next LEAD's ACKs. `Sabotage::sparse_ignores_misses` stays
//! sparse after a miss, loses the asked ACKs of K-1 LEADs in a row, and lapses.
//!
//! A plan may also reload every server's timers (`AckLossReload`) just after a sparse
//! LEAD, before a burst: the lease then rests on LEADs sent with the old timers while
//! the next LEAD is decided with the new ones. `Sabotage::sparse_ignores_lease_held`
//! goes sparse there on the new timers alone and, after a reload to a heartbeat long
//! enough, loses its lease to that LEAD's asked ACKs.

use super::{Real, Sim, Timers};
use electd::wire;

/// What the adversary does with a datagram it catches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    Lost,
    /// Delivered this much later than the link's delay.
    Late(Real),
}

/// The shape of an adversary's bursts.
#[derive(Clone, Debug)]
pub struct AckLossPlan {
    /// The length of each burst in LEADs, in order.
    pub bursts: Vec<u32>,
    /// LEADs to wait for one that asks only some followers before a burst begins on a
    /// LEAD that asks everyone.
    pub max_wait: u32,
    /// Per mille of the doomed ACKs delivered late (after the next LEAD) instead of lost.
    pub late_pm: u32,
    /// How late a late ACK comes beyond its link's delay: `late_by` to `late_by +
    /// late_spread`.
    pub late_by: Real,
    pub late_spread: Real,
    /// A reload of every server's timers just after a LEAD that asks only some
    /// followers, before a burst (an operator's reload while the leader is at rest).
    pub reload: Option<AckLossReload>,
}

/// A reload the adversary makes mid-episode (`AckLossPlan::reload`): at the first LEAD
/// that asks only some followers while burst `before` waits to begin, every server is
/// reloaded to `timers` within half a heartbeat, so the next LEAD is the first the
/// leader decides with them; that burst then begins as any other, at the next sparse
/// LEAD. If no sparse LEAD comes before the burst begins, there is no reload.
#[derive(Clone, Debug)]
pub struct AckLossReload {
    /// The index of the burst the reload comes before.
    pub before: usize,
    /// The new timers, the same on every server.
    pub timers: Timers,
    /// Per server index: how long after that LEAD left its reload comes (each shorter
    /// than the heartbeat before the reload, so the leader's lands before its next
    /// LEAD).
    pub after: Vec<Real>,
    /// The longest one-way delay from the reload on (the premise's timing under the
    /// new timers: docs/PROTOCOL.md, "Sparse acknowledgements").
    pub delay_max: Real,
    /// Every delay from the reload on is `delay_max`, the longest the premise allows
    /// (aimed at the lease-held gate's edge: `rest_reload`).
    pub delay_fixed: bool,
    /// `late_by` and `late_spread` from the reload on (in heartbeats of the new timers).
    pub late_by: Real,
    pub late_spread: Real,
}

/// The adversary's state while it runs.
pub(super) struct AckLoss {
    /// The leader's host index and the term it leads.
    pub(super) leader: usize,
    pub(super) term: u64,
    /// N-Q: how many followers' ACKs of one LEAD may be lost.
    budget: usize,
    plan: AckLossPlan,
    /// The next burst of the plan, and LEADs left in the burst under way.
    next: usize,
    left: u32,
    /// LEADs since the last burst ended (or since the start) that began none.
    waited: u32,
    /// (seq, follower index, late): the ACKs of this leadership the network loses.
    doomed: Vec<(u64, usize, bool)>,
    /// Per server index, the newest seq of an ACK of this leadership that reached the
    /// leader.
    reached: Vec<u64>,
    /// The plan's reload was made, and the next LEAD is the first after it.
    reloaded: bool,
    first_after: bool,
}

impl Sim {
    /// Starts the adversary on the ACKs that reach `leader` for the term it leads now
    /// (group 0). False if it leads no term.
    pub fn lose_acks(&mut self, leader: u16, plan: AckLossPlan) -> bool {
        let i = self.idx(leader);
        let Some(term) = self.hosts[i].node().and_then(|n| n.leads()) else {
            return false;
        };
        let n = self.opts.n;
        self.net.ack_loss = Some(AckLoss {
            leader: i,
            term,
            budget: n - (n / 2 + 1),
            plan,
            next: 0,
            left: 0,
            waited: 0,
            doomed: Vec::new(),
            reached: vec![0; n],
            reloaded: false,
            first_after: false,
        });
        self.stats.ack_loss_episodes += 1;
        true
    }

    /// True while the adversary has bursts to begin or one under way.
    pub fn losing_acks(&self) -> bool {
        self.net
            .ack_loss
            .as_ref()
            .is_some_and(|a| a.left > 0 || a.next < a.plan.bursts.len())
    }

    /// Ends the adversary (late ACKs already scheduled still arrive).
    pub fn stop_losing_acks(&mut self) {
        self.net.ack_loss = None;
    }

    /// The leader sends a datagram: for each LEAD of the watched leadership in it,
    /// decides which followers' ACKs of it the network will lose.
    pub(super) fn ack_loss_on_send(&mut self, host: usize, bytes: &[u8]) {
        if self.net.ack_loss.as_ref().is_none_or(|a| a.leader != host) {
            return;
        }
        for e in super::decode_all(bytes) {
            if e.group != 0 {
                continue;
            }
            if let wire::Body::Lead {
                seq,
                resign: false,
                acks,
                ..
            } = e.msg.body
            {
                if self
                    .net
                    .ack_loss
                    .as_ref()
                    .is_some_and(|a| a.term == e.msg.term)
                {
                    self.ack_loss_on_lead(seq, acks);
                }
            }
        }
    }

    fn ack_loss_on_lead(&mut self, seq: u64, asked: wire::PeerSet) {
        let n = self.opts.n;
        let ids: Vec<u16> = self.hosts.iter().map(|h| h.id).collect();
        let Some(a) = self.net.ack_loss.as_mut() else {
            return;
        };
        let sparse = !asked.is_empty();
        self.stats.ack_loss_leads += 1;
        self.stats.ack_loss_sparse_leads += u64::from(sparse);
        a.doomed.retain(|d| d.0 + 64 > seq);
        if std::mem::take(&mut a.first_after) {
            self.stats.ack_loss_reload_sparse += u64::from(sparse);
        }
        if a.left == 0 {
            if a.next >= a.plan.bursts.len() {
                return;
            }
            let reload_now =
                sparse && !a.reloaded && a.plan.reload.as_ref().is_some_and(|r| r.before == a.next);
            if reload_now {
                // This LEAD and its ACKs pass: the burst waits for the next sparse LEAD,
                // the first decided with the new timers when it comes at once.
                a.reloaded = true;
                a.first_after = true;
                a.waited = 0;
                let r = a.plan.reload.clone().expect("planned");
                a.plan.late_by = r.late_by;
                a.plan.late_spread = r.late_spread;
                self.reload_all(&r);
                return;
            }
            if !sparse && a.waited < a.plan.max_wait {
                a.waited += 1;
                return;
            }
            a.left = a.plan.bursts[a.next].max(1);
            a.next += 1;
            a.waited = 0;
            self.stats.ack_loss_bursts += 1;
            self.stats.ack_loss_sparse_bursts += u64::from(sparse);
        }
        a.left -= 1;
        let (leader, budget) = (a.leader, a.budget);
        let followers = (0..n).filter(|&i| i != leader);
        let targets: Vec<usize> = if sparse {
            // The asked followers, those whose ACKs reached the leader longest ago
            // first: for even N one survives, the one that moves the lease least.
            let mut t: Vec<usize> = followers.filter(|&i| asked.contains(ids[i])).collect();
            t.sort_by_key(|&i| (a.reached[i], i));
            t.truncate(budget);
            t
        } else {
            let mut t: Vec<usize> = followers.collect();
            // A random choice of `budget` of them (a partial Fisher-Yates shuffle).
            for k in 0..budget.min(t.len()) {
                let j = k + self.rng.below((t.len() - k) as u64) as usize;
                t.swap(k, j);
            }
            t.truncate(budget);
            t
        };
        for f in targets {
            let late = self.rng.below(1000) < u64::from(self.net_plan_late_pm());
            if let Some(a) = self.net.ack_loss.as_mut() {
                a.doomed.push((seq, f, late));
            }
        }
    }

    /// Reloads every server as `r` plans, from now, and cuts the delays to its premise.
    fn reload_all(&mut self, r: &AckLossReload) {
        self.stats.ack_loss_reloads += 1;
        self.opts.delay_max = self.opts.delay_max.min(r.delay_max);
        self.opts.delay_min = if r.delay_fixed {
            self.opts.delay_max
        } else {
            self.opts.delay_min.min(self.opts.delay_max)
        };
        let ids: Vec<u16> = self.hosts.iter().map(|h| h.id).collect();
        for (id, after) in ids.into_iter().zip(&r.after) {
            self.reload_at(id, self.now + after, r.timers);
        }
    }

    fn net_plan_late_pm(&self) -> u32 {
        self.net.ack_loss.as_ref().map_or(0, |a| a.plan.late_pm)
    }

    /// What the adversary does with a datagram from `from` to `to`: None if it lets it
    /// pass as usual. Records the ACKs that pass.
    pub(super) fn ack_loss_fate(&mut self, from: usize, to: usize, bytes: &[u8]) -> Option<Fate> {
        let a = self.net.ack_loss.as_ref()?;
        if a.leader != to || from == to {
            return None;
        }
        let term = a.term;
        let mut fate = None;
        for e in super::decode_all(bytes) {
            if e.group != 0 || e.msg.term != term {
                continue;
            }
            let wire::Body::Ack { seq, .. } = e.msg.body else {
                continue;
            };
            let a = self.net.ack_loss.as_ref()?;
            match a.doomed.iter().find(|d| d.0 == seq && d.1 == from) {
                Some(&(_, _, true)) => {
                    let (by, spread) = (a.plan.late_by, a.plan.late_spread);
                    let d = by + self.rng.below(spread + 1);
                    self.stats.ack_loss_late += 1;
                    fate = Some(Fate::Late(d));
                }
                Some(_) => {
                    self.stats.ack_loss_lost += 1;
                    return Some(Fate::Lost);
                }
                None => {
                    let a = self.net.ack_loss.as_mut()?;
                    a.reached[from] = a.reached[from].max(seq);
                }
            }
        }
        fate
    }
}
