//! "S2-disk": what a restart would find on disk covers what the server vouched for,
//! computed from the simulator's own model of the disk, not from the core's bound.
//!
//! A follower that ACKs a LEAD promises to vote for nobody else until the faith that
//! LEAD earned runs out (its receipt plus its hold, on the follower's clock): the
//! leader's lease rests on it (SPEC sections 4-6). A leader counts itself as one of
//! the majority its lease rests on, so it promises the same until the end of the
//! lease it reports (with another server to vote: alone, nothing rests on its quiet
//! period). A crash wipes the faith: what keeps the promise across it is the
//! quiet period, max(K*HBT, the hold on disk), after the restart. So at every moment
//! the quiet period a crash could leave must cover what is still owed: the hold a
//! crash could leave on disk, or the configured hold a restart reads if longer.
//!
//! What a crash could leave is the disk's state now, or that of the write in flight
//! (the host hands out one at a time; `Sim::write`), which lands or not: the worst is
//! the lower of the two, as if the process died just after the lower one landed. A
//! write the host has not handed out yet cannot land before it does, so it is checked
//! when it is handed out, against what is owed then. Checked: at every ACK that leaves
//! (after the write handed out in the same flush), at every lease end a leader reports
//! that is later than the last, at every write handed out and at every reload. That is exact: a crash
//! at any later moment finds a write that was on disk or in flight at one of those
//! checks, and what is owed only runs down in between.
//!
//! The core checks the same thing against its own bound (`check_durable_for`, with
//! `min_hold_pending`); a sabotage that moves that bound moves its check too
//! (`Sabotage::disk_hold_bound`), this one does not. What a leadership was promised
//! ends early only with a RESIGN or a later election: once a RESIGN of term T is
//! handed to or sent by a server, nothing it vouched for in T or below is owed, then
//! or later (the leader of T gave its lease up before it sent it, and every lease of a
//! lower term ended before T was elected), and an ACK of a LEAD of T that leaves after
//! it vouches for nothing; once a server is elected in E, nothing below E is owed
//! (`disk_on_elected`).

use super::{Disk, Sim, decode_all};
use electd::time::Time;
use std::collections::BTreeMap;

/// LEADs kept per group for their receipt time; the oldest go first.
const LEADS_KEPT: usize = 4096;

/// One server's record, per group: the LEADs it took and the faith it vouched for.
#[derive(Clone, Debug, Default)]
pub(super) struct Owed {
    /// (term, seq) -> (local time of its first receipt, its hold in ms).
    leads: BTreeMap<(u64, u64), (Time, u32)>,
    /// Per term: the local time until which this server vouched that it votes for
    /// nobody else (the latest faith of an ACK it sent, or its lease end as leader).
    until: BTreeMap<u64, Time>,
    /// The highest term a RESIGN released: nothing of it or below is owed.
    released: u64,
}

impl Owed {
    /// The latest faith still owed after local time `now`, if any.
    fn latest(&self, now: Time) -> Option<Time> {
        self.until.values().copied().max().filter(|&u| u > now)
    }

    /// Nothing vouched for in `term` or below is owed any more (a RESIGN of `term`).
    fn release(&mut self, term: u64) {
        self.released = self.released.max(term);
        self.until.retain(|&t, _| t > term);
    }

    /// Vouches for `until` in `term`; true if that is later than before.
    fn vouch(&mut self, term: u64, until: Time) -> bool {
        if term <= self.released {
            return false;
        }
        let e = self.until.entry(term).or_insert(Time(0));
        let later = until > *e;
        *e = (*e).max(until);
        later
    }
}

/// `t` plus `hold_ms` milliseconds.
fn plus_ms(t: Time, hold_ms: u32) -> Time {
    Time(t.0 + u64::from(hold_ms) * 1_000_000)
}

impl Sim {
    /// `bytes` are handed to `host`'s daemon now: the LEADs' receipt times, and the
    /// RESIGNs that end what it vouched for.
    pub(super) fn disk_on_receive(&mut self, host: usize, bytes: &[u8]) {
        if !self.opts.check_disk {
            return;
        }
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        for e in decode_all(bytes) {
            let Some(o) = h.owed.get_mut(usize::from(e.group)) else {
                continue;
            };
            if let electd::wire::Body::Lead {
                seq,
                hold_ms,
                resign,
                ..
            } = e.msg.body
            {
                if resign {
                    o.release(e.msg.term);
                } else {
                    o.leads.entry((e.msg.term, seq)).or_insert((local, hold_ms));
                    if o.leads.len() > LEADS_KEPT {
                        o.leads.pop_first();
                    }
                }
            }
        }
    }

    /// `bytes` leave `host`: each ACK vouches for the faith of the LEAD it answers
    /// (then the disk must cover it); a RESIGN releases its term.
    pub(super) fn disk_on_send(&mut self, host: usize, bytes: &[u8]) {
        if !self.opts.check_disk {
            return;
        }
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        let mut groups = Vec::new();
        for e in decode_all(bytes) {
            let g = usize::from(e.group);
            let Some(o) = h.owed.get_mut(g) else {
                continue;
            };
            let term = e.msg.term;
            let what = match e.msg.body {
                electd::wire::Body::Lead { resign: true, .. } => {
                    o.release(term);
                    continue;
                }
                electd::wire::Body::Ack { seq, .. } => {
                    let Some(&(at, hold_ms)) = o.leads.get(&(term, seq)) else {
                        continue;
                    };
                    if !o.vouch(term, plus_ms(at, hold_ms)) {
                        continue;
                    }
                    format!(
                        "ACK of LEAD ({term}, {seq}) of {hold_ms} ms taken {} us ago",
                        (local.0 - at.0) / 1000
                    )
                }
                _ => continue,
            };
            groups.push((g, what));
        }
        for (g, what) in groups {
            self.check_disk_covers(host, g, &what);
        }
    }

    /// `host` reports a lease of `term` until `until` (its clock) in group `g`: it
    /// vouches for it as one of the majority the lease rests on.
    pub(super) fn disk_on_lease(&mut self, host: usize, g: usize, term: u64, until: Time) {
        // Alone, a server's lease rests on nobody else's vote, and its restart's quiet
        // period protects nothing (with `Sabotage::reload_holds_sends` a lone leader
        // reports the lease of a LEAD still waiting for its longer hold's write).
        if !self.opts.check_disk || self.opts.n < 2 {
            return;
        }
        let Some(o) = self.hosts[host].owed.get_mut(g) else {
            return;
        };
        if o.vouch(term, until) {
            self.check_disk_covers(host, g, &format!("its lease of term {term}"));
        }
    }

    /// `host` is elected in `term` in group `g`: every lease of a lower term ended
    /// before a majority could elect it (each voter was past its faith in any other
    /// leader, and a lease rests on a majority's faith), so nothing this server
    /// vouched for in those terms is owed any more; its own lease, kept as a floor
    /// across a re-election, it vouches for again as it reports it. (The core frees
    /// its faith the same way when it steps down, `Node::step_down`: a server elected
    /// by the others while it still had faith in a former leader, swarm seed 3500 with
    /// `Sabotage::reload_holds_sends`.)
    pub(super) fn disk_on_elected(&mut self, host: usize, g: usize, term: u64) {
        if let Some(o) = self.hosts[host].owed.get_mut(g) {
            o.release(term.saturating_sub(1));
        }
    }

    /// `host` hands out a write of `state`: landed, it must cover the faith owed.
    pub(super) fn disk_on_write(&mut self, host: usize, state: &Disk) {
        if !self.opts.check_disk {
            return;
        }
        for g in 0..state.0.len() {
            let what = format!("a write of {} ms handed out", state.group(g).hold_ms);
            self.check_disk_covers(host, g, &what);
        }
    }

    /// The lowest hold, in ms, that a crash of `host` now could leave on disk for
    /// group `g`: the disk's, or the write in flight's if it is lower.
    pub fn worst_disk_hold(&self, host: usize, g: usize) -> u32 {
        let h = &self.hosts[host];
        let on_disk = h.disk.group(g).hold_ms;
        h.writing
            .as_ref()
            .map_or(on_disk, |w| on_disk.min(w.group(g).hold_ms))
    }

    /// An "S2-disk" violation if the shortest quiet period a crash of `host` now could
    /// leave for group `g` (the lowest hold that may be on disk, or the configured
    /// hold a restart reads if longer) ends before what it vouched for (`what` just
    /// happened).
    fn check_disk_covers(&mut self, host: usize, g: usize, what: &str) {
        let worst = self.worst_disk_hold(host, g);
        let h = &self.hosts[host];
        let local = h.clock.local(self.now);
        let Some(until) = h.owed.get(g).and_then(|o| o.latest(local)) else {
            return;
        };
        let owed_ns = until.0 - local.0;
        let configured = h.timers.hold();
        let quiet_ns = configured.max(u64::from(worst) * 1_000_000);
        if owed_ns > quiet_ns {
            let (id, now) = (h.id, self.now);
            let on_disk = h.disk.group(g).hold_ms;
            let flight = h.writing.as_ref().map(|w| w.group(g).hold_ms);
            self.checker(g).violate(format!(
                "S2-disk: server {id} owes {} us of faith after {what}, but a crash now \
                 could leave a hold of {worst} ms (on disk {on_disk} ms, in flight \
                 {flight:?} ms; configured {} us): its restart would be quiet too short \
                 (t={now})",
                owed_ns / 1000,
                configured / 1000
            ));
        }
    }

    /// `host` is reloaded: a restart now reads the new timers, whose hold may be
    /// shorter.
    pub(super) fn disk_on_reload(&mut self, host: usize) {
        if !self.opts.check_disk {
            return;
        }
        for g in 0..self.hosts[host].owed.len() {
            self.check_disk_covers(host, g, "a reload");
        }
    }
}
