//! LEADs lost at rest (`Sim::lose_leads`; "L-turn", docs/PROTOCOL.md "Targeted
//! heartbeats"): an adversary on one leadership's LEADs, and the record its check reads.
//!
//! The property, stated from the outside: while the leader's process and every other
//! one run unpaused, on clocks whose rates stay put, with the same timers, on links
//! that lose nothing but the copies of LEADs below and deliver every datagram within
//! RTT/2, and no follower loses two LEADs in a row of those addressed to it (the
//! copies the leader put on the link to it: `Dest::Only` names the followers a
//! targeted LEAD goes to), no server sends an ELECT. It says nothing of how the
//! daemon avoids the round (`Node::wait_for_next_turn`, the first sparse LEAD to
//! everyone): the swarm's negative controls break each and see an ELECT.
//!
//! The adversary aims where targeting leaves a follower least room: it loses the
//! copies of the `drops[i]`-th sparse LEAD of a run of sparse LEADs (0: the first
//! after a dense one) to the followers that LEAD names (at most N-Q of them, never one
//! whose last addressed LEAD was lost), one drop per run. Every other copy of a LEAD to
//! a follower is delivered at `fast`, except the first one addressed to a follower
//! after one it lost, which comes at `slow` (RTT/2, the latest the premise allows): the
//! LEAD before the gap as early as it can be, the one after it as late. Nothing is
//! drawn: a seed replays.
//!
//! The record is the premise's facts as the network saw them (LEAD copies addressed
//! and lost per follower, the longest delay given to any datagram), and every ELECT
//! sent while the adversary ran; the swarm's `turn_episode` judges them.

use super::{Real, Sim};
use electd::node::Dest;
use electd::wire;

/// What the adversary does with one copy of a LEAD.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum LeadFate {
    Lost,
    /// Delivered this long after it left.
    After(Real),
}

/// The shape of the adversary's drops.
#[derive(Clone, Debug)]
pub struct LeadLossPlan {
    /// Per drop, in order: which sparse LEAD of a run of sparse LEADs loses its copies
    /// to the followers it names (0: the first sparse LEAD after a dense one).
    pub drops: Vec<u32>,
    /// The one-way delay of a LEAD's copy to a follower, and of the first copy after
    /// one that follower lost.
    pub fast: Real,
    pub slow: Real,
}

/// The adversary's state and what it saw, while it runs.
pub(super) struct LeadLoss {
    leader: usize,
    term: u64,
    /// N-Q: how many followers' copies of one LEAD may be lost.
    budget: usize,
    plan: LeadLossPlan,
    /// The next drop of the plan; sparse LEADs in the current run.
    next: usize,
    run: u32,
    /// The copies of the LEAD being routed now, per destination index.
    current: Vec<Option<LeadFate>>,
    /// Per server index: the last LEAD addressed to it was lost.
    lost_last: Vec<bool>,
    /// The record (`TurnRecord`).
    pub(super) record: TurnRecord,
}

/// What the network saw while the adversary ran (the facts the premise is stated on).
#[derive(Clone, Debug, Default)]
pub struct TurnRecord {
    /// LEADs of the watched leadership sent, and of those, sparse ones.
    pub leads: u64,
    pub sparse: u64,
    /// LEAD copies lost (each to a follower that had the LEAD addressed to it before).
    pub lost: u64,
    /// Drops of the plan made.
    pub drops: usize,
    /// A follower that lost two LEADs in a row addressed to it: (id, seq).
    pub two_in_a_row: Option<(u16, u64)>,
    /// The longest one-way delay given to any datagram.
    pub max_delay: Real,
    /// Every ELECT sent: (real time, sender id, term).
    pub elects: Vec<(Real, u16, u64)>,
}

impl Sim {
    /// Starts the adversary on the LEADs `leader` sends in the term it leads now (group
    /// 0). False if it leads no term.
    pub fn lose_leads(&mut self, leader: u16, plan: LeadLossPlan) -> bool {
        let i = self.idx(leader);
        let Some(term) = self.hosts[i].node().and_then(|n| n.leads()) else {
            return false;
        };
        let n = self.opts.n;
        self.net.lead_loss = Some(LeadLoss {
            leader: i,
            term,
            budget: n - (n / 2 + 1),
            plan,
            next: 0,
            run: 0,
            current: vec![None; n],
            lost_last: vec![false; n],
            record: TurnRecord::default(),
        });
        true
    }

    /// True while drops of the plan are left.
    pub fn losing_leads(&self) -> bool {
        self.net
            .lead_loss
            .as_ref()
            .is_some_and(|a| a.next < a.plan.drops.len())
    }

    /// Ends the adversary; returns what it saw (datagrams already scheduled still
    /// arrive).
    pub fn stop_losing_leads(&mut self) -> TurnRecord {
        self.net
            .lead_loss
            .take()
            .map(|a| a.record)
            .unwrap_or_default()
    }

    /// A host sends a datagram to `dest`: ELECTs are recorded; for a LEAD of the
    /// watched leadership, the fate of each copy is decided (`current`).
    pub(super) fn lead_loss_on_send(&mut self, host: usize, dest: &Dest, bytes: &[u8]) {
        if self.net.lead_loss.is_none() {
            return;
        }
        let (now, id) = (self.now, self.hosts[host].id);
        let n = self.opts.n;
        let ids: Vec<u16> = self.hosts.iter().map(|h| h.id).collect();
        let Some(a) = self.net.lead_loss.as_mut() else {
            return;
        };
        a.current = vec![None; n];
        for e in super::decode_all(bytes) {
            if let wire::Body::Elect { .. } = e.msg.body {
                a.record.elects.push((now, id, e.msg.term));
            }
            if host != a.leader || e.group != 0 || e.msg.term != a.term {
                continue;
            }
            let wire::Body::Lead {
                seq,
                resign: false,
                acks,
                ..
            } = e.msg.body
            else {
                continue;
            };
            let sparse = !acks.is_empty();
            a.record.leads += 1;
            a.record.sparse += u64::from(sparse);
            a.run = if sparse { a.run + 1 } else { 0 };
            let addressed = |f: usize| match dest {
                Dest::All => true,
                Dest::One(x) => *x == ids[f],
                Dest::Only(set) => set.contains(ids[f]),
            };
            let followers: Vec<usize> = (0..n).filter(|&f| f != a.leader).collect();
            let aimed = sparse && a.plan.drops.get(a.next).is_some_and(|&d| a.run == d + 1);
            let mut doomed: Vec<usize> = if aimed {
                followers
                    .iter()
                    .copied()
                    .filter(|&f| acks.contains(ids[f]) && addressed(f) && !a.lost_last[f])
                    .collect()
            } else {
                Vec::new()
            };
            doomed.truncate(a.budget);
            if !doomed.is_empty() {
                a.next += 1;
                a.record.drops += 1;
            }
            for f in followers.into_iter().filter(|&f| addressed(f)) {
                let lost = doomed.contains(&f);
                if lost && a.lost_last[f] {
                    a.record.two_in_a_row.get_or_insert((ids[f], seq));
                }
                a.current[f] = Some(if lost {
                    a.record.lost += 1;
                    LeadFate::Lost
                } else if a.lost_last[f] {
                    LeadFate::After(a.plan.slow)
                } else {
                    LeadFate::After(a.plan.fast)
                });
                a.lost_last[f] = lost;
            }
        }
    }

    /// The routing of the datagram `lead_loss_on_send` saw is done.
    pub(super) fn lead_loss_sent(&mut self) {
        if let Some(a) = self.net.lead_loss.as_mut() {
            a.current.iter_mut().for_each(|c| *c = None);
        }
    }

    /// What the adversary does with the copy from `from` to `to` of the datagram being
    /// routed: None if it lets it pass as usual.
    pub(super) fn lead_loss_fate(&self, from: usize, to: usize) -> Option<LeadFate> {
        let a = self.net.lead_loss.as_ref()?;
        if from != a.leader {
            return None;
        }
        a.current.get(to).copied().flatten()
    }

    /// A datagram was scheduled `delay` after it left (the premise's timing fact).
    pub(super) fn lead_loss_note_delay(&mut self, delay: Real) {
        if let Some(a) = self.net.lead_loss.as_mut() {
            a.record.max_delay = a.record.max_delay.max(delay);
        }
    }
}

impl Sim {
    /// Per server, a count that moves at each crash, pause and suspend of its process
    /// (the premise's "ran unpaused" fact: equal before and after, and up at both).
    pub fn incarnations(&self) -> Vec<u64> {
        self.hosts.iter().map(|h| h.inc).collect()
    }
}
