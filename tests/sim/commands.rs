//! What an operator sends a daemon through `electctl`: elect, yield (to a server, in a
//! group), drain and undrain, each handed to the running core and flushed.

use super::Sim;
use electd::node::Node;
use electd::time::Time;

impl Sim {
    /// Sends `elect` to a server.
    pub fn elect(&mut self, id: u16) {
        self.elect_in(0, id);
    }

    /// Sends `elect GROUP` to a server.
    pub fn elect_in(&mut self, g: usize, id: u16) {
        self.with_node(g, id, |n, t| n.handle_elect(t));
    }

    /// Sends `yield` to a server; true if it was leader. The RESIGN leaves once the
    /// host's supervisor confirms (`confirm_max`, `confirm_hung_pm`) or at the lease end.
    pub fn resign(&mut self, id: u16) -> bool {
        self.resign_in(0, id)
    }

    /// Sends `yield GROUP` to a server; true if it was that group's leader. With
    /// `yield_wrong_group` (a negative control) group 0 resigns instead.
    pub fn resign_in(&mut self, g: usize, id: u16) -> bool {
        let g = if self.opts.yield_wrong_group { 0 } else { g };
        let mut r = false;
        self.with_node(g, id, |n, t| r = n.handle_yield(t));
        r
    }

    /// Sends `yield ID` to a server (SPEC section 14); true if it was leader. With
    /// `drop_yield_target` (a negative control) the target is dropped.
    pub fn yield_to(&mut self, id: u16, to: Option<u16>) -> bool {
        let to = to.filter(|_| !self.opts.drop_yield_target);
        let mut r = false;
        self.with_node(0, id, |n, t| r = n.handle_yield_to(t, to));
        if r {
            self.stats.yields_to += 1;
            if self.opts.trace {
                self.trace
                    .push(format!("{} {id} yield to {to:?}", self.now));
            }
        }
        r
    }

    /// `electctl drain` (true) or `undrain` on `id`; true if a running daemon took it.
    /// The core persists it (`Durable.drained`), so it survives restarts once written.
    pub fn drain(&mut self, id: u16, drained: bool) -> bool {
        let mut r = false;
        self.with_node(0, id, |n, t| {
            r = n.drained() != drained;
            n.set_drained(t, drained);
        });
        if r {
            let (i, now) = (self.idx(id), self.now);
            self.hosts[i].fit_changed_at = now;
            if drained {
                self.stats.drains += 1;
            } else {
                self.stats.undrains += 1;
            }
            if self.opts.trace {
                self.trace.push(format!("{now} {id} drained={drained}"));
            }
        }
        r
    }

    /// Hands group `g`'s core on a running, awake `id` to `f`, then flushes the host.
    pub(super) fn with_node(&mut self, g: usize, id: u16, f: impl FnOnce(&mut Node, Time)) {
        let i = self.idx(id);
        let h = &mut self.hosts[i];
        if h.paused {
            return;
        }
        let local = h.clock.local(self.now);
        if let Some(node) = h.shell.as_mut().and_then(|s| {
            s.groups()
                .get(g)
                .is_some()
                .then(|| &mut s.group_mut(g).node)
        }) {
            f(node, local);
            self.drive(i);
        }
    }
}
