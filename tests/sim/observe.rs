//! What the tests observe and check across servers: each group's checker and the
//! gathering of violations, "S2-support", the independence watch (issue 12), and the
//! statuses and leaders per group.

use super::Sim;
use super::check::Checker;
use electd::node::Status;

/// The independence watch: the group allowed to change, and every group's (leader,
/// term) per server when the watch began.
pub(super) struct Watch {
    active: usize,
    /// [group][id - 1]: (leader, term) as that server saw it, if it ran.
    views: Vec<Vec<Option<View>>>,
}

/// A server's view of one group: (leader, term).
type View = (Option<u16>, u64);

impl Sim {
    /// "S2-support" (issue 20): a server that holds a lease until L must have a majority
    /// (itself included) that cannot vote for anyone else before L: servers that follow
    /// it with faith until L or later, servers that are down, and servers whose startup
    /// quiet period lasts until L (the last two leniently: they cannot vote before they
    /// run and are quiet). This is the assumption S2's argument rests on; a lease that
    /// loses it (an acknowledgement of one leadership counted for another, a faith cut
    /// by someone else's RESIGN) is reported here even when no second lease follows.
    pub fn check_support(&mut self) {
        let (now, n, q) = (self.now, self.opts.n, self.opts.n / 2 + 1);
        for g in 0..self.opts.groups.max(1) {
            for a in 0..n {
                let h = &self.hosts[a];
                let Some(node) = h.node_of(g) else { continue };
                let Some(u) = node.status(h.clock.local(now)).lease_until else {
                    continue;
                };
                let (id, end) = (h.id, h.clock.real(u));
                let support = 1
                    + (0..n)
                        .filter(|&o| o != a)
                        .filter(|&o| {
                            let x = &self.hosts[o];
                            let Some(on) = x.node_of(g) else {
                                return true;
                            };
                            x.quiet_end >= end
                                || (on.status(x.clock.local(now)).leader == Some(id)
                                    && x.clock.real(on.faith_until()) >= end)
                        })
                        .count();
                if support < q {
                    self.checker(g).violate(format!(
                        "S2-support: {id} holds a lease until {end} that only {support} \
                         servers support (t={now})"
                    ));
                }
            }
        }
        self.gather();
    }

    /// The checker of group `g`.
    pub fn checker(&mut self, g: usize) -> &mut Checker {
        if g == 0 {
            &mut self.check
        } else {
            &mut self.group_checks[g - 1]
        }
    }

    /// The checker of group `g`, to read.
    pub fn checks(&self, g: usize) -> &Checker {
        if g == 0 {
            &self.check
        } else {
            &self.group_checks[g - 1]
        }
    }

    /// Moves the other groups' violations into group 0's list, where every run, test and
    /// swarm looks (each is tagged with its group by its checker).
    pub(super) fn gather(&mut self) {
        for c in self.group_checks.iter_mut() {
            if !c.violations.is_empty() {
                let v = std::mem::take(&mut c.violations);
                if self.check.violations.len() < 20 {
                    self.check.violations.extend(v);
                }
            }
        }
    }

    // ----- observations -------------------------------------------------------------

    /// The status of a running server now (group 0).
    pub fn status(&self, id: u16) -> Option<Status> {
        self.status_in(0, id)
    }

    /// The status of a running server's group `g` now.
    pub fn status_in(&self, g: usize, id: u16) -> Option<Status> {
        let h = &self.hosts[self.idx(id)];
        h.node_of(g).map(|n| n.status(h.clock.local(self.now)))
    }

    /// The heartbeat in force on a running server's group 0 (a reload's may wait for
    /// its hold to be written).
    pub fn heartbeat_of(&self, id: u16) -> Option<std::time::Duration> {
        self.hosts[self.idx(id)].node_of(0).map(|n| n.heartbeat())
    }

    /// The servers holding a valid lease now (at most one, by S2).
    pub fn leaders(&self) -> Vec<u16> {
        self.leaders_in(0)
    }

    /// The servers holding a valid lease of group `g` now.
    pub fn leaders_in(&self, g: usize) -> Vec<u16> {
        (1..=self.opts.n as u16)
            .filter(|&id| {
                self.status_in(g, id)
                    .is_some_and(|s| s.lease_until.is_some())
            })
            .collect()
    }

    /// The single lease holder, if there is exactly one.
    pub fn leader(&self) -> Option<u16> {
        self.leader_in(0)
    }

    /// The single lease holder of group `g`, if there is exactly one.
    pub fn leader_in(&self, g: usize) -> Option<u16> {
        match self.leaders_in(g)[..] {
            [l] => Some(l),
            _ => None,
        }
    }

    /// Per group, its single lease holder.
    pub fn group_leaders(&self) -> Vec<Option<u16>> {
        (0..self.opts.groups.max(1))
            .map(|g| self.leader_in(g))
            .collect()
    }

    /// Watches for the independence of groups (SPEC section 15, issue 12): from now
    /// until `unwatch`, every group but `active` must keep the leader and the term its
    /// servers see now; a change is an "I" violation. Meant for a healthy network with
    /// nobody crashing, while only `active` has rounds, yields or handovers.
    pub fn watch(&mut self, active: usize) {
        let views = (0..self.opts.groups.max(1))
            .map(|g| {
                (1..=self.opts.n as u16)
                    .map(|id| self.status_in(g, id).map(|s| (s.leader, s.term)))
                    .collect()
            })
            .collect();
        self.watch = Some(Watch { active, views });
    }

    /// Ends the independence watch.
    pub fn unwatch(&mut self) {
        self.watch = None;
    }

    /// An "I" violation if group `g` changed on `id` while only another group may.
    pub(super) fn check_watch(&mut self, g: usize, id: u16, st: &Status) {
        let Some(w) = &self.watch else { return };
        if g == w.active {
            return;
        }
        let Some(Some(was)) = w.views[g].get(usize::from(id) - 1).copied() else {
            return;
        };
        if (st.leader, st.term) != was {
            let now = self.now;
            let active = w.active;
            self.checker(g).violate(format!(
                "I: server {id} sees leader {:?} term {} (was {:?} term {}) while only \
                 group {active} had rounds (t={now})",
                st.leader, st.term, was.0, was.1
            ));
        }
    }

    /// The term a running server sees in group 0 (0 while it is down).
    pub fn term(&self, id: u16) -> u64 {
        self.status(id).map_or(0, |s| s.term)
    }
}
