//! The `electctl run` model (S5 per group): each host's supervisors learn the leases,
//! are told to stop for planned handoffs, confirm after a delay, late or never, stall
//! (issue 21), and release the RESIGN that waits for them.
//!
//! Its whole surface to the rest of the simulator: `Host::sup` (one `Supervisor` per
//! group, fields private here); the events `Ev::Released` and `Ev::SupWake` (the loop
//! dispatches them to `released` and `sup_wake`; a crash keeps them, a wake replays
//! them); `plan_stop` (a `Resigning` event), `sup_leader_line` (a lease after a
//! flush), `sup_clock_stopped` and `sup_clock_remapped` (the host's clock); and the
//! test verbs `stall_supervisor` and `supervisor_stalled`. It releases a RESIGN
//! through the core (`handle_released`), as the host's release gates stay shut.

use super::{Ev, Real, Sim, tag};
use electd::time::Time;

/// One group's `electctl run` supervisor on one host (S5 per group): the last lease
/// end the host reported (its local clock), the planned stop under way, and a counter
/// of the lines it was told that matter (each planned stop and each lease report), as
/// the daemon numbers them.
#[derive(Clone, Debug, Default)]
pub(super) struct Supervisor {
    end: Option<Time>,
    stopping: bool,
    lines: u64,
    /// The planned stop whose command the supervisor last confirmed exited.
    confirmed: u64,
    /// The supervisor process is stopped until then (issue 21: SIGSTOP, a debugger, a
    /// blocked write): it reads no line and confirms nothing, while its lease-end
    /// enforcer, a process of its own, still ends the command at `end`.
    stalled_until: Option<Real>,
}

impl Sim {
    /// Group `g`'s supervisor on `host` reads a leader line: the lease runs until `u` on
    /// the host's clock, `end` in real time.
    pub(super) fn sup_leader_line(&mut self, host: usize, g: usize, u: Time, end: Real) {
        // The supervisor learns the lease (at once: the soonest it could start) and
        // runs the command until that end at least. A leader line: no confirmation of
        // an earlier stop counts any more. A stalled one reads the line only when it
        // runs again (`sup_wake`): its enforcer keeps the end it was told last.
        let (id, now) = (self.hosts[host].id, self.now);
        let sup = &mut self.hosts[host].sup[g];
        sup.stopping = false;
        sup.lines += 1;
        if sup.stalled_until.is_none() {
            sup.end = Some(u);
            self.checker(g).cmd_lease(now, id, end);
        }
    }

    /// Per group, the lease end the supervisor of `host` enforces, in real time by the
    /// host's clock now.
    fn sup_lease_ends(&self, host: usize) -> Vec<(usize, Real)> {
        let h = &self.hosts[host];
        h.sup
            .iter()
            .enumerate()
            .filter_map(|(g, s)| s.end.map(|u| (g, h.clock.real(u))))
            .collect()
    }

    /// The clock of `host` stood still from `since` until now (a suspend with
    /// `monotonic_suspend`).
    pub(super) fn sup_clock_stopped(&mut self, host: usize, since: Real) {
        // The supervisor enforces the lease end on the host's clock: if that clock
        // stopped, its command runs past the end it had in real time.
        let (id, now) = (self.hosts[host].id, self.now);
        for (g, end) in self.sup_lease_ends(host) {
            self.checker(g).cmd_extend(now, id, since, end);
        }
    }

    /// The clock of `host` changed its rate: the lease ends its supervisors enforce on
    /// it fall at other real times.
    pub(super) fn sup_clock_remapped(&mut self, host: usize) {
        let (id, now) = (self.hosts[host].id, self.now);
        for (g, end) in self.sup_lease_ends(host) {
            self.checker(g).remap(now, id, end);
        }
    }

    /// Group `group`'s supervisor on `host` confirms planned stop `stop`.
    pub(super) fn released(&mut self, host: usize, group: usize, inc: u64, stop: u64) {
        let again = Ev::Released {
            host,
            group,
            inc,
            stop,
        };
        let h = &mut self.hosts[host];
        if h.suspended_at.is_some() {
            // The supervisor is frozen with its host: it confirms on waking.
            h.backlog.push(again);
            return;
        }
        if h.sup[group].stalled_until.is_some() {
            // A stalled supervisor confirms nothing; once it runs again it confirms
            // the stop then under way, if any (`sup_wake`).
            return;
        }
        let sup = &mut h.sup[group];
        if sup.lines == stop && sup.stopping {
            sup.stopping = false;
            sup.confirmed = stop;
            let (id, now) = (h.id, self.now);
            self.checker(group).cmd_stop(now, id);
            if self.opts.trace {
                self.trace.push(format!(
                    "{} {id}{} supervisor: command exited",
                    self.now,
                    tag(group)
                ));
            }
        }
        let h = &mut self.hosts[host];
        if h.life != inc || !h.up() {
            return;
        }
        // Only the confirmation of the stop under way releases the RESIGN. One of
        // a stop that a new lease cancelled (the host was re-elected before it
        // came) says nothing about a later handoff, whose command may still run:
        // letting it through released a health handover's RESIGN while the
        // command ran on (S5; found by health_flapping_never_breaks_safety).
        // The daemon counts `released N` only for a line sent after the last
        // leader line (control.rs, `Supervisor::clear`): the late confirmation
        // of a stop that the lease end and a new lease overtook releases no
        // later handoff (swarm seed 52839).
        let sup = &h.sup[group];
        if sup.confirmed != stop || sup.lines != stop {
            if sup.confirmed == stop && self.opts.trace {
                self.trace.push(format!(
                    "{} {}{} supervisor: late confirmation of stop {stop} ignored",
                    self.now,
                    h.id,
                    tag(group)
                ));
            }
            return;
        }
        if h.paused {
            h.backlog.push(again);
            return;
        }
        let local = h.clock.local(self.now);
        if let Some(sh) = h.shell.as_mut() {
            sh.group_mut(group).node.handle_released(local);
        }
        self.drive(host);
    }

    /// Group `g`'s supervisor on `host` is told to stop its command for a planned
    /// handoff; it confirms after a random delay, or never (hung), and the command ends
    /// at the confirmation or at the lease end, whichever comes first.
    pub(super) fn plan_stop(&mut self, host: usize, group: usize) {
        self.stats.planned_stops += 1;
        self.mark();
        let hung = self.rng.below(1000) < u64::from(self.opts.confirm_hung_pm);
        let min = self.opts.confirm_min.min(self.opts.confirm_max);
        let d = min + self.rng.below(self.opts.confirm_max - min + 1);
        let h = &mut self.hosts[host];
        let sup = &mut h.sup[group];
        sup.stopping = true;
        sup.lines += 1;
        let (id, inc, stop) = (h.id, h.life, sup.lines);
        let tag = tag(group);
        let now = self.now;
        let ev = Ev::Released {
            host,
            group,
            inc,
            stop,
        };
        if let Some(until) = self.hosts[host].sup[group].stalled_until {
            // Told while stalled: it reads the line when it runs again (`sup_wake`).
            if self.opts.trace {
                self.trace.push(format!(
                    "{now} {id}{tag} supervisor: told to stop (stop {stop}) while stalled \
                     until {until}"
                ));
            }
            return;
        }
        if !self.checker(group).cmd_running(now, id) {
            // No command runs: the supervisor was never told of this lease (elected and
            // handing over within one input, as a preemption right after an election
            // does) or its command already ended. It has nothing to stop, and the daemon
            // counts it as clear at once (control.rs, Supervisor::clear).
            if self.opts.trace {
                self.trace.push(format!(
                    "{now} {id}{tag} supervisor: told to stop (stop {stop}), no command runs: \
                     confirms at once"
                ));
            }
            self.push(now, ev);
            return;
        }
        if self.opts.trace {
            let when = if hung {
                "never".to_string()
            } else {
                format!("at {}", now + d)
            };
            self.trace.push(format!(
                "{now} {id}{tag} supervisor: told to stop (stop {stop}), confirms {when}"
            ));
        }
        if hung {
            self.stats.hung += 1;
            return;
        }
        self.push(now + d, ev);
    }

    /// Stops the supervisors of `id` (every group's) for `d` (issue 21: SIGSTOP of
    /// `electctl run`, a debugger, a write that blocks): they read no line and confirm
    /// no stop until then, while each one's lease-end enforcer still ends the command
    /// at the last lease end it was told. With `stall_enforcer` (a negative control)
    /// the enforcer stops too, as only a frozen host could: the command runs on until
    /// the stall ends.
    pub fn stall_supervisor(&mut self, id: u16, d: Real) {
        let (host, now) = (self.idx(id), self.now);
        self.stats.sup_stalls += 1;
        for group in 0..self.hosts[host].sup.len() {
            let sup = &mut self.hosts[host].sup[group];
            let until = sup.stalled_until.map_or(now + d, |u| u.max(now + d));
            sup.stalled_until = Some(until);
            self.push(until, Ev::SupWake { host, group, until });
            if self.opts.stall_enforcer {
                self.checker(group).cmd_extend(now, id, now, until);
            }
        }
        self.gather();
        if self.opts.trace {
            self.trace
                .push(format!("{now} {id} supervisor stalled for {d}"));
        }
    }

    /// True while a supervisor of `id` is stalled.
    pub fn supervisor_stalled(&self, id: u16) -> bool {
        self.hosts[self.idx(id)]
            .sup
            .iter()
            .any(|s| s.stalled_until.is_some())
    }

    /// A stalled supervisor runs again: it reads the lines queued meanwhile (the newest
    /// lease, or a stop, which it then carries out and confirms).
    pub(super) fn sup_wake(&mut self, host: usize, group: usize, until: Real) {
        let now = self.now;
        let h = &mut self.hosts[host];
        if h.sup[group].stalled_until != Some(until) {
            return;
        }
        if h.suspended_at.is_some() {
            // Frozen with its host meanwhile: it runs when the host wakes.
            h.backlog.push(Ev::SupWake { host, group, until });
            return;
        }
        h.sup[group].stalled_until = None;
        let id = h.id;
        if self.opts.trace {
            self.trace
                .push(format!("{now} {id}{} supervisor runs again", tag(group)));
        }
        let h = &self.hosts[host];
        let lease = h
            .node_of(group)
            .and_then(|n| n.status(h.clock.local(now)).lease_until)
            .map(|u| (u, h.clock.real(u)));
        if let Some((u, end)) = lease {
            self.hosts[host].sup[group].end = Some(u);
            self.checker(group).cmd_lease(now, id, end);
        }
        let h = &self.hosts[host];
        let sup = &h.sup[group];
        if sup.stopping && h.up() {
            // The stop line it had not read: carried out now, confirmed as usual.
            let ev = Ev::Released {
                host,
                group,
                inc: h.life,
                stop: sup.lines,
            };
            let d = if self.checker(group).cmd_running(now, id) {
                let min = self.opts.confirm_min.min(self.opts.confirm_max);
                min + self.rng.below(self.opts.confirm_max - min + 1)
            } else {
                0
            };
            self.push(now + d, ev);
        }
        self.gather();
    }
}
