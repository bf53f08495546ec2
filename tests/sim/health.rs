//! The health model (SPEC section 13): each host's processor is healthy or not, the
//! adversary changes it (at once, at a time, or aimed at a boundary), and the daemon
//! learns it at once or, with `checks`, once its check has risen; fitness (health,
//! drain, witness) as the tests read it.

use super::{Ev, Real, Sim};
use electd::health::{Failure, Outcome, Verdict};
use std::time::Duration;

/// A check run that passed or failed (exit status 1).
fn check_result(ok: bool) -> Outcome {
    Outcome {
        result: if ok { Ok(()) } else { Err(Failure::Exit(1)) },
        output: String::new(),
        took: Duration::from_millis(1),
    }
}

impl Sim {
    /// The processor of `id` turns healthy or not now; its daemon learns it at once (a
    /// paused one when it wakes, one whose check has not risen yet once it has).
    pub fn set_health(&mut self, id: u16, healthy: bool) {
        let i = self.idx(id);
        self.apply_health(i, healthy);
    }

    /// The processor of `id` turns healthy or not at `aimed_instant()`, if there is one
    /// (counted in the stats); returns the instant.
    pub fn health_aimed(&mut self, id: u16, healthy: bool) -> Option<Real> {
        let at = self.aimed_instant()?;
        self.stats.health_aimed += 1;
        self.health_at(id, at, healthy);
        Some(at)
    }

    /// The processor of `id` turns healthy or not at real time `at`.
    pub fn health_at(&mut self, id: u16, at: Real, healthy: bool) {
        let host = self.idx(id);
        let epoch = self.health_epoch;
        self.push(
            at.max(self.now),
            Ev::Health {
                host,
                healthy,
                epoch,
            },
        );
    }

    /// Cancels every health change scheduled and not yet applied (the faults stop).
    pub fn cancel_health_changes(&mut self) {
        self.health_epoch += 1;
    }

    /// True when `id` runs, its check has risen (with `checks`) and its startup quiet
    /// period has passed: its daemon knows its health and could be elected.
    pub fn settled(&self, id: u16) -> bool {
        let h = &self.hosts[self.idx(id)];
        h.up() && h.risen && self.now >= h.quiet_end
    }

    /// The real time by which every running daemon is settled (see `settled`), as far
    /// as scheduled now: the latest quiet period end and check rise.
    pub fn settle_time(&self) -> Real {
        self.hosts
            .iter()
            .filter(|h| h.up())
            .map(|h| h.quiet_end.max(if h.risen { 0 } else { h.rise_at }))
            .max()
            .unwrap_or(0)
            .max(self.now)
    }

    /// The processor of `host` turns healthy or not (counted), and its daemon is told.
    pub(super) fn apply_health(&mut self, host: usize, healthy: bool) {
        let now = self.now;
        let h = &mut self.hosts[host];
        if h.healthy == healthy {
            return;
        }
        h.healthy = healthy;
        h.fit_changed_at = now;
        self.stats.health_flips += 1;
        if self.opts.trace {
            let id = h.id;
            self.trace
                .push(format!("{now} {id} processor healthy={healthy}"));
        }
        if self.hosts.iter().all(|h| !h.healthy) {
            self.stats.all_unhealthy += 1;
        }
        self.report_health(host);
    }

    /// Tells a running, awake daemon whose check has risen its processor's health:
    /// with `checks`, a check result for each group whose verdict differs (fall and
    /// rise 1); without, each group's supervisor reports `health failing` or `health
    /// ok`. The host combines, stores and applies the verdict (`electd::host`).
    pub(super) fn report_health(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        if h.paused || !h.risen {
            return;
        }
        let healthy = h.healthy;
        let Some(sh) = h.shell.as_mut() else { return };
        // One processor per host in the simulator: its health is every group's.
        let mut changed = false;
        let groups = sh.groups().len();
        if self.opts.checks {
            for g in 0..groups {
                if (sh.health(g).0 == Verdict::Ok) != healthy {
                    sh.handle_check_result(g, &check_result(healthy));
                    changed = true;
                }
            }
        } else {
            for g in 0..groups {
                changed |= self.sup_report_health(host, g, healthy);
            }
        }
        if changed {
            self.drive(host);
        }
    }

    /// True when the processor of `id` is healthy.
    pub fn healthy(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].healthy
    }

    /// True when `id` is drained (its daemon's view, or its disk's while it is down).
    pub fn drained(&self, id: u16) -> bool {
        let h = &self.hosts[self.idx(id)];
        h.node().map_or(h.disk.drained, |n| n.drained())
    }

    /// True when `id` could lead: not a witness, its processor healthy, not drained.
    pub fn fit(&self, id: u16) -> bool {
        self.healthy(id) && !self.drained(id) && !self.opts.witnesses.contains(&id)
    }

    /// A real time aimed at a boundary that matters, from 1 ns to 1 ms either side: a
    /// running server's faith end, a leader's lease end, or a timer deadline.
    pub fn aimed_instant(&mut self) -> Option<Real> {
        let mut targets = Vec::new();
        for h in self.hosts.iter().filter(|h| !h.paused) {
            for n in h.nodes() {
                targets.push(h.clock.real(n.faith_until()));
                targets.push(h.clock.real(n.next_deadline()));
                if let Some(u) = n.status(h.clock.local(self.now)).lease_until {
                    targets.push(h.clock.real(u));
                }
            }
        }
        self.near_one_of(targets)
    }

    /// The check of this life of `host` has risen: its daemon reports the health now.
    pub(super) fn on_rise(&mut self, host: usize, life: u64) {
        let h = &mut self.hosts[host];
        if h.life != life || !h.up() {
            return;
        }
        h.risen = true;
        self.report_health(host);
    }
}
