//! Safety checks, run after every simulated event (SPEC section 8).
//!
//! - S1: at most one server is elected in any term (from `Elected` events).
//! - S2: no two servers' lease intervals overlap in real time. Each node reports its
//!   lease end on its own drifting clock; the simulator converts it to real time.
//! - S3: terms of successive leases strictly increase (the fencing order).
//! - S4: no server casts two different votes in one term, across restarts.
//! - S5: no two servers' `electctl run` commands run at once (SPEC sections 8 and 11).
//!   The simulator models each host's supervisor: the command runs from the moment the
//!   host reports a lease until the supervisor confirms a planned stop, or otherwise
//!   until the last lease end the host reported (the supervisor enforces it itself, so
//!   a crashed or frozen daemon does not end the command early, nor late). A stalled
//!   supervisor (issue 21, `Sim::stall_supervisor`) learns no later lease: its enforcer
//!   ends the command at the last end it was told; with `stall_enforcer` (a negative
//!   control) the command runs on to the end of the stall (`cmd_extend`).
//!
//! With election groups (SPEC section 15, issue 12) there is one checker per group:
//! every check above holds per group, and a violation names its group (other than 0).
//! The simulator's independence watch (`Sim::watch`) reports through the checker of the
//! group that changed ("I").
//!
//! A crash does not end a lease either: the lease a server reported is what the
//! processor it guards relies on, whether or not the daemon is still there to renew it.

use super::Real;
use electd::node::{Event, Handover, Status};
use std::collections::BTreeMap;

/// One server's continuous lease, in real time.
#[derive(Copy, Clone, Debug)]
pub struct Lease {
    pub holder: u16,
    pub start: Real,
    pub end: Real,
    pub term: u64,
}

/// One `electctl run` command's run on one host, in real time.
#[derive(Copy, Clone, Debug)]
pub struct Command {
    pub holder: u16,
    pub start: Real,
    pub end: Real,
}

/// A planned handoff that began (`Event::Resigning`), for the scenarios and the
/// swarm's health checks (issue 11).
#[derive(Copy, Clone, Debug)]
pub struct Handoff {
    pub at: Real,
    pub from: u16,
    pub term: u64,
    pub to: Option<u16>,
    pub reason: Handover,
    /// When its RESIGN left (`Event::Resigned`), if it did.
    pub sent: Option<Real>,
}

/// The state of the checks and what they found.
pub struct Checker {
    pub violations: Vec<String>,
    /// The election group checked (named in violations when not 0).
    pub group: usize,
    elected: BTreeMap<u64, u16>,
    votes: BTreeMap<(u16, u64), u16>,
    pub intervals: Vec<Lease>,
    open: Vec<Option<usize>>,
    last: Vec<Option<usize>>,
    last_lease: Option<(u64, u16)>,
    pub elections: u64,
    /// Per server, how many times its process started (a new incarnation each time).
    incarnation: Vec<u32>,
    /// Per term, the server and incarnation that first held a lease in it.
    led: BTreeMap<u64, (u16, u32)>,
    pub commands: Vec<Command>,
    cmd_last: Vec<Option<usize>>,
    /// Every election won: (real time, server, term).
    pub won: Vec<(Real, u16, u64)>,
    /// Every planned handoff begun.
    pub handoffs: Vec<Handoff>,
    /// (server, real time): leases that ended and were renewed at the next status
    /// report, with no report in between (a lapse the intervals do not show).
    pub lapses: Vec<(u16, Real)>,
}

impl Checker {
    pub fn new(n: usize) -> Checker {
        Checker::for_group(n, 0)
    }

    /// The checker of election group `group` on `n` servers.
    pub fn for_group(n: usize, group: usize) -> Checker {
        Checker {
            violations: Vec::new(),
            group,
            elected: BTreeMap::new(),
            votes: BTreeMap::new(),
            intervals: Vec::new(),
            open: vec![None; n],
            last: vec![None; n],
            last_lease: None,
            elections: 0,
            incarnation: vec![0; n],
            led: BTreeMap::new(),
            commands: Vec::new(),
            cmd_last: vec![None; n],
            won: Vec::new(),
            handoffs: Vec::new(),
            lapses: Vec::new(),
        }
    }

    /// Records a violation "X: what"; with a group other than 0, "X: group g: what", so
    /// that the prefixes the tests match keep naming the property.
    pub fn violate(&mut self, what: String) {
        if self.violations.len() < 20 {
            let what = match (self.group, what.split_once(": ")) {
                (0, _) | (_, None) => what,
                (g, Some((x, rest))) => format!("{x}: group {g}: {rest}"),
            };
            self.violations.push(what);
        }
    }

    /// Records an event a node emitted at real time `now`.
    pub fn on_event(&mut self, now: Real, id: u16, e: Event) {
        match e {
            Event::Elected { term } => {
                self.elections += 1;
                self.won.push((now, id, term));
                match self.elected.insert(term, id) {
                    Some(other) if other != id => self.violate(format!(
                        "S1: term {term} elected {other} and {id} (t={now})"
                    )),
                    _ => {}
                }
            }
            Event::Voted { term, candidate } => match self.votes.insert((id, term), candidate) {
                Some(other) if other != candidate => self.violate(format!(
                    "S4: server {id} voted for {other} and {candidate} in term {term} (t={now})"
                )),
                _ => {}
            },
            Event::DualLeader { term, other } => self.violate(format!(
                "S1: {id} saw {other} lead its own term {term} (t={now})"
            )),
            Event::Resigning {
                term, to, reason, ..
            } => self.handoffs.push(Handoff {
                at: now,
                from: id,
                term,
                to,
                reason,
                sent: None,
            }),
            Event::Resigned { term } => {
                if let Some(h) = self
                    .handoffs
                    .iter_mut()
                    .rev()
                    .find(|h| h.from == id && h.term == term && h.sent.is_none())
                {
                    h.sent = Some(now);
                }
            }
            Event::SteppedDown { .. } => {}
        }
    }

    /// Records a node's status after it handled an event at real time `now`.
    pub fn on_status(
        &mut self,
        now: Real,
        id: u16,
        status: &Status,
        lease_end: Option<Real>,
        term: u64,
    ) {
        let i = usize::from(id) - 1;
        let Some(end) = lease_end.filter(|_| status.lease_until.is_some()) else {
            self.close(now, i);
            return;
        };
        let k = match self.open[i] {
            Some(k) => {
                let l = &mut self.intervals[k];
                if now >= l.end {
                    // Renewed only after the end it last reported: no status between
                    // showed the gap, but the lease had lapsed (S2 keeps the interval
                    // whole, which only over-approximates it; L-rest reads this).
                    self.lapses.push((id, l.end));
                }
                l.end = l.end.max(end);
                l.term = term;
                k
            }
            None => {
                self.intervals.push(Lease {
                    holder: id,
                    start: now,
                    end,
                    term,
                });
                let k = self.intervals.len() - 1;
                self.open[i] = Some(k);
                self.last[i] = Some(k);
                k
            }
        };
        let mine = self.intervals[k];
        match self.last_lease {
            Some((t, h)) if term < t || (term == t && h != id) => self.violate(format!(
                "S3: {id} holds a lease in term {term} after {h} held one in term {t} (t={now})"
            )),
            _ => {}
        }
        self.last_lease = Some((term, id));
        // A term is led once: the same server leading it again after a restart hands
        // the same fencing token to a second, independent leadership (issue 10, 1).
        let inc = self.incarnation[i];
        match self.led.get(&term) {
            Some(&(h, n)) if h == id && n != inc => self.violate(format!(
                "S3: {id} leads term {term} again after a restart (t={now})"
            )),
            Some(_) => {}
            None => {
                self.led.insert(term, (id, inc));
            }
        }
        for j in 0..self.last.len() {
            let Some(o) = self.last[j].filter(|_| j != i).map(|o| self.intervals[o]) else {
                continue;
            };
            if o.start < mine.end && mine.start < o.end {
                self.violate(format!("S2: leases overlap: {mine:?} and {o:?} (t={now})"));
            }
        }
    }

    /// A process died at `now`. Its lease does NOT end there: the lease it reported
    /// runs to its end (the supervisor and the processor go on); a restarted process
    /// starts a new interval and a new incarnation.
    pub fn on_down(&mut self, _now: Real, id: u16) {
        let i = usize::from(id) - 1;
        self.open[i] = None;
        self.incarnation[i] += 1;
    }

    /// Host `id` reports at `now` a lease that ends at real time `end`: its command runs
    /// (or keeps running) until then at least. Checks S5.
    pub fn cmd_lease(&mut self, now: Real, id: u16, end: Real) {
        let i = usize::from(id) - 1;
        let k = match self.cmd_last[i] {
            Some(k) if self.commands[k].end > now => {
                let c = &mut self.commands[k];
                c.end = c.end.max(end);
                k
            }
            _ => {
                self.commands.push(Command {
                    holder: id,
                    start: now,
                    end,
                });
                self.commands.len() - 1
            }
        };
        self.cmd_last[i] = Some(k);
        self.check_command(now, i);
    }

    /// Host `id`'s command, if it was still running at `since`, runs until `end` at
    /// least (a clock that stopped during a suspend moved the lease end). Checks S5.
    pub fn cmd_extend(&mut self, now: Real, id: u16, since: Real, end: Real) {
        let i = usize::from(id) - 1;
        if let Some(k) = self.cmd_last[i] {
            let c = &mut self.commands[k];
            if c.end > since && end > c.end {
                c.end = end;
                self.check_command(now, i);
            }
        }
    }

    /// Host `id`'s clock changed its rate at `now`: the last lease end it reported now
    /// falls at real time `end` (earlier or later). Its lease and its command, if they
    /// run past now, end there instead (both are measured on that clock). Checks S2, S5.
    pub fn remap(&mut self, now: Real, id: u16, end: Real) {
        let i = usize::from(id) - 1;
        if let Some(k) = self.last[i] {
            if self.intervals[k].end > now {
                self.intervals[k].end = end.max(now);
                let mine = self.intervals[k];
                for j in (0..self.last.len()).filter(|&j| j != i) {
                    let Some(o) = self.last[j].map(|o| self.intervals[o]) else {
                        continue;
                    };
                    if o.start < mine.end && mine.start < o.end {
                        self.violate(format!("S2: leases overlap: {mine:?} and {o:?} (t={now})"));
                    }
                }
            }
        }
        if let Some(k) = self.cmd_last[i] {
            if self.commands[k].end > now {
                self.commands[k].end = end.max(now);
                self.check_command(now, i);
            }
        }
    }

    /// Host `id`'s supervisor confirmed at `now` that its command exited.
    pub fn cmd_stop(&mut self, now: Real, id: u16) {
        if let Some(k) = self.cmd_last[usize::from(id) - 1] {
            let c = &mut self.commands[k];
            c.end = c.end.min(now);
        }
    }

    /// True while host `id`'s command runs at `now`.
    pub fn cmd_running(&self, now: Real, id: u16) -> bool {
        self.cmd_last[usize::from(id) - 1].is_some_and(|k| self.commands[k].end > now)
    }

    fn check_command(&mut self, now: Real, i: usize) {
        let Some(mine) = self.cmd_last[i].map(|k| self.commands[k]) else {
            return;
        };
        for j in 0..self.cmd_last.len() {
            let Some(o) = self.cmd_last[j]
                .filter(|_| j != i)
                .map(|o| self.commands[o])
            else {
                continue;
            };
            if o.start < mine.end && mine.start < o.end {
                self.violate(format!(
                    "S5: commands run at once: {mine:?} and {o:?} (t={now})"
                ));
            }
        }
    }

    fn close(&mut self, now: Real, i: usize) {
        if let Some(k) = self.open[i].take() {
            let l = &mut self.intervals[k];
            l.end = l.end.min(now);
        }
    }

    /// Every vote `id` cast, as (term, candidate), oldest term first.
    pub fn votes_of(&self, id: u16) -> Vec<(u64, u16)> {
        self.votes
            .range((id, 0)..=(id, u64::MAX))
            .map(|(&(_, t), &c)| (t, c))
            .collect()
    }

    /// The first moment at or after `t` at which some server holds a lease.
    pub fn first_lease_from(&self, t: Real) -> Option<Real> {
        self.intervals
            .iter()
            .filter(|l| l.end > t)
            .map(|l| l.start.max(t))
            .min()
    }

    /// The first lease from `t` on whose holder satisfies `f`: (holder, the moment it
    /// holds one at or after `t`).
    pub fn first_lease_by(&self, t: Real, f: impl Fn(u16) -> bool) -> Option<(u16, Real)> {
        self.intervals
            .iter()
            .filter(|l| l.end > t && f(l.holder))
            .map(|l| (l.holder, l.start.max(t)))
            .min_by_key(|x| x.1)
    }

    /// True when `id`'s leases cover real time [from, to] without a gap.
    pub fn lease_covers(&self, id: u16, from: Real, to: Real) -> bool {
        self.lease_reach(id, from, to) > to
    }

    /// How far from `from` `id`'s leases reach without a gap, looking at those that
    /// overlap [from, to] (`from` itself when none covers it).
    pub fn lease_reach(&self, id: u16, from: Real, to: Real) -> Real {
        let mut mine: Vec<_> = self
            .intervals
            .iter()
            .filter(|l| l.holder == id && l.end > from && l.start <= to)
            .map(|l| (l.start, l.end))
            .collect();
        mine.sort_unstable();
        let mut reach = from;
        for (a, b) in mine {
            if a > reach {
                break;
            }
            reach = reach.max(b);
        }
        reach
    }

    /// Leases that started at or after `t`.
    pub fn leases_since(&self, t: Real) -> impl Iterator<Item = &Lease> {
        self.intervals.iter().filter(move |l| l.start >= t)
    }
}
