//! A deterministic simulator of an electd cluster (issue 2).
//!
//! One virtual real-time clock jumps from event to event; every node has its own clock
//! running at a rate within `drift` of real time. The network delays, loses, duplicates,
//! reorders and partitions datagrams; processes pause (their timers fire late), crash
//! (losing all volatile state and any write not yet on disk) and restart with the state
//! file they had. Everything random is drawn from one seed: the same seed replays the
//! same run event for event. The checker (`check.rs`) runs after every event.
//!
//! Issue 10 added the adversaries that broke the lease where 10,000 seeds had not:
//! each host runs an `electctl run` supervisor (S5); genuine old datagrams come back
//! long after they were sent (`late_pm`, `flush`); deliveries are aimed at the
//! receiver's faith end or a leader's lease end (`aim_pm`); crashes land between a
//! state write and its confirmation (`crash_in_write`); timers differ per server and
//! change mid-run (`Timers`, `reload`); clock rates change mid-run (`set_clock_rate`);
//! whole hosts are suspended (`suspend`), with the boot clock running on or, with
//! `monotonic_suspend`, stopped (a negative control: what CLOCK_MONOTONIC would do).
//!
//! Issue 11 added health: each host's processor is healthy or not (`set_health`,
//! `health_at`, aimed at lease and timer ends with `aimed_instant`), and the daemon
//! learns it at once, or, with `checks`, starts unhealthy at every start and reports the
//! host's health after up to `rise_max` (a check's rise; fall/rise counting itself is
//! the daemon's business). A paused or suspended daemon learns the health when it
//! wakes. Drains (`drain`) go to the core and are persisted in `Durable.drained` like
//! the other durable fields, so they survive crashes; `yield_to` names a successor;
//! priorities and `preempt_delay` come from the Options. Health, drain and preempt
//! handovers go through `Event::Resigning` like a yield, so the supervisor model (S5)
//! treats them as planned handoffs. `link_delays` gives per-link delays (regions).
//!
//! Issue 24: each simulated server runs the daemon's own shell, `electd::host::Host`
//! (decode, fan-out to groups, `handle_heard`, the flush with its write-before-send
//! order, heartbeat alignment and bundling per destination). The simulator only
//! drives it (`drive`, `deliver`, `route`, `write`, `persisted`): its network carries
//! the bytes of `poll_transmit`, its disk takes `poll_write` and reports the write
//! done after a random latency. Its supervisors release RESIGNs through `released`;
//! the host's release gates stay shut (every simulated group has a supervisor). The
//! unbatched mode (one datagram per message, one write per request, as before issue
//! 12) is gone: the daemon has none.
//!
//! The files, one concern each: `clock` (time and drift), `options` (the knobs and the
//! one config fixture), `network`, `disk`, `process` (a server's life cycle),
//! `supervisors` (the `electctl run` model), `health` (the processor and its check),
//! `commands` (what `electctl` sends), `durable` ("S2-disk": the hold a crash could
//! leave on disk covers the faith vouched for), `observe` (checkers, watch, statuses), `stats`,
//! `acks` (an adversary on one leader's ACKs, for the lease at rest), `turns` (one on
//! its LEADs, with the record of what the network did, for needless rounds at rest);
//! this file holds `Sim`, its event queue and loop, and the drive of a host's outputs.
#![allow(dead_code)]

mod acks;
pub mod check;
mod clock;
mod commands;
mod disk;
mod durable;
mod health;
mod network;
mod observe;
mod options;
mod process;
mod stats;
mod supervisors;
mod turns;

// What the sim tests name (not every test file names all of it).
#[allow(unused_imports)]
pub use self::{
    acks::{AckLossPlan, AckLossReload},
    clock::{Clock, Real, ms},
    disk::Disk,
    network::{Filter, Kind, LeadHold, decode, decode_all, encode},
    options::{Options, Timers, rotated},
    process::Host,
    stats::Stats,
    turns::{LeadLossPlan, TurnRecord},
};

use check::Checker;
use electd::host::{HostSabotage, Notice};
use electd::node::NodeConfig;
use electd::rng::SplitMix64;
use network::Network;
use observe::Watch;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;

#[derive(Debug)]
enum Ev {
    Deliver {
        to: usize,
        from: usize,
        bytes: Rc<Vec<u8>>,
    },
    Timer {
        host: usize,
        inc: u64,
        deadline: Real,
    },
    PersistDone {
        host: usize,
        inc: u64,
        state: Disk,
    },
    Resume {
        host: usize,
        inc: u64,
    },
    Restart {
        host: usize,
    },
    /// The process dies (a scheduled crash); restarts after `restart_after` if given.
    Crash {
        host: usize,
        inc: u64,
        restart_after: Option<Real>,
    },
    /// Group `group`'s supervisor confirms that its command exited (planned stop `stop`).
    Released {
        host: usize,
        group: usize,
        inc: u64,
        stop: u64,
    },
    /// SIGHUP with new timers.
    Reload {
        host: usize,
        timers: Timers,
    },
    /// A suspended host wakes up.
    Wake {
        host: usize,
        inc: u64,
    },
    /// The host's processor turns healthy or not (the adversary), unless the changes of
    /// its epoch were cancelled.
    Health {
        host: usize,
        healthy: bool,
        epoch: u64,
    },
    /// A started daemon's check has risen: it reports the host's health from now on.
    Rise {
        host: usize,
        life: u64,
    },
    /// A stalled supervisor runs again (issue 21), unless a later stall superseded it.
    SupWake {
        host: usize,
        group: usize,
        until: Real,
    },
}

struct Entry {
    at: Real,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}

impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// The simulated cluster.
pub struct Sim {
    pub opts: Options,
    pub now: Real,
    rng: SplitMix64,
    queue: BinaryHeap<Entry>,
    seq: u64,
    pub hosts: Vec<Host>,
    /// The links between the hosts and what they hold.
    net: Network,
    /// Group 0's checker; the other groups' are in `group_checks`, and their violations
    /// are moved to this one's list (tagged with the group) after every event.
    pub check: Checker,
    /// The checkers of groups 1.. (index = group - 1).
    pub group_checks: Vec<Checker>,
    /// The independence watch (issue 12), while one is set.
    watch: Option<Watch>,
    pub events: u64,
    pub sent: u64,
    /// ELECT and VOTE datagrams sent (per recipient), for the scale figures.
    pub election_sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    trace: Vec<String>,
    /// Scheduled health changes of an older epoch are dropped (`cancel_health_changes`).
    health_epoch: u64,
    /// Per host, per group.
    cfgs: Vec<Vec<NodeConfig>>,
    /// Real times of recent elections and planned stops (where a flush is aimed).
    pub marks: std::collections::VecDeque<Real>,
    /// Faults the adversaries injected, for the swarm's summary.
    pub stats: Stats,
    /// Called when a server is elected or re-elected in group 0, before its first LEAD
    /// of the term leaves (issue 20: an adversary that steers a new leadership's
    /// traffic); kept while it returns true.
    pub on_elected: Option<Box<ElectedHook>>,
}

/// An adversary's hook on elections: (the simulator, the server, the term).
pub type ElectedHook = dyn FnMut(&mut Sim, u16, u64) -> bool;

/// " gN" for a group other than 0 in a trace line (one-group traces read as before).
fn tag(group: usize) -> String {
    if group == 0 {
        String::new()
    } else {
        format!(" g{group}")
    }
}

impl Sim {
    /// Builds the cluster; each node starts within `start_spread`.
    pub fn new(opts: Options) -> Sim {
        let mut rng = SplitMix64::new(opts.seed);
        let groups = opts.groups.max(1);
        let mut hosts = Vec::new();
        let mut cfgs = Vec::new();
        for id in 1..=opts.n as u16 {
            let e = i64::from(opts.clock_error_ppm);
            let mut error_ppm = rng.below(2 * e as u64 + 1) as i64 - e;
            if let Some(&fixed) = opts.clock_errors.get(usize::from(id) - 1) {
                error_ppm = fixed;
            }
            let clock = Clock::new(rng.below(1 << 40), error_ppm);
            let timers = opts.timers_of(id);
            let mine = opts.node_configs(id, rng.next_u64());
            cfgs.push(mine);
            hosts.push(Host::new(id, clock, timers, groups));
        }
        let n = opts.n;
        let mut sim = Sim {
            check: Checker::new(n),
            group_checks: (1..groups).map(|g| Checker::for_group(n, g)).collect(),
            watch: None,
            now: 0,
            rng,
            queue: BinaryHeap::new(),
            seq: 0,
            hosts,
            net: Network::new(n),
            events: 0,
            sent: 0,
            election_sent: 0,
            delivered: 0,
            dropped: 0,
            trace: Vec::new(),
            health_epoch: 0,
            cfgs,
            marks: std::collections::VecDeque::new(),
            stats: Stats::default(),
            on_elected: None,
            opts,
        };
        for h in 0..n {
            let at = sim.rng.below(sim.opts.start_spread + 1);
            sim.push(at, Ev::Restart { host: h });
        }
        sim
    }

    fn push(&mut self, at: Real, ev: Ev) {
        self.seq += 1;
        self.queue.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Draws from the run's generator (for fault schedules).
    pub fn rand(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    fn idx(&self, id: u16) -> usize {
        usize::from(id) - 1
    }

    /// Processes every event up to real time `t`, then sets the clock to `t`.
    pub fn run_until(&mut self, t: Real) {
        while self.queue.peek().is_some_and(|e| e.at <= t) {
            if !self.check.violations.is_empty() {
                // Freeze the run at the first violation: the trace ends where it broke.
                return;
            }
            if self.events >= self.opts.max_events {
                let at = self.queue.peek().map_or(0, |e| e.at);
                self.check.violations.push(format!(
                    "livelock: {} events by t={at}, {} queued",
                    self.events,
                    self.queue.len()
                ));
                return;
            }
            let e = self.queue.pop().expect("peeked");
            self.now = e.at;
            self.events += 1;
            self.dispatch(e.ev);
            if self.opts.check_support {
                self.check_support();
            }
        }
        self.now = self.now.max(t);
    }

    /// Processes the next event; false when none is left.
    pub fn step(&mut self) -> bool {
        let Some(e) = self.queue.pop() else {
            return false;
        };
        self.now = e.at;
        self.events += 1;
        self.dispatch(e.ev);
        if self.opts.check_support {
            self.check_support();
        }
        true
    }

    /// Runs for `d` more simulated time.
    pub fn run_for(&mut self, d: Real) {
        let t = self.now + d;
        self.run_until(t);
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, from, bytes } => self.on_deliver(to, from, bytes),
            Ev::Timer {
                host,
                inc,
                deadline,
            } => self.on_timer(host, inc, deadline),
            Ev::PersistDone { host, inc, state } => self.on_persist_done(host, inc, state),
            Ev::Resume { host, inc } | Ev::Wake { host, inc } => self.wake(host, inc),
            Ev::Restart { host } => self.start(host),
            Ev::Health {
                host,
                healthy,
                epoch,
            } => {
                if epoch == self.health_epoch {
                    self.apply_health(host, healthy);
                }
            }
            Ev::Rise { host, life } => self.on_rise(host, life),
            Ev::Crash {
                host,
                inc,
                restart_after,
            } => self.on_crash(host, inc, restart_after),
            Ev::Released {
                host,
                group,
                inc,
                stop,
            } => self.released(host, group, inc, stop),
            Ev::SupWake { host, group, until } => self.sup_wake(host, group, until),
            Ev::Reload { host, timers } => self.reload(host, timers),
        }
    }

    /// The host rules the options break on purpose on `host` (negative controls).
    fn host_sabotage(&self, host: usize) -> HostSabotage {
        HostSabotage {
            misroute_groups: self.opts.misroute_group && host == 0,
            no_align: !self.opts.align_heartbeats,
            confirm_early: self.opts.confirm_early,
            release_on_older_confirmation: self.opts.release_on_older_confirmation,
            ignore_health: self.opts.ignore_health,
            naive_health_yield: self.opts.naive_health_yield,
            stop_without_yield: self.opts.stop_without_yield,
            departure_confirms: self.opts.departure_confirms,
            timers_late: self.opts.timers_late,
            defer_always: self.opts.defer_always,
            named_only: false,
        }
    }

    /// Flushes the host after an input and carries out what it asks, as the daemon's
    /// driver does (`daemon/flush.rs`): its events to the checkers and supervisors, its
    /// write to the disk, its datagrams to the network. The rules (write before what
    /// waits for it, alignment, bundling per destination) are the host's.
    fn drive(&mut self, host: usize) {
        // Every input wakes the process: what waited in its socket is read in this
        // wakeup (before the timers when the timer woke it: `on_timer`). So when the
        // host stops saying datagrams may wait, which only an input can make it do,
        // none is left waiting.
        self.read_deferred(host);
        let sabotage = self.host_sabotage(host);
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        let Some(sh) = h.shell.as_mut() else { return };
        sh.set_sabotage(sabotage);
        sh.flush(local).expect("host");
        while let Some(n) = self.hosts[host].shell.as_mut().and_then(|s| s.poll_event()) {
            match n {
                Notice::Event { group, event, .. } => self.on_event(host, group, event),
                Notice::Supervisor { client, line } => self.sup_line(host, client, line),
                Notice::Released { .. } => {}
                Notice::ArmTimers { client, at, .. } => self.sup_arm(host, client, at),
            }
        }
        if let Some(w) = self.hosts[host].shell.as_mut().and_then(|s| s.poll_write()) {
            self.write(host, w);
        }
        while let Some(t) = self.hosts[host]
            .shell
            .as_mut()
            .and_then(|s| s.poll_transmit())
        {
            self.route(host, t);
        }
        self.after_drive(host);
    }

    /// An event of group `g` on `host`: to its checker and its supervisor.
    fn on_event(&mut self, host: usize, g: usize, e: electd::node::Event) {
        if let electd::node::Event::Resigning { reason, .. } = e {
            self.stats.handovers[reason as usize] += 1;
        }
        if self.opts.trace {
            let tag = tag(g);
            self.trace
                .push(format!("{} {}{tag} {:?}", self.now, host + 1, e));
        }
        let (now, id) = (self.now, self.hosts[host].id);
        self.checker(g).on_event(now, id, e);
        if let electd::node::Event::Elected { term } = e {
            self.disk_on_elected(host, g, term);
            self.mark();
            if g == 0 {
                if let Some(mut f) = self.on_elected.take() {
                    if f(self, id, term) && self.on_elected.is_none() {
                        self.on_elected = Some(f);
                    }
                }
            }
        }
    }

    /// After a drain: the checkers learn the statuses, the process's one timer is
    /// placed at the host's next deadline, and a stopping process whose stop is done
    /// exits.
    fn after_drive(&mut self, host: usize) {
        let now = self.now;
        let h = &self.hosts[host];
        let Some(sh) = h.shell.as_ref() else {
            return;
        };
        let deadline = sh.next_deadline(h.clock.local(now));
        let deadline = h.clock.real(deadline).max(now);
        let id = h.id;
        for g in 0..h.nodes().count() {
            let h = &mut self.hosts[host];
            let node = h.node_of(g).expect("running");
            let status = node.status(h.clock.local(now));
            let lease_end = status.lease_until.map(|u| h.clock.real(u));
            let leads = node.leads().unwrap_or(0);
            if let Some(u) = status.lease_until {
                self.disk_on_lease(host, g, leads, u);
            }
            self.checker(g)
                .on_status(now, id, &status, lease_end, leads);
            self.check_watch(g, id, &status);
        }
        self.place_timer(host, deadline);
        self.gather();
        self.check_stop(host);
    }

    /// Remembers now as a moment worth aiming a flush at (an election, a planned stop).
    fn mark(&mut self) {
        if self.marks.len() == 64 {
            self.marks.pop_front();
        }
        self.marks.push_back(self.now);
    }

    /// Runs until some server holds a lease, at most `limit`; returns it and the time.
    pub fn run_until_leader(&mut self, limit: Real) -> Option<(u16, Real)> {
        let end = self.now + limit;
        while self.now < end && self.check.violations.is_empty() {
            if let Some(l) = self.leader() {
                return Some((l, self.now));
            }
            let next = self.queue.peek().map_or(end, |e| e.at.min(end));
            self.run_until(next);
        }
        self.leader().map(|l| (l, self.now))
    }

    /// Runs until a server other than `old` holds a lease; returns it and the time.
    pub fn run_until_new_leader(&mut self, old: u16, limit: Real) -> Option<(u16, Real)> {
        let end = self.now + limit;
        // A violation freezes the run (run_until returns at once): stop waiting too.
        while self.now < end && self.check.violations.is_empty() {
            if let Some(l) = self.leader().filter(|&l| l != old) {
                return Some((l, self.now));
            }
            let next = self.queue.peek().map_or(end, |e| e.at.min(end));
            self.run_until(next);
        }
        None
    }

    /// Panics with the seed and the replay command if any safety check failed.
    pub fn assert_safe(&self, replay: &str) {
        if !self.check.violations.is_empty() {
            self.dump_trace();
            panic!(
                "seed {}: safety violated: {:?}\nreplay: {replay}",
                self.opts.seed, self.check.violations
            );
        }
    }

    /// Prints the last events of the trace (when `trace` is on).
    pub fn dump_trace(&self) {
        let from = self.trace.len().saturating_sub(
            std::env::var("SIM_TRACE_LINES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(400),
        );
        for line in &self.trace[from..] {
            eprintln!("{line}");
        }
    }
}

impl Drop for Sim {
    /// An invariant of the core panicked inside the run: print where it went wrong.
    fn drop(&mut self) {
        if std::thread::panicking() && self.opts.trace {
            eprintln!("seed {}: trace up to the panic:", self.opts.seed);
            self.dump_trace();
        }
    }
}
