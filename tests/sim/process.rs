//! One simulated server process (`Host`): its start with the state file it has, and
//! its life cycle: crash (with or without a restart), restart, pause, suspend, wake,
//! and SIGHUP with new timers.

use super::options::host_config;
use super::supervisors::Supervisor;
use super::{Clock, Disk, Ev, Real, Sim, Timers, ms};
use electd::health::Limits;
use electd::host as shell;
use electd::node::{Durable, Node};
use electd::time::Time;

/// One simulated server process and its disk.
pub struct Host {
    pub id: u16,
    /// The daemon's shell (`electd::host::Host`, one Node per election group) while the
    /// process runs; None while it is down.
    pub shell: Option<shell::Host>,
    pub clock: Clock,
    pub disk: Disk,
    /// The write in flight (the host hands out one at a time): it lands or not if the
    /// process dies now.
    pub(super) writing: Option<Disk>,
    /// When the last write completes.
    pub(super) write_done_at: Real,
    /// The state disk is stalled until then (fsfreeze): a write started before it
    /// lands no earlier (`Sim::stall_disk`).
    pub(super) disk_stalled_until: Real,
    pub(super) paused: bool,
    pub(super) backlog: Vec<Ev>,
    /// Datagrams that arrived while the host said they may wait
    /// (`datagrams_may_wait`, issue 25): its socket buffer, in arrival order, read at
    /// its next wakeup.
    pub(super) deferred: Vec<(usize, std::rc::Rc<Vec<u8>>)>,
    pub(super) timer_at: Option<Real>,
    /// Incremented at every crash and pause, so stale timers are recognised.
    pub(super) inc: u64,
    /// Incremented at every crash: writes, confirmations and scheduled crashes belong
    /// to one process (a pause does not cancel a disk write).
    pub(super) life: u64,
    pub restarts: u32,
    /// The whole host is suspended (the supervisor and the command too) since then.
    pub(super) suspended_at: Option<Real>,
    /// Crash the process at a random moment of its next state write.
    pub(super) crash_in_write: bool,
    /// Stopping (SIGTERM) since `stop`: restart this long after the exit (None: stay
    /// down).
    pub(super) stop_restart: Option<Option<Real>>,
    /// Per group, its supervisor.
    pub(super) sup: Vec<Supervisor>,
    pub timers: Timers,
    /// The processor's health (what its check would find), whatever the daemon knows.
    pub healthy: bool,
    /// With `checks`: the daemon of this life has had its first check results, so it
    /// reports `healthy`; before that it is unhealthy.
    pub(super) risen: bool,
    /// Real time of the last change of this server's fitness (health or drain).
    pub fit_changed_at: Real,
    /// When this life's startup quiet period ends and its check rises (real time).
    pub(super) quiet_end: Real,
    pub(super) rise_at: Real,
    /// Per group, the faith this server vouched for ("S2-disk", `durable.rs`); kept
    /// across crashes, as the promise it made is.
    pub(super) owed: Vec<super::durable::Owed>,
}

impl Host {
    /// A server that has not started yet: its clock, its timers, and a state file of
    /// `groups` groups never written.
    pub(super) fn new(id: u16, clock: Clock, timers: Timers, groups: usize) -> Host {
        Host {
            id,
            shell: None,
            clock,
            disk: Disk(vec![Durable::default(); groups]),
            writing: None,
            write_done_at: 0,
            disk_stalled_until: 0,
            paused: false,
            backlog: Vec::new(),
            deferred: Vec::new(),
            timer_at: None,
            inc: 0,
            life: 0,
            restarts: 0,
            suspended_at: None,
            crash_in_write: false,
            stop_restart: None,
            sup: vec![Supervisor::default(); groups],
            timers,
            healthy: true,
            risen: false,
            fit_changed_at: 0,
            quiet_end: 0,
            rise_at: 0,
            owed: vec![Default::default(); groups],
        }
    }

    /// Group 0's node, if the process runs.
    pub fn node(&self) -> Option<&Node> {
        self.node_of(0)
    }

    /// Group `g`'s node, if the process runs.
    pub fn node_of(&self, g: usize) -> Option<&Node> {
        self.shell
            .as_ref()
            .and_then(|s| s.groups().get(g))
            .map(|g| &g.node)
    }

    /// Every group's node while the process runs (none while it is down).
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.shell.iter().flat_map(|s| s.nodes())
    }

    /// True while the process runs.
    pub fn up(&self) -> bool {
        self.shell.is_some()
    }

    /// When its quiet period after its last start ends (real time).
    pub fn quiet_end(&self) -> Real {
        self.quiet_end
    }
}

impl Sim {
    /// A process starts with the state file it has: one Node per group.
    pub(super) fn start(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        if h.up() {
            return;
        }
        let local = h.clock.local(self.now);
        // A daemon with a check starts unhealthy (SPEC section 13) and learns its
        // processor's health once the check has risen; without one it knows at
        // once. The core starts healthy: tell it before anything leaves.
        h.risen = !self.opts.checks;
        let start = h.healthy && h.risen;
        let mut groups = Vec::new();
        for (g, cfg) in self.cfgs[host].iter().enumerate() {
            let node = Node::new(cfg.clone(), h.disk.group(g), local).expect("valid config");
            groups.push((format!("g{g}"), node, h.disk.group(g)));
        }
        let hc = host_config(&self.cfgs[host], !self.opts.multicast);
        // No keys and no boot numbers in the simulator.
        let mut sh = shell::Host::new(hc, groups, Default::default(), Default::default(), None);
        // With `checks` the daemon learns its processor's health from a check (fall 1,
        // rise 1: one result per change), unknown until the first; without, from its
        // supervisors' `health` reports (`electctl run --max-restarts`), at once.
        sh.set_sabotage(self.host_sabotage(host));
        for g in 0..self.cfgs[host].len() {
            // Its first result comes within `rise_max` of the start (`set_healthy`).
            let limits = self.opts.checks.then_some(Limits {
                fall: 1,
                rise: 1,
                // (plus a tenth for the host clock's rate).
                settle: std::time::Duration::from_nanos(
                    self.opts.rise_max + self.opts.rise_max / 10,
                ),
            });
            sh.set_check(local, g, limits);
        }
        let h = &mut self.hosts[host];
        h.shell = Some(sh);
        // The quiet period: max(K*HBT, the hold promise on disk), on its clock.
        let promise = h.disk.0.iter().map(|d| d.hold_ms).max().unwrap_or(0);
        let quiet = h.timers.hold().max(ms(u64::from(promise)));
        h.quiet_end = h.clock.real(Time(local.0 + quiet)) + 1;
        h.rise_at = self.now;
        h.crash_in_write = false;
        h.timer_at = None;
        h.paused = false;
        let life = h.life;
        if self.opts.trace {
            let disk = if h.disk.0.len() == 1 {
                format!("{:?}", h.disk.0[0])
            } else {
                format!("{:?}", h.disk.0)
            };
            self.trace.push(format!(
                "{} start {} disk={disk} healthy={start}",
                self.now, h.id
            ));
        }
        if self.opts.checks {
            let at = self.now + self.rng.below(self.opts.rise_max + 1);
            self.hosts[host].rise_at = at;
            self.push(at, Ev::Rise { host, life });
        }
        // Its supervisors connect before anything else happens (`run` waits for the
        // daemon's socket; the daemon elects no one before its quiet period).
        self.register(host);
        self.report_health(host);
        self.drive(host);
    }

    /// Ends a pause or a suspend: the clock runs again, the backlog is handled.
    pub(super) fn wake(&mut self, host: usize, inc: u64) {
        let now = self.now;
        let h = &mut self.hosts[host];
        if h.inc != inc || !h.paused {
            return;
        }
        h.paused = false;
        let suspended_at = h.suspended_at.take();
        // Only a clock that stopped moved the real time of a local lease end (a running
        // clock's mapping did not change; re-mapping past ends would extrapolate).
        let stopped = h.clock.stopped();
        h.clock.start(now);
        let backlog = std::mem::take(&mut h.backlog);
        if let (Some(since), true) = (suspended_at, stopped) {
            self.sup_clock_stopped(host, since);
        }
        // What waited for this wakeup is read before the timers, as in the daemon.
        self.read_deferred(host);
        let h = &mut self.hosts[host];
        let local = h.clock.local(now);
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_timeout(local).expect("host");
        }
        self.drive(host);
        // The check results that came in meanwhile.
        self.report_health(host);
        for ev in backlog {
            match ev {
                Ev::Deliver { to, from, bytes } => self.deliver(to, from, &bytes),
                Ev::PersistDone { host, state, .. } => self.persisted(host, &state),
                ev @ (Ev::Released { .. } | Ev::Reload { .. } | Ev::SupWake { .. }) => {
                    self.dispatch(ev)
                }
                _ => {}
            }
        }
    }

    /// Crashes `id` at real time `at` (if that process still runs then), restarting it
    /// `restart_after` later.
    pub fn crash_at(&mut self, id: u16, at: Real, restart_after: Option<Real>) {
        let host = self.idx(id);
        let inc = self.hosts[host].life;
        self.push(
            at.max(self.now),
            Ev::Crash {
                host,
                inc,
                restart_after,
            },
        );
    }

    /// SIGHUP of `id` with `timers` at real time `at`.
    pub fn reload_at(&mut self, id: u16, at: Real, timers: Timers) {
        let host = self.idx(id);
        self.push(at.max(self.now), Ev::Reload { host, timers });
    }

    /// Suspends the whole host `id` for `d`: the daemon, its supervisor and the command
    /// freeze. The daemon's boot clock keeps counting; with `monotonic_suspend` the clock
    /// stops until the host wakes.
    pub fn suspend(&mut self, id: u16, d: Real) {
        let (i, now) = (self.idx(id), self.now);
        let h = &mut self.hosts[i];
        if !h.up() || h.paused {
            return;
        }
        self.stats.suspends += 1;
        h.paused = true;
        h.suspended_at = Some(now);
        h.inc += 1;
        h.timer_at = None;
        if self.opts.monotonic_suspend {
            h.clock.stop(now);
        }
        let inc = h.inc;
        if self.opts.trace {
            self.trace.push(format!("{now} suspend {id} for {d}"));
        }
        self.push(now + d, Ev::Wake { host: i, inc });
    }

    /// Kills a process: volatile state is gone; an unfinished write lands or not.
    pub fn crash(&mut self, id: u16) {
        let i = self.idx(id);
        let landed = self.rng.below(2) == 0;
        let h = &mut self.hosts[i];
        if h.shell.take().is_none() {
            return;
        }
        if let Some(w) = h.writing.take() {
            if landed {
                h.disk = w;
            }
        }
        h.inc += 1;
        h.life += 1;
        h.paused = false;
        // The socket and what waited in it die with the process.
        h.deferred.clear();
        h.stop_restart = None;
        h.suspended_at = None;
        h.clock.start(self.now);
        // Only the daemon dies: its supervisor keeps the command to the lease end, and
        // a confirmation already under way still comes (and stops the command).
        h.backlog.retain(|e| {
            matches!(
                e,
                Ev::Released { .. } | Ev::Reload { .. } | Ev::SupWake { .. }
            )
        });
        let keep = std::mem::take(&mut h.backlog);
        h.timer_at = None;
        for ev in keep {
            self.push(self.now, ev);
        }
        if self.opts.trace {
            self.trace.push(format!("{} crash {id}", self.now));
        }
        for g in 0..self.opts.groups.max(1) {
            let now = self.now;
            self.checker(g).on_down(now, id);
        }
    }

    /// SIGTERM of `id`: its host hands over every group it leads and claims unfit
    /// (`electd::host::Host::handle_stop`); the process exits once the host says the
    /// stop is done (every RESIGN left, nothing left to write) or its bound passed,
    /// and starts again `restart_after` later. It must never exit holding a lease.
    pub fn stop(&mut self, id: u16, restart_after: Option<Real>) {
        let host = self.idx(id);
        let h = &mut self.hosts[host];
        if !h.up() || h.paused || h.stop_restart.is_some() {
            return;
        }
        self.stats.stops += 1;
        h.stop_restart = Some(restart_after);
        let local = h.clock.local(self.now);
        if self.opts.trace {
            self.trace.push(format!("{} stop {id}", self.now));
        }
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_stop(local).expect("host");
        }
        self.drive(host);
    }

    /// A stopping process whose host says the stop is done exits (checked: no group's
    /// lease may still be held).
    pub(super) fn check_stop(&mut self, host: usize) {
        let h = &self.hosts[host];
        let Some(sh) = h.shell.as_ref().filter(|s| s.stopping()) else {
            return;
        };
        let local = h.clock.local(self.now);
        if matches!(sh.stop_state(local), shell::StopState::Waiting(_)) {
            return;
        }
        let (id, now) = (h.id, self.now);
        let held: Vec<(usize, u64)> = sh
            .groups()
            .iter()
            .enumerate()
            .filter(|(_, g)| g.node.is_leader(local))
            .map(|(i, g)| (i, g.node.status(local).term))
            .collect();
        for (g, term) in held {
            self.checker(g).violate(format!(
                "STOP: server {id} exited holding the lease of term {term} (t={now}): a stop hands over first"
            ));
        }
        let restart_after = self.hosts[host].stop_restart.take().flatten();
        if self.opts.trace {
            self.trace.push(format!("{now} {id} exits (stopped)"));
        }
        self.crash(id);
        if let Some(d) = restart_after {
            self.hosts[host].restarts += 1;
            self.push(now + d, Ev::Restart { host });
        }
    }

    /// Starts a crashed process again with the state file it has.
    pub fn restart(&mut self, id: u16) {
        let i = self.idx(id);
        self.hosts[i].restarts += 1;
        self.push(self.now, Ev::Restart { host: i });
        self.run_until(self.now);
    }

    /// Freezes a process for `d`; its timers fire late and its input queues up.
    pub fn pause(&mut self, id: u16, d: Real) {
        let i = self.idx(id);
        let h = &mut self.hosts[i];
        if !h.up() || h.paused {
            return;
        }
        h.paused = true;
        h.inc += 1;
        h.timer_at = None;
        let inc = h.inc;
        if self.opts.trace {
            self.trace.push(format!("{} pause {id} for {d}", self.now));
        }
        self.push(self.now + d, Ev::Resume { host: i, inc });
    }

    /// Ends a pause now.
    pub fn resume(&mut self, id: u16) {
        let i = self.idx(id);
        if self.hosts[i].paused {
            let inc = self.hosts[i].inc;
            self.push(self.now, Ev::Resume { host: i, inc });
            self.run_until(self.now);
        }
    }

    /// True while the process of `id` runs.
    pub fn is_up(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].up()
    }

    /// True while the process of `id` is paused or suspended.
    pub fn is_paused(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].paused
    }

    /// A scheduled crash of this life of `host`, and its restart if one is due.
    pub(super) fn on_crash(&mut self, host: usize, inc: u64, restart_after: Option<Real>) {
        if self.hosts[host].life != inc || !self.hosts[host].up() {
            return;
        }
        let id = self.hosts[host].id;
        self.crash(id);
        if let Some(d) = restart_after {
            self.hosts[host].restarts += 1;
            self.push(self.now + d, Ev::Restart { host });
        }
    }

    /// SIGHUP with new timers: every group's core takes them (a paused process when it
    /// wakes).
    pub(super) fn reload(&mut self, host: usize, timers: Timers) {
        let h = &mut self.hosts[host];
        if h.paused {
            h.backlog.push(Ev::Reload { host, timers });
            return;
        }
        self.stats.reloads += 1;
        h.timers = timers;
        let reload_timers = |c: &electd::node::NodeConfig| shell::ReloadTimers {
            heartbeat: c.heartbeat,
            rtt: c.rtt,
            missed_heartbeats: c.missed_heartbeats,
            drift_ppm: c.drift_ppm,
            max_hold: c.max_hold,
        };
        for cfg in self.cfgs[host].iter_mut() {
            timers.apply(cfg);
        }
        let new = reload_timers(&self.cfgs[host][0]);
        if self.opts.trace {
            self.trace
                .push(format!("{} reload {} {timers:?}", self.now, h.id));
        }
        if let Some(sh) = h.shell.as_mut() {
            // The daemon's own reload of the timers (every group or none); the
            // simulator's supervisors announce no grace, so none is refused.
            sh.handle_reload_timers(new).expect("valid timers");
            self.drive(host);
        }
        self.disk_on_reload(host);
    }
}
