//! The `electctl run` model (S5 per group): each host's supervisors register with the
//! host's own registry (`Host::handle_supervise`), read the numbered lines it sends,
//! run the command on the leases those lines carry, stop it when a line says this
//! server no longer leads, and confirm `released N` after a delay, late, twice or
//! never, or stall (issue 21). Whether a confirmation releases a RESIGN is the host's
//! rule (`electd::host::Registry`), not this model's: the simulator has no copy of it.
//!
//! Its surface to the rest of the simulator: `Host::sup` (one `Supervisor` per group,
//! fields private here); `register` (a process start), `sup_line` (a
//! `Notice::Supervisor`), `sup_arm` (a `Notice::ArmTimers`: issue 25's stop timers,
//! which every other connection passes, by its serial's parity); the events `Ev::Released` and `Ev::SupWake` (the loop
//! dispatches them to `released` and `sup_wake`; a crash keeps them, a wake replays
//! them); `sup_clock_stopped` and `sup_clock_remapped` (the host's clock); and the test
//! verbs `stall_supervisor` and `supervisor_stalled`.

use super::{Ev, Real, Sim, tag};
use electd::host::{ClientId, SupervisorLine};
use electd::node::Role;
use electd::supervise::{MARGIN, StopAt};
use electd::time::Time;

/// One group's `electctl run` supervisor on one host (S5 per group): its connection to
/// the daemon and the line numbers it tracks as `run` does (`supervise/conn.rs`), the
/// lease end its command runs to (its enforcer's, on the host's clock), and the planned
/// stop under way.
#[derive(Clone, Debug, Default)]
pub(super) struct Supervisor {
    /// Its connection to this life's daemon (None while the daemon is down).
    client: Option<ClientId>,
    /// The number of the last leader line read (0: none), and of the last confirmed.
    last_leader_n: u64,
    confirmed_n: u64,
    /// The highest non-leader line to confirm once the command has exited.
    to_confirm: Option<u64>,
    /// The lease end the command runs to (the enforcer's).
    end: Option<Time>,
    /// A planned stop is under way (the command was told to stop, not yet exited).
    stopping: bool,
    /// Planned stops so far (identifies the one an `Ev::Released` belongs to).
    stops: u64,
    /// Lines that came while stalled, read when it runs again.
    unread: Vec<SupervisorLine>,
    /// It reported its command unhealthy on this connection (`health failing`).
    reported_unhealthy: bool,
    /// Connections made in this process life (the serial of the next).
    conns: u64,
    /// This connection passed its stop timers (issue 25): renewals arm them
    /// (`sup_arm`) instead of coming as lines.
    timers: bool,
    /// The supervisor process is stopped until then (issue 21: SIGSTOP, a debugger, a
    /// blocked write): it reads no line and confirms nothing, while its lease-end
    /// enforcer, a process of its own, still ends the command at `end`.
    stalled_until: Option<Real>,
}

/// Whether the connection `client` passes its stop timers (issue 25): every other
/// one, by its serial (no draw of the seed: the swarm's seeds replay as before), so
/// both kinds meet every fault.
fn passes_timers(client: ClientId) -> bool {
    ((client.serial >> 20) + (client.serial & 0xfffff)) % 2 == 1
}

impl Sim {
    /// A process started: each group's supervisor connects to it and asks to supervise
    /// (`run` reconnects within its `--poll`; here at once). A new connection starts
    /// its line numbers afresh; the command and its enforcer carry on.
    pub(super) fn register(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        let life = h.life;
        for g in 0..h.sup.len() {
            let sup = &mut h.sup[g];
            sup.conns = 0;
            let client = ClientId {
                slot: g,
                serial: life << 20,
            };
            sup.client = Some(client);
            sup.last_leader_n = 0;
            sup.confirmed_n = 0;
            sup.to_confirm = None;
            sup.unread.clear();
            sup.reported_unhealthy = false;
            sup.timers = passes_timers(client);
            if let Some(sh) = h.shell.as_mut() {
                sh.handle_supervise(local, client, g, None, None, sup.timers)
                    .expect("one group per connection");
            }
        }
    }

    /// The supervisors of `id` lose their connections and connect again (a socket
    /// error, `run` restarted by systemd; issue 24): the host sees each one depart, its
    /// command runs on to the lease end it was told (its enforcer; a stop under way
    /// is not confirmed on the old connection), and it registers anew. A RESIGN waiting
    /// for it must wait for that lease end.
    pub fn reconnect_supervisors(&mut self, id: u16) {
        let host = self.idx(id);
        let h = &mut self.hosts[host];
        if !h.up() || h.paused {
            return;
        }
        self.stats.reconnects += 1;
        let local = h.clock.local(self.now);
        let life = h.life;
        for g in 0..h.sup.len() {
            let sup = &mut h.sup[g];
            let Some(old) = sup.client else { continue };
            sup.conns += 1;
            let client = ClientId {
                slot: g,
                serial: (life << 20) | sup.conns,
            };
            sup.client = Some(client);
            sup.last_leader_n = 0;
            sup.confirmed_n = 0;
            sup.to_confirm = None;
            sup.stopping = false;
            sup.unread.clear();
            sup.reported_unhealthy = false;
            sup.timers = passes_timers(client);
            if let Some(sh) = h.shell.as_mut() {
                sh.handle_client_gone(old);
                sh.handle_supervise(local, client, g, None, None, sup.timers)
                    .expect("one group per connection");
            }
        }
        if self.opts.trace {
            self.trace
                .push(format!("{} {id} supervisors reconnect", self.now));
        }
        self.report_health(host);
        self.drive(host);
    }

    /// Supervisor `g` of `host` reports its command's health on its connection if it
    /// changed (`health failing` / `health ok`); true if it sent a report. A report
    /// goes with the connection: after a restart it is made again.
    pub(super) fn sup_report_health(&mut self, host: usize, g: usize, healthy: bool) -> bool {
        let h = &mut self.hosts[host];
        let sup = &mut h.sup[g];
        let Some(client) = sup.client else {
            return false;
        };
        if sup.reported_unhealthy != healthy {
            return false;
        }
        sup.reported_unhealthy = !healthy;
        let report = (!healthy).then(|| "the processor is unhealthy".to_string());
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_supervisor_health(client, report)
                .expect("a registered supervisor");
        }
        true
    }

    /// A line from the host for supervisor `client` (group `client.slot`).
    pub(super) fn sup_line(&mut self, host: usize, client: ClientId, line: SupervisorLine) {
        let g = client.slot;
        let sup = &mut self.hosts[host].sup[g];
        if sup.client != Some(client) {
            return;
        }
        if sup.stalled_until.is_some() {
            // Read when it runs again (`sup_wake`).
            sup.unread.push(line);
            return;
        }
        self.read_line(host, g, &line);
    }

    /// The host armed the stop timers of supervisor `client` for the lease end `until`
    /// (a renewal): the kernel's timers, which its enforcer sleeps on, move whether
    /// `run` is stalled or not, so a command that runs (and is not being stopped) runs
    /// on to the new lease end. Nothing starts a command here: only `run` does, on a
    /// line.
    pub(super) fn sup_arm(&mut self, host: usize, client: ClientId, at: StopAt) {
        // What the armed instants let the command run to: its SIGKILL instant plus the
        // margin that instant keeps before the lease end. Taken from the instants the
        // daemon arms, not from the lease end the notice names, so the swarm checks
        // the arming itself (negative control `timers_late`).
        let until = Time::from_nanos(at.kill_ns) + MARGIN;
        let g = client.slot;
        let (id, now) = (self.hosts[host].id, self.now);
        let sup = &self.hosts[host].sup[g];
        if sup.client != Some(client) || !sup.timers {
            return;
        }
        self.stats.timer_renewals += 1;
        let end = self.hosts[host].clock.real(until);
        if self.hosts[host].sup[g].stopping || !self.checker(g).cmd_running(now, id) {
            return;
        }
        let sup = &mut self.hosts[host].sup[g];
        sup.end = Some(sup.end.map_or(until, |e| e.max(until)));
        self.checker(g).cmd_lease(now, id, end);
    }

    /// Supervisor `g` of `host` reads `line`, as `run` does: a leader line gives the
    /// command a lease (a new lease cancels a planned stop: the command runs on); a
    /// non-leader line after a leader line it has not confirmed the end of is one to
    /// confirm once the command has exited, and starts a planned stop if a command runs.
    fn read_line(&mut self, host: usize, g: usize, line: &SupervisorLine) {
        let (id, now) = (self.hosts[host].id, self.now);
        let h = &mut self.hosts[host];
        let sup = &mut h.sup[g];
        if let (Role::Leader, Some(u)) = (line.role, line.lease_until) {
            sup.last_leader_n = line.n;
            sup.stopping = false;
            sup.end = Some(u);
            let end = h.clock.real(u);
            self.checker(g).cmd_lease(now, id, end);
            return;
        }
        if sup.last_leader_n > sup.confirmed_n {
            sup.to_confirm = Some(sup.to_confirm.map_or(line.n, |p| p.max(line.n)));
        }
        if sup.to_confirm.is_some() && !sup.stopping {
            self.plan_stop(host, g);
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

    /// Group `group`'s supervisor on `host` is done with planned stop `stop`: its
    /// command exited; it sends `released N` for the highest non-leader line it read.
    /// With `confirm_twice_pm` it sends it again, or an older number first (the host
    /// must not care).
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
        if sup.stops != stop || !sup.stopping {
            // A new lease cancelled this stop: the command runs on, nothing to confirm.
            return;
        }
        sup.stopping = false;
        let (id, now) = (h.id, self.now);
        self.checker(group).cmd_stop(now, id);
        if self.opts.trace {
            self.trace.push(format!(
                "{} {id}{} supervisor: command exited",
                self.now,
                tag(group)
            ));
        }
        let h = &mut self.hosts[host];
        if h.life != inc || !h.up() {
            // Its daemon died meanwhile: the connection is gone, nothing to confirm.
            return;
        }
        if h.paused {
            // The daemon is stopped: the line waits in its socket.
            h.sup[group].stopping = true;
            h.backlog.push(again);
            return;
        }
        self.confirm(host, group);
    }

    /// Sends `released N` for the line to confirm, if any (and, with
    /// `confirm_twice_pm`, a duplicate or an older number too).
    fn confirm(&mut self, host: usize, group: usize) {
        let twice = self.opts.confirm_twice_pm > 0
            && self.rng.below(1000) < u64::from(self.opts.confirm_twice_pm);
        let older = twice && self.rng.below(2) == 0;
        let h = &mut self.hosts[host];
        let sup = &mut h.sup[group];
        let (Some(n), Some(client)) = (sup.to_confirm.take(), sup.client) else {
            return;
        };
        sup.confirmed_n = n;
        let mut ns = vec![n];
        if twice {
            self.stats.confirmed_twice += 1;
            if older && sup.last_leader_n > 0 {
                // An older confirmation first: the leader line's own number.
                ns.insert(0, sup.last_leader_n);
            } else {
                ns.push(n);
            }
        }
        if self.opts.trace {
            self.trace.push(format!(
                "{} {}{} supervisor: released {ns:?}",
                self.now,
                h.id,
                tag(group)
            ));
        }
        for n in ns {
            if let Some(sh) = self.hosts[host].shell.as_mut() {
                sh.handle_released(client, n).expect("a line it was sent");
            }
            self.drive(host);
        }
    }

    /// Group `g`'s supervisor on `host` read a line that says this server no longer
    /// leads while a lease it has not confirmed the end of may still run its command:
    /// it stops the command and confirms after a random delay, or never (hung); the
    /// command ends at the confirmation or at the lease end, whichever comes first.
    pub(super) fn plan_stop(&mut self, host: usize, group: usize) {
        self.stats.planned_stops += 1;
        self.mark();
        let hung = self.rng.below(1000) < u64::from(self.opts.confirm_hung_pm);
        let min = self.opts.confirm_min.min(self.opts.confirm_max);
        let d = min + self.rng.below(self.opts.confirm_max - min + 1);
        let h = &mut self.hosts[host];
        let sup = &mut h.sup[group];
        sup.stopping = true;
        sup.stops += 1;
        let (id, inc, stop) = (h.id, h.life, sup.stops);
        let tag = tag(group);
        let now = self.now;
        let ev = Ev::Released {
            host,
            group,
            inc,
            stop,
        };
        if !self.checker(group).cmd_running(now, id) {
            // No command runs: the supervisor was never told of this lease (elected and
            // handing over within one input, as a preemption right after an election
            // does) or its command already ended. It has nothing to stop and confirms at
            // once.
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

    /// A stalled supervisor runs again: it reads the lines queued meanwhile (leases,
    /// stops), then carries out and confirms a stop it had been told of.
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
        let unread = std::mem::take(&mut self.hosts[host].sup[group].unread);
        for line in &unread {
            self.read_line(host, group, line);
        }
        let h = &self.hosts[host];
        let sup = &h.sup[group];
        if !h.up() {
        } else if sup.stopping {
            // The stop under way, whose confirmation the stall swallowed: carried out
            // now, confirmed as usual.
            let ev = Ev::Released {
                host,
                group,
                inc: h.life,
                stop: sup.stops,
            };
            let d = if self.checker(group).cmd_running(now, id) {
                let min = self.opts.confirm_min.min(self.opts.confirm_max);
                min + self.rng.below(self.opts.confirm_max - min + 1)
            } else {
                0
            };
            self.push(now + d, ev);
        } else if sup.to_confirm.is_some() {
            self.plan_stop(host, group);
        }
        self.gather();
    }
}
