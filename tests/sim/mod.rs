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
#![allow(dead_code)]

pub mod check;

use check::Checker;
use electd::node::{Dest, Durable, Node, NodeConfig, Output, Sabotage, ServerInfo, Status};
use electd::rng::SplitMix64;
use electd::time::Time;
use electd::wire;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::Duration;

/// Nanoseconds of simulated real time.
pub type Real = u64;

/// Milliseconds as simulated nanoseconds.
pub const fn ms(v: u64) -> Real {
    v * 1_000_000
}

/// All knobs of a run; the seed comes first and fixes everything else it does not set.
#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub n: usize,
    pub heartbeat: Duration,
    pub rtt: Duration,
    pub k: u32,
    /// Configured drift bound (rho), in millionths.
    pub drift_ppm: u32,
    /// Actual clock rate error of each node is drawn from [-clock_error, +clock_error].
    pub clock_error_ppm: u32,
    /// One-way delay bounds.
    pub delay_min: Real,
    pub delay_max: Real,
    /// Loss and duplication, per mille.
    pub loss_pm: u32,
    pub dup_pm: u32,
    /// How long a state-file write takes, at most.
    pub persist_max: Real,
    /// Start times are spread over [0, start_spread].
    pub start_spread: Real,
    /// Timers fire up to this late.
    pub timer_slop: Real,
    pub witnesses: Vec<u16>,
    pub priorities: Vec<(u16, u8)>,
    pub sabotage: Sabotage,
    /// Record a line per event (printed by `dump_trace`).
    pub trace: bool,
    /// Per server timers (index = id - 1); missing entries use the common ones.
    pub timers: Vec<Timers>,
    /// Per server clock rate error in ppm (index = id - 1), instead of a random one.
    pub clock_errors: Vec<i64>,
    /// Per mille of datagrams that also arrive once more, late: uniformly up to
    /// `late_max` after they were sent (genuine old datagrams, not forgeries).
    pub late_pm: u32,
    pub late_max: Real,
    /// Per mille of datagrams whose delivery is aimed at the receiver's faith end or a
    /// leader's lease end, from 1 ns to 1 ms either side.
    pub aim_pm: u32,
    /// A planned stop's confirmation comes this long after the supervisor is told, at
    /// most (drawn uniformly; 0: at once).
    pub confirm_max: Real,
    /// ... and at least this long (at most `confirm_max`).
    pub confirm_min: Real,
    /// Per mille of planned stops whose supervisor never confirms (hung): the RESIGN
    /// waits for the lease end, and the command is stopped by the supervisor's own
    /// lease-end enforcement at the latest.
    pub confirm_hung_pm: u32,
    /// A suspended host's clock stops (CLOCK_MONOTONIC) instead of running on
    /// (CLOCK_BOOTTIME, what the daemon uses): a negative control for SPEC 8.
    pub monotonic_suspend: bool,
    /// Every server has a health check: its daemon starts unhealthy at every start and
    /// learns its host's health up to `rise_max` later (SPEC section 13).
    pub checks: bool,
    pub rise_max: Real,
    /// `preempt-delay` (SPEC section 14), the same on every server.
    pub preempt_delay: Option<Duration>,
    /// Per link one-way delay bounds, `[from - 1][to - 1]`, instead of
    /// `delay_min..=delay_max` (regions); empty: the common bounds.
    pub link_delays: Vec<Vec<(Real, Real)>>,
    /// Negative control: the driver never tells the core about health (every daemon
    /// believes its processor healthy).
    pub ignore_health: bool,
    /// Negative control: a naive driver that yields as soon as its leader turns
    /// unhealthy, whether or not anyone could take over.
    pub naive_health_yield: bool,
    /// Negative control: `yield_to` sends a plain yield (the target is dropped).
    pub drop_yield_target: bool,
    /// A run that handles more events than this stops with a "livelock" violation
    /// instead of running (and growing) for ever.
    pub max_events: u64,
}

/// One server's timers (a reload changes them).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Timers {
    pub heartbeat: Duration,
    pub rtt: Duration,
    pub k: u32,
}

impl Timers {
    /// K*HBT in simulated nanoseconds.
    pub fn hold(&self) -> Real {
        self.heartbeat.as_nanos() as u64 * u64::from(self.k)
    }
}

impl Options {
    /// Defaults: HBT 100 ms, RTT 20 ms, K 3, rho 0.01, delays 1..5 ms, no faults.
    pub fn new(seed: u64, n: usize) -> Options {
        Options {
            seed,
            n,
            heartbeat: Duration::from_millis(100),
            rtt: Duration::from_millis(20),
            k: 3,
            drift_ppm: 10_000,
            clock_error_ppm: 10_000,
            delay_min: ms(1),
            delay_max: ms(5),
            loss_pm: 0,
            dup_pm: 0,
            persist_max: ms(2),
            start_spread: ms(50),
            timer_slop: ms(1),
            witnesses: vec![],
            priorities: vec![],
            sabotage: Sabotage::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
            timers: vec![],
            clock_errors: vec![],
            late_pm: 0,
            late_max: 0,
            aim_pm: 0,
            confirm_max: 0,
            confirm_min: 0,
            confirm_hung_pm: 0,
            monotonic_suspend: false,
            checks: false,
            rise_max: 0,
            preempt_delay: None,
            link_delays: vec![],
            ignore_health: false,
            naive_health_yield: false,
            drop_yield_target: false,
            max_events: std::env::var("SIM_MAX_EVENTS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20_000_000),
        }
    }

    /// The common timers.
    pub fn common_timers(&self) -> Timers {
        Timers {
            heartbeat: self.heartbeat,
            rtt: self.rtt,
            k: self.k,
        }
    }

    /// The timers server `id` starts with.
    pub fn timers_of(&self, id: u16) -> Timers {
        self.timers
            .get(usize::from(id) - 1)
            .copied()
            .unwrap_or(self.common_timers())
    }

    /// K*HBT in simulated nanoseconds.
    pub fn hold(&self) -> Real {
        self.heartbeat.as_nanos() as u64 * u64::from(self.k)
    }

    /// SPEC section 8, L1: a leader with a valid lease within 5*HBT + 8*RTT.
    pub fn l1_bound(&self) -> Real {
        5 * self.heartbeat.as_nanos() as u64 + 8 * self.rtt.as_nanos() as u64
    }
}

/// A host's clock: it runs at `1 + error_ppm/1e6` of real time, piecewise (a rate may
/// change mid-run, as NTP slews it), and stops while `stopped_at` is set (a suspend
/// with `monotonic_suspend`). It never runs backwards.
#[derive(Copy, Clone, Debug)]
pub struct Clock {
    base_local: u64,
    base_real: Real,
    error_ppm: i64,
    stopped_at: Option<Real>,
}

impl Clock {
    pub fn new(offset: u64, error_ppm: i64) -> Clock {
        Clock {
            base_local: offset,
            base_real: 0,
            error_ppm,
            stopped_at: None,
        }
    }

    pub fn local(&self, real: Real) -> Time {
        let r = self.stopped_at.map_or(real, |s| s.min(real));
        let dr = i128::from(r) - i128::from(self.base_real);
        let d = (dr * (1_000_000 + i128::from(self.error_ppm))).div_euclid(1_000_000);
        Time((i128::from(self.base_local) + d).max(0) as u64)
    }

    /// The first real time at which the local clock reads at least `t` (as if it ran).
    pub fn real(&self, t: Time) -> Real {
        let running = Clock {
            stopped_at: None,
            ..*self
        };
        let dl = i128::from(t.0) - i128::from(self.base_local);
        let dr = dl * 1_000_000 / (1_000_000 + i128::from(self.error_ppm));
        let mut r = (i128::from(self.base_real) + dr).max(0) as u64;
        while running.local(r) < t {
            r += 1;
        }
        while r > 0 && running.local(r - 1) >= t {
            r -= 1;
        }
        r
    }

    /// True while the clock is stopped.
    pub fn stopped(&self) -> bool {
        self.stopped_at.is_some()
    }

    /// The rate error now in force.
    pub fn error_ppm(&self) -> i64 {
        self.error_ppm
    }

    /// From real time `now` on, the clock runs at `error_ppm`.
    pub fn set_rate(&mut self, now: Real, error_ppm: i64) {
        self.base_local = self.local(now).0;
        self.base_real = now;
        self.error_ppm = error_ppm;
    }

    /// The clock stops at `now` (until `start`).
    pub fn stop(&mut self, now: Real) {
        if self.stopped_at.is_none() {
            self.stopped_at = Some(now);
        }
    }

    /// A stopped clock runs again from `now`, from the reading where it stopped.
    pub fn start(&mut self, now: Real) {
        if self.stopped_at.is_some() {
            self.base_local = self.local(now).0;
            self.base_real = now;
            self.stopped_at = None;
        }
    }
}

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
        state: Durable,
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
    /// The supervisor confirms that its command exited (planned stop `gen`).
    Released {
        host: usize,
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

/// One simulated server process and its disk.
pub struct Host {
    pub id: u16,
    pub node: Option<Node>,
    pub clock: Clock,
    pub disk: Durable,
    /// A write in flight: the state and whether it will land if the process dies now.
    writing: Option<Durable>,
    /// When the last queued write completes (writes are sequential).
    write_done_at: Real,
    paused: bool,
    backlog: Vec<Ev>,
    timer_at: Option<Real>,
    /// Incremented at every crash and pause, so stale timers are recognised.
    inc: u64,
    /// Incremented at every crash: writes, confirmations and scheduled crashes belong
    /// to one process (a pause does not cancel a disk write).
    life: u64,
    pub restarts: u32,
    /// The whole host is suspended (the supervisor and the command too) since then.
    suspended_at: Option<Real>,
    /// Crash the process at a random moment of its next state write.
    crash_in_write: bool,
    /// The supervisor: the last lease end the host reported (its local clock), the
    /// planned stop under way, and a counter of the lines it was told that matter (each
    /// planned stop and each lease report), as the daemon numbers them.
    sup_end: Option<Time>,
    sup_stopping: bool,
    sup_gen: u64,
    /// The planned stop whose command the supervisor last confirmed exited.
    sup_confirmed: u64,
    pub timers: Timers,
    /// The processor's health (what its check would find), whatever the daemon knows.
    pub healthy: bool,
    /// With `checks`: the daemon of this life has had its first check results, so it
    /// reports `healthy`; before that it is unhealthy.
    risen: bool,
    /// Real time of the last change of this server's fitness (health or drain).
    pub fit_changed_at: Real,
    /// When this life's startup quiet period ends and its check rises (real time).
    quiet_end: Real,
    rise_at: Real,
}

/// The simulated cluster.
pub struct Sim {
    pub opts: Options,
    pub now: Real,
    rng: SplitMix64,
    queue: BinaryHeap<Entry>,
    seq: u64,
    pub hosts: Vec<Host>,
    /// cut[from][to]: datagrams from `from` to `to` are dropped.
    cut: Vec<Vec<bool>>,
    pub check: Checker,
    pub events: u64,
    pub sent: u64,
    /// ELECT and VOTE datagrams sent (per recipient), for the scale figures.
    pub election_sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    trace: Vec<String>,
    /// Scheduled health changes of an older epoch are dropped (`cancel_health_changes`).
    health_epoch: u64,
    cfgs: Vec<NodeConfig>,
    /// Every datagram sent recently: (real time, from, to, bytes), for late redelivery.
    history: std::collections::VecDeque<(Real, usize, usize, Rc<Vec<u8>>)>,
    /// Real times of recent elections and planned stops (where a flush is aimed).
    pub marks: std::collections::VecDeque<Real>,
    /// Faults the adversaries injected, for the swarm's summary.
    pub stats: Stats,
    /// Datagrams matching this (from id, to id, message) are held back by the network
    /// (`hold_back`) until `release_held`.
    filter: Option<Box<Filter>>,
    held_back: Vec<(usize, usize, Rc<Vec<u8>>)>,
}

/// A predicate on (from id, to id, message), for scenarios that steer the network.
/// A message as the daemon sends it: a bundle of one entry (issue 12).
pub fn encode(msg: &wire::Message) -> Vec<u8> {
    let mut b = Vec::new();
    let entry = [wire::Entry {
        group: 0,
        msg: *msg,
    }];
    wire::encode_bundle(msg.sender, msg.fingerprint, &entry, None, &mut b);
    b
}

/// The message of a one-entry bundle (or of a version-1 datagram).
pub fn decode(bytes: &[u8]) -> Result<wire::Message, wire::DecodeError> {
    let b = wire::decode_any(bytes, None, 1)?;
    Ok(b.entries[0].msg)
}

pub type Filter = dyn Fn(u16, u16, &wire::Message) -> bool;

/// What the adversaries did in a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub late: u64,
    pub flushed: u64,
    pub aimed: u64,
    pub crashes_in_write: u64,
    pub reloads: u64,
    pub suspends: u64,
    pub planned_stops: u64,
    pub hung: u64,
    /// Health changes of a processor (issue 11).
    pub health_flips: u64,
    /// Health changes aimed at a lease end, a faith end or a timer deadline.
    pub health_aimed: u64,
    /// Moments at which every processor was unhealthy.
    pub all_unhealthy: u64,
    /// A healthy server cut off from all others.
    pub healthy_cut_off: u64,
    /// `drain` and `undrain` commands that reached a daemon.
    pub drains: u64,
    pub undrains: u64,
    /// `yield ID` commands that reached a leader.
    pub yields_to: u64,
    /// Handovers begun, by reason (`Handover as usize`: yield, health, drain, preempt).
    pub handovers: [u64; 4],
}

impl Stats {
    /// Adds another run's figures.
    pub fn add(&mut self, x: &Stats) {
        self.late += x.late;
        self.flushed += x.flushed;
        self.aimed += x.aimed;
        self.crashes_in_write += x.crashes_in_write;
        self.reloads += x.reloads;
        self.suspends += x.suspends;
        self.planned_stops += x.planned_stops;
        self.hung += x.hung;
        self.health_flips += x.health_flips;
        self.health_aimed += x.health_aimed;
        self.all_unhealthy += x.all_unhealthy;
        self.healthy_cut_off += x.healthy_cut_off;
        self.drains += x.drains;
        self.undrains += x.undrains;
        self.yields_to += x.yields_to;
        for (a, b) in self.handovers.iter_mut().zip(x.handovers) {
            *a += b;
        }
    }
}

/// How many sent datagrams the simulator remembers for redelivery.
const HISTORY: usize = 4096;

impl Sim {
    /// Builds the cluster; each node starts within `start_spread`.
    pub fn new(opts: Options) -> Sim {
        let mut rng = SplitMix64::new(opts.seed);
        let servers: Vec<ServerInfo> = (1..=opts.n as u16)
            .map(|id| ServerInfo {
                id,
                priority: opts
                    .priorities
                    .iter()
                    .find(|p| p.0 == id)
                    .map_or(0, |p| p.1),
                witness: opts.witnesses.contains(&id),
            })
            .collect();
        let mut hosts = Vec::new();
        let mut cfgs = Vec::new();
        for s in &servers {
            let e = i64::from(opts.clock_error_ppm);
            let mut error_ppm = rng.below(2 * e as u64 + 1) as i64 - e;
            if let Some(&fixed) = opts.clock_errors.get(usize::from(s.id) - 1) {
                error_ppm = fixed;
            }
            let clock = Clock::new(rng.below(1 << 40), error_ppm);
            let timers = opts.timers_of(s.id);
            cfgs.push(NodeConfig {
                id: s.id,
                servers: servers.clone(),
                fingerprint: 0xE1EC_7D00 ^ opts.n as u32,
                heartbeat: timers.heartbeat,
                rtt: timers.rtt,
                missed_heartbeats: timers.k,
                drift_ppm: opts.drift_ppm,
                max_hold: Duration::from_secs(60),
                preempt_delay: opts.preempt_delay,
                seed: rng.next_u64(),
                strict: true,
                sabotage: opts.sabotage.clone(),
            });
            hosts.push(Host {
                id: s.id,
                node: None,
                clock,
                disk: Durable::default(),
                writing: None,
                write_done_at: 0,
                paused: false,
                backlog: Vec::new(),
                timer_at: None,
                inc: 0,
                life: 0,
                restarts: 0,
                suspended_at: None,
                crash_in_write: false,
                sup_end: None,
                sup_stopping: false,
                sup_gen: 0,
                sup_confirmed: 0,
                timers,
                healthy: true,
                risen: false,
                fit_changed_at: 0,
                quiet_end: 0,
                rise_at: 0,
            });
        }
        let n = opts.n;
        let mut sim = Sim {
            check: Checker::new(n),
            now: 0,
            rng,
            queue: BinaryHeap::new(),
            seq: 0,
            hosts,
            cut: vec![vec![false; n]; n],
            events: 0,
            sent: 0,
            election_sent: 0,
            delivered: 0,
            dropped: 0,
            trace: Vec::new(),
            health_epoch: 0,
            cfgs,
            history: std::collections::VecDeque::with_capacity(HISTORY),
            marks: std::collections::VecDeque::new(),
            stats: Stats::default(),
            filter: None,
            held_back: Vec::new(),
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
        true
    }

    /// Runs for `d` more simulated time.
    pub fn run_for(&mut self, d: Real) {
        let t = self.now + d;
        self.run_until(t);
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, from, bytes } => {
                let h = &mut self.hosts[to];
                if h.node.is_none() {
                    return;
                }
                if h.paused {
                    // A paused process's socket buffer is bounded like a real one.
                    if h.backlog.len() < 256 {
                        h.backlog.push(Ev::Deliver { to, from, bytes });
                    }
                    return;
                }
                self.deliver(to, from, &bytes);
            }
            Ev::Timer {
                host,
                inc,
                deadline,
            } => {
                let h = &mut self.hosts[host];
                if h.inc != inc || h.paused || h.node.is_none() || h.timer_at != Some(deadline) {
                    return;
                }
                h.timer_at = None;
                let local = h.clock.local(self.now);
                if let Some(node) = h.node.as_mut() {
                    node.handle_timeout(local);
                }
                self.drive(host);
            }
            Ev::PersistDone { host, inc, state } => {
                let h = &mut self.hosts[host];
                if h.life != inc || h.node.is_none() {
                    return;
                }
                h.disk = state;
                if h.writing == Some(state) {
                    h.writing = None;
                }
                if h.paused {
                    h.backlog.push(Ev::PersistDone { host, inc, state });
                    return;
                }
                let local = h.clock.local(self.now);
                if let Some(node) = h.node.as_mut() {
                    node.handle_persisted(local, state);
                }
                self.drive(host);
            }
            Ev::Resume { host, inc } | Ev::Wake { host, inc } => self.wake(host, inc),
            Ev::Restart { host } => {
                let h = &mut self.hosts[host];
                if h.node.is_some() {
                    return;
                }
                let local = h.clock.local(self.now);
                let mut node =
                    Node::new(self.cfgs[host].clone(), h.disk, local).expect("valid config");
                // A daemon with a check starts unhealthy (SPEC section 13) and learns its
                // processor's health once the check has risen; without one it knows at
                // once. The core starts healthy: tell it before anything leaves.
                h.risen = !self.opts.checks;
                let start = h.healthy && h.risen;
                if !self.opts.ignore_health && !start {
                    node.set_health(local, false);
                }
                // The quiet period: max(K*HBT, the hold promise on disk), on its clock.
                let quiet = h.timers.hold().max(ms(u64::from(h.disk.hold_ms)));
                h.quiet_end = h.clock.real(Time(local.0 + quiet)) + 1;
                h.rise_at = self.now;
                h.crash_in_write = false;
                h.node = Some(node);
                h.timer_at = None;
                h.paused = false;
                let life = h.life;
                if self.opts.trace {
                    self.trace.push(format!(
                        "{} start {} disk={:?} healthy={start}",
                        self.now, h.id, h.disk
                    ));
                }
                if self.opts.checks {
                    let at = self.now + self.rng.below(self.opts.rise_max + 1);
                    self.hosts[host].rise_at = at;
                    self.push(at, Ev::Rise { host, life });
                }
                self.drive(host);
            }
            Ev::Health {
                host,
                healthy,
                epoch,
            } => {
                if epoch == self.health_epoch {
                    self.apply_health(host, healthy);
                }
            }
            Ev::Rise { host, life } => {
                let h = &mut self.hosts[host];
                if h.life != life || h.node.is_none() {
                    return;
                }
                h.risen = true;
                self.report_health(host);
            }
            Ev::Crash {
                host,
                inc,
                restart_after,
            } => {
                if self.hosts[host].life != inc || self.hosts[host].node.is_none() {
                    return;
                }
                let id = self.hosts[host].id;
                self.crash(id);
                if let Some(d) = restart_after {
                    self.hosts[host].restarts += 1;
                    self.push(self.now + d, Ev::Restart { host });
                }
            }
            Ev::Released { host, inc, stop } => {
                let h = &mut self.hosts[host];
                if h.suspended_at.is_some() {
                    // The supervisor is frozen with its host: it confirms on waking.
                    h.backlog.push(Ev::Released { host, inc, stop });
                    return;
                }
                if h.sup_gen == stop && h.sup_stopping {
                    h.sup_stopping = false;
                    h.sup_confirmed = stop;
                    let id = h.id;
                    self.check.cmd_stop(self.now, id);
                    if self.opts.trace {
                        self.trace
                            .push(format!("{} {id} supervisor: command exited", self.now));
                    }
                }
                let h = &mut self.hosts[host];
                if h.life != inc || h.node.is_none() {
                    return;
                }
                // Only the confirmation of the stop under way releases the RESIGN. One of
                // a stop that a new lease cancelled (the host was re-elected before it
                // came) says nothing about a later handoff, whose command may still run:
                // letting it through released a health handover's RESIGN while the
                // command ran on (S5; found by health_flapping_never_breaks_safety).
                if h.sup_confirmed != stop || h.sup_gen != stop {
                    return;
                }
                if h.paused {
                    h.backlog.push(Ev::Released { host, inc, stop });
                    return;
                }
                if h.sup_gen != stop {
                    // The daemon counts `released N` only for a line sent after the last
                    // leader line (control.rs, `Supervisor::clear`): the late confirmation
                    // of a stop that the lease end and a new lease overtook releases no
                    // later handoff (swarm seed 52839).
                    if self.opts.trace {
                        self.trace.push(format!(
                            "{} {} supervisor: late confirmation of stop {stop} ignored",
                            self.now, h.id
                        ));
                    }
                    return;
                }
                let local = h.clock.local(self.now);
                if let Some(node) = h.node.as_mut() {
                    node.handle_released(local);
                }
                self.drive(host);
            }
            Ev::Reload { host, timers } => {
                let h = &mut self.hosts[host];
                if h.paused {
                    h.backlog.push(Ev::Reload { host, timers });
                    return;
                }
                self.stats.reloads += 1;
                h.timers = timers;
                let cfg = &mut self.cfgs[host];
                cfg.heartbeat = timers.heartbeat;
                cfg.rtt = timers.rtt;
                cfg.missed_heartbeats = timers.k;
                let (drift, max_hold) = (cfg.drift_ppm, cfg.max_hold);
                if self.opts.trace {
                    self.trace
                        .push(format!("{} reload {} {timers:?}", self.now, h.id));
                }
                if let Some(node) = h.node.as_mut() {
                    node.set_timers(timers.heartbeat, timers.rtt, timers.k, drift, max_hold)
                        .expect("valid timers");
                    self.drive(host);
                }
            }
        }
    }

    /// Ends a pause or a suspend: the clock runs again, the backlog is handled.
    fn wake(&mut self, host: usize, inc: u64) {
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
        if let (Some(since), Some(u), true) = (suspended_at, h.sup_end, stopped) {
            // The supervisor enforces the lease end on the host's clock: if that clock
            // stopped, its command runs past the end it had in real time.
            let end = h.clock.real(u);
            let id = h.id;
            self.check.cmd_extend(now, id, since, end);
        }
        let h = &mut self.hosts[host];
        let local = h.clock.local(now);
        if let Some(node) = h.node.as_mut() {
            node.handle_timeout(local);
        }
        self.drive(host);
        // The check results that came in meanwhile.
        self.report_health(host);
        for ev in backlog {
            match ev {
                Ev::Deliver { to, from, bytes } => self.deliver(to, from, &bytes),
                Ev::PersistDone { host, state, .. } => {
                    let local = self.hosts[host].clock.local(now);
                    if let Some(node) = self.hosts[host].node.as_mut() {
                        node.handle_persisted(local, state);
                    }
                    self.drive(host);
                }
                ev @ (Ev::Released { .. } | Ev::Reload { .. }) => self.dispatch(ev),
                _ => {}
            }
        }
    }

    fn deliver(&mut self, to: usize, from: usize, bytes: &[u8]) {
        let h = &mut self.hosts[to];
        let local = h.clock.local(self.now);
        let Some(node) = h.node.as_mut() else { return };
        match decode(bytes) {
            Ok(msg) => {
                self.delivered += 1;
                if self.opts.trace {
                    self.trace
                        .push(format!("{} {}<-{} {:?}", self.now, to + 1, from + 1, msg));
                }
                let _ = node.handle_datagram(local, &msg);
            }
            Err(_) => self.dropped += 1,
        }
        self.drive(to);
    }

    /// Drains a node's outputs into the network, the disk and the checker.
    fn drive(&mut self, host: usize) {
        loop {
            let Some(node) = self.hosts[host].node.as_mut() else {
                return;
            };
            let Some(out) = node.poll_output() else { break };
            match out {
                Output::Send { dest, msg } => {
                    if self.opts.trace {
                        self.trace.push(format!(
                            "{} {}-> {:?} {:?}",
                            self.now,
                            host + 1,
                            dest,
                            msg
                        ));
                    }
                    let bytes = Rc::new(encode(&msg));
                    if matches!(msg.body, wire::Body::Elect { .. } | wire::Body::Vote { .. }) {
                        self.election_sent += if dest == Dest::All {
                            self.opts.n as u64 - 1
                        } else {
                            1
                        };
                    }
                    match dest {
                        Dest::All => {
                            for to in 0..self.opts.n {
                                if to != host {
                                    self.transmit(host, to, &bytes);
                                }
                            }
                        }
                        Dest::One(id) => {
                            let to = self.idx(id);
                            self.transmit(host, to, &bytes);
                        }
                    }
                }
                Output::Persist(state) => {
                    // Writes complete in order, as the daemon's synchronous fsyncs do.
                    let d = self.rng.below(self.opts.persist_max + 1);
                    let h = &mut self.hosts[host];
                    h.writing = Some(state);
                    let at = (self.now + d).max(h.write_done_at + 1);
                    if self.opts.trace {
                        self.trace
                            .push(format!("{} {} write {state:?} until {at}", self.now, h.id));
                    }
                    h.write_done_at = at;
                    let inc = h.life;
                    let dies = std::mem::take(&mut h.crash_in_write);
                    self.push(at, Ev::PersistDone { host, inc, state });
                    if dies {
                        // Dies before the write is confirmed: it lands or not (`crash`).
                        let when = self.now + self.rng.below(at - self.now);
                        let restart_after = Some(self.rng.below(self.opts.hold()));
                        self.stats.crashes_in_write += 1;
                        self.push(
                            when,
                            Ev::Crash {
                                host,
                                inc,
                                restart_after,
                            },
                        );
                    }
                }
                Output::Event(e) => {
                    if let electd::node::Event::Resigning { reason, .. } = e {
                        self.stats.handovers[reason as usize] += 1;
                    }
                    if self.opts.trace {
                        self.trace
                            .push(format!("{} {} {:?}", self.now, host + 1, e));
                    }
                    self.check.on_event(self.now, self.hosts[host].id, e);
                    if let electd::node::Event::Resigning { .. } = e {
                        self.plan_stop(host);
                    }
                    if let electd::node::Event::Elected { .. } = e {
                        self.mark();
                    }
                }
            }
        }
        let h = &mut self.hosts[host];
        let Some(node) = h.node.as_ref() else { return };
        let deadline = h.clock.real(node.next_deadline()).max(self.now);
        let status = node.status(h.clock.local(self.now));
        let lease_end = status.lease_until.map(|u| h.clock.real(u));
        let leads = node.leads().unwrap_or(0);
        let (id, inc) = (h.id, h.inc);
        if let (Some(u), Some(end)) = (status.lease_until, lease_end) {
            // The supervisor learns the lease (at once: the soonest it could start) and
            // runs the command until that end at least. A leader line: no confirmation
            // of an earlier stop counts any more.
            h.sup_stopping = false;
            h.sup_gen += 1;
            h.sup_end = Some(u);
            self.check.cmd_lease(self.now, id, end);
        }
        let h = &mut self.hosts[host];
        if h.timer_at != Some(deadline) && !h.paused {
            h.timer_at = Some(deadline);
            // A real scheduler wakes a little late (epoll counts in milliseconds).
            let late = self.rng.below(self.opts.timer_slop + 1);
            self.push(
                deadline + late,
                Ev::Timer {
                    host,
                    inc,
                    deadline,
                },
            );
        }
        self.check
            .on_status(self.now, id, &status, lease_end, leads);
    }

    /// The supervisor is told to stop its command for a planned handoff; it confirms
    /// after a random delay, or never (hung), and the command ends at the confirmation
    /// or at the lease end, whichever comes first.
    fn plan_stop(&mut self, host: usize) {
        self.stats.planned_stops += 1;
        self.mark();
        let hung = self.rng.below(1000) < u64::from(self.opts.confirm_hung_pm);
        let min = self.opts.confirm_min.min(self.opts.confirm_max);
        let d = min + self.rng.below(self.opts.confirm_max - min + 1);
        let h = &mut self.hosts[host];
        h.sup_stopping = true;
        h.sup_gen += 1;
        let (id, inc, stop) = (h.id, h.life, h.sup_gen);
        if !self.check.cmd_running(self.now, id) {
            // No command runs: the supervisor was never told of this lease (elected and
            // handing over within one input, as a preemption right after an election
            // does) or its command already ended. It has nothing to stop, and the daemon
            // counts it as clear at once (control.rs, Supervisor::clear).
            if self.opts.trace {
                self.trace.push(format!(
                    "{} {id} supervisor: told to stop (stop {stop}), no command runs: \
                     confirms at once",
                    self.now
                ));
            }
            self.push(self.now, Ev::Released { host, inc, stop });
            return;
        }
        if self.opts.trace {
            let when = if hung {
                "never".to_string()
            } else {
                format!("at {}", self.now + d)
            };
            self.trace.push(format!(
                "{} {} supervisor: told to stop (stop {stop}), confirms {when}",
                self.now,
                host + 1
            ));
        }
        if hung {
            self.stats.hung += 1;
            return;
        }
        self.push(self.now + d, Ev::Released { host, inc, stop });
    }

    fn mark(&mut self) {
        if self.marks.len() == 64 {
            self.marks.pop_front();
        }
        self.marks.push_back(self.now);
    }

    fn transmit(&mut self, from: usize, to: usize, bytes: &Rc<Vec<u8>>) {
        self.sent += 1;
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history
            .push_back((self.now, from, to, Rc::clone(bytes)));
        if self.opts.late_pm > 0 && self.rng.below(1000) < u64::from(self.opts.late_pm) {
            // A genuine copy that some queue held on to: it arrives long after.
            let at = self.now + 1 + self.rng.below(self.opts.late_max.max(1));
            self.stats.late += 1;
            self.push(
                at,
                Ev::Deliver {
                    to,
                    from,
                    bytes: Rc::clone(bytes),
                },
            );
        }
        if let Some(f) = &self.filter {
            let (fid, tid) = (self.hosts[from].id, self.hosts[to].id);
            if decode(bytes).is_ok_and(|m| f(fid, tid, &m)) {
                self.held_back.push((from, to, Rc::clone(bytes)));
                return;
            }
        }
        if self.cut[from][to] || self.rng.below(1000) < u64::from(self.opts.loss_pm) {
            return;
        }
        if self.opts.aim_pm > 0 && self.rng.below(1000) < u64::from(self.opts.aim_pm) {
            if let Some(at) = self.aim(to) {
                self.stats.aimed += 1;
                self.push(
                    at,
                    Ev::Deliver {
                        to,
                        from,
                        bytes: Rc::clone(bytes),
                    },
                );
                return;
            }
        }
        let copies = if self.rng.below(1000) < u64::from(self.opts.dup_pm) {
            2
        } else {
            1
        };
        let (lo, hi) = self
            .opts
            .link_delays
            .get(from)
            .and_then(|row| row.get(to))
            .copied()
            .unwrap_or((self.opts.delay_min, self.opts.delay_max));
        for _ in 0..copies {
            let spread = hi.saturating_sub(lo);
            let at = self.now + lo + self.rng.below(spread + 1);
            self.push(
                at,
                Ev::Deliver {
                    to,
                    from,
                    bytes: Rc::clone(bytes),
                },
            );
        }
    }

    /// A delivery time aimed at a boundary that matters, in real time: the receiver's
    /// faith end, or a lease end of some leader, from 1 ns to 1 ms either side.
    fn aim(&mut self, to: usize) -> Option<Real> {
        let mut targets = Vec::with_capacity(4);
        let h = &self.hosts[to];
        if let Some(n) = h.node.as_ref().filter(|_| !h.paused) {
            targets.push(h.clock.real(n.faith_until()));
        }
        for h in self.hosts.iter().filter(|h| !h.paused) {
            if let Some(u) = h
                .node
                .as_ref()
                .and_then(|n| n.status(h.clock.local(self.now)).lease_until)
            {
                targets.push(h.clock.real(u));
            }
        }
        targets.retain(|&t| t > self.now && t < self.now + 8 * self.opts.hold().max(ms(1000)));
        if targets.is_empty() {
            return None;
        }
        let t = targets[self.rng.below(targets.len() as u64) as usize];
        // Log-uniform in 1 ns .. 1 ms, either side.
        let off = 1u64 << self.rng.below(20);
        let off = (off + self.rng.below(off)).min(ms(1));
        let at = if self.rng.below(2) == 0 {
            t.saturating_sub(off)
        } else {
            t + off
        };
        Some(at.max(self.now))
    }

    // ----- fault verbs --------------------------------------------------------------

    /// Redelivers every datagram sent between real times `from` and `to` (a queue that
    /// stalled and flushed), each possibly twice, within `spread` from now.
    pub fn flush(&mut self, from: Real, to: Real, spread: Real) {
        let old: Vec<_> = self
            .history
            .iter()
            .filter(|e| e.0 >= from && e.0 <= to)
            .cloned()
            .collect();
        if self.opts.trace {
            self.trace.push(format!(
                "{} flush {} datagrams sent in {from}..{to}",
                self.now,
                old.len()
            ));
        }
        for (_, f, t, bytes) in old {
            let copies = 1 + u64::from(self.rng.below(4) == 0);
            for _ in 0..copies {
                let at = self.now + self.rng.below(spread + 1);
                self.stats.flushed += 1;
                self.push(
                    at,
                    Ev::Deliver {
                        to: t,
                        from: f,
                        bytes: Rc::clone(&bytes),
                    },
                );
            }
        }
    }

    /// The network holds back every datagram matching `f` from now on (a queue that
    /// stalls for some traffic), until `release_held`.
    pub fn hold_back(&mut self, f: Box<Filter>) {
        self.filter = Some(f);
    }

    /// How many datagrams the network holds back now.
    pub fn held(&self) -> usize {
        self.held_back.len()
    }

    /// Delivers the held-back datagrams now, in the order sent, and holds back no more.
    pub fn release_held(&mut self) {
        self.filter = None;
        for (from, to, bytes) in std::mem::take(&mut self.held_back) {
            self.push(self.now, Ev::Deliver { to, from, bytes });
        }
        self.run_until(self.now);
    }

    /// Loses the held-back datagrams and holds back no more.
    pub fn drop_held(&mut self) {
        self.filter = None;
        self.held_back.clear();
    }

    /// Delivers the held-back datagrams now, the last sent first (a reordering), and
    /// holds back no more.
    pub fn release_held_reversed(&mut self) {
        self.filter = None;
        for (from, to, bytes) in std::mem::take(&mut self.held_back).into_iter().rev() {
            self.push(self.now, Ev::Deliver { to, from, bytes });
        }
        self.run_until(self.now);
    }

    /// Delivers again, now, every datagram sent so far that matches `f` (genuine late
    /// duplicates, from the network's history).
    pub fn redeliver(&mut self, f: &Filter) -> usize {
        let old: Vec<_> = self
            .history
            .iter()
            .filter(|e| {
                let (fid, tid) = (self.hosts[e.1].id, self.hosts[e.2].id);
                decode(&e.3).is_ok_and(|m| f(fid, tid, &m))
            })
            .cloned()
            .collect();
        let n = old.len();
        for (_, from, to, bytes) in old {
            self.push(self.now, Ev::Deliver { to, from, bytes });
        }
        self.run_until(self.now);
        n
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

    /// The process dies at a random moment of its next state write (which lands or not),
    /// and restarts within a hold.
    pub fn crash_in_write(&mut self, id: u16) {
        let i = self.idx(id);
        self.hosts[i].crash_in_write = true;
    }

    /// Cancels armed crashes (the faults stop).
    pub fn disarm(&mut self) {
        self.hosts.iter_mut().for_each(|h| h.crash_in_write = false);
    }

    /// SIGHUP of `id` with `timers` at real time `at`.
    pub fn reload_at(&mut self, id: u16, at: Real, timers: Timers) {
        let host = self.idx(id);
        self.push(at.max(self.now), Ev::Reload { host, timers });
    }

    /// From now on `id`'s clock runs at `error_ppm`.
    pub fn set_clock_rate(&mut self, id: u16, error_ppm: i64) {
        let (i, now) = (self.idx(id), self.now);
        let h = &mut self.hosts[i];
        h.clock.set_rate(now, error_ppm);
        if let Some(u) = h.sup_end {
            let (id, end) = (h.id, h.clock.real(u));
            self.check.remap(now, id, end);
        }
        let h = &mut self.hosts[i];
        if self.opts.trace {
            self.trace
                .push(format!("{now} clock {id} rate {error_ppm} ppm"));
        }
        // Timers were placed with the old rate: place them again.
        if !h.paused && h.node.is_some() {
            h.timer_at = None;
            self.drive(i);
        }
    }

    /// Suspends the whole host `id` for `d`: the daemon, its supervisor and the command
    /// freeze. The daemon's boot clock keeps counting; with `monotonic_suspend` the clock
    /// stops until the host wakes.
    pub fn suspend(&mut self, id: u16, d: Real) {
        let (i, now) = (self.idx(id), self.now);
        let h = &mut self.hosts[i];
        if h.node.is_none() || h.paused {
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
        if h.node.take().is_none() {
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
        h.suspended_at = None;
        h.clock.start(self.now);
        // Only the daemon dies: its supervisor keeps the command to the lease end, and
        // a confirmation already under way still comes (and stops the command).
        h.backlog
            .retain(|e| matches!(e, Ev::Released { .. } | Ev::Reload { .. }));
        let keep = std::mem::take(&mut h.backlog);
        h.timer_at = None;
        for ev in keep {
            self.push(self.now, ev);
        }
        if self.opts.trace {
            self.trace.push(format!("{} crash {id}", self.now));
        }
        self.check.on_down(self.now, id);
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
        if h.node.is_none() || h.paused {
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

    pub fn is_up(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].node.is_some()
    }

    pub fn is_paused(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].paused
    }

    /// Drops datagrams from `from` to `to` (one direction).
    pub fn cut_one_way(&mut self, from: u16, to: u16) {
        let (f, t) = (self.idx(from), self.idx(to));
        self.cut[f][t] = true;
    }

    /// Drops datagrams between `a` and `b` both ways.
    pub fn cut(&mut self, a: u16, b: u16) {
        self.cut_one_way(a, b);
        self.cut_one_way(b, a);
    }

    /// Cuts `id` off from every other server.
    pub fn isolate(&mut self, id: u16) {
        for other in 1..=self.opts.n as u16 {
            if other != id {
                self.cut(id, other);
            }
        }
    }

    /// Splits the cluster: servers in `side` reach only each other.
    pub fn partition(&mut self, side: &[u16]) {
        for a in 1..=self.opts.n as u16 {
            for b in 1..=self.opts.n as u16 {
                if side.contains(&a) != side.contains(&b) {
                    self.cut_one_way(a, b);
                }
            }
        }
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.cut
            .iter_mut()
            .for_each(|row| row.iter_mut().for_each(|c| *c = false));
    }

    /// Sends `elect` to a server.
    pub fn elect(&mut self, id: u16) {
        self.with_node(id, |n, t| n.handle_elect(t));
    }

    /// Sends `yield` to a server; true if it was leader. The RESIGN leaves once the
    /// host's supervisor confirms (`confirm_max`, `confirm_hung_pm`) or at the lease end.
    pub fn resign(&mut self, id: u16) -> bool {
        let mut r = false;
        self.with_node(id, |n, t| r = n.handle_yield(t));
        r
    }

    /// Sends `yield ID` to a server (SPEC section 14); true if it was leader. With
    /// `drop_yield_target` (a negative control) the target is dropped.
    pub fn yield_to(&mut self, id: u16, to: Option<u16>) -> bool {
        let to = to.filter(|_| !self.opts.drop_yield_target);
        let mut r = false;
        self.with_node(id, |n, t| r = n.handle_yield_to(t, to));
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
        self.with_node(id, |n, t| {
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
        h.node.is_some() && h.risen && self.now >= h.quiet_end
    }

    /// The real time by which every running daemon is settled (see `settled`), as far
    /// as scheduled now: the latest quiet period end and check rise.
    pub fn settle_time(&self) -> Real {
        self.hosts
            .iter()
            .filter(|h| h.node.is_some())
            .map(|h| h.quiet_end.max(if h.risen { 0 } else { h.rise_at }))
            .max()
            .unwrap_or(0)
            .max(self.now)
    }

    fn apply_health(&mut self, host: usize, healthy: bool) {
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

    /// Tells a running, awake daemon whose check has risen its processor's health.
    fn report_health(&mut self, host: usize) {
        let now = self.now;
        let (ignore, naive) = (self.opts.ignore_health, self.opts.naive_health_yield);
        let h = &mut self.hosts[host];
        if h.paused || !h.risen || ignore {
            return;
        }
        let healthy = h.healthy;
        let local = h.clock.local(now);
        let Some(node) = h.node.as_mut() else { return };
        if node.healthy() == healthy {
            return;
        }
        node.set_health(local, healthy);
        if naive && !healthy && node.is_leader(local) {
            node.handle_yield(local);
        }
        self.drive(host);
    }

    /// True when the processor of `id` is healthy.
    pub fn healthy(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].healthy
    }

    /// True when `id` is drained (its daemon's view, or its disk's while it is down).
    pub fn drained(&self, id: u16) -> bool {
        let h = &self.hosts[self.idx(id)];
        h.node.as_ref().map_or(h.disk.drained, |n| n.drained())
    }

    /// True when `id` could lead: not a witness, its processor healthy, not drained.
    pub fn fit(&self, id: u16) -> bool {
        self.healthy(id) && !self.drained(id) && !self.opts.witnesses.contains(&id)
    }

    /// True when datagrams from `from` to `to` are dropped by a cut.
    pub fn is_cut(&self, from: u16, to: u16) -> bool {
        self.cut[self.idx(from)][self.idx(to)]
    }

    /// A real time aimed at a boundary that matters, from 1 ns to 1 ms either side: a
    /// running server's faith end, a leader's lease end, or a timer deadline.
    pub fn aimed_instant(&mut self) -> Option<Real> {
        let mut targets = Vec::new();
        for h in self.hosts.iter().filter(|h| !h.paused) {
            let Some(n) = h.node.as_ref() else { continue };
            targets.push(h.clock.real(n.faith_until()));
            targets.push(h.clock.real(n.next_deadline()));
            if let Some(u) = n.status(h.clock.local(self.now)).lease_until {
                targets.push(h.clock.real(u));
            }
        }
        targets.retain(|&t| t > self.now && t < self.now + 8 * self.opts.hold().max(ms(1000)));
        if targets.is_empty() {
            return None;
        }
        let t = targets[self.rng.below(targets.len() as u64) as usize];
        let off = 1u64 << self.rng.below(20);
        let off = (off + self.rng.below(off)).min(ms(1));
        let at = if self.rng.below(2) == 0 {
            t.saturating_sub(off)
        } else {
            t + off
        };
        Some(at.max(self.now))
    }

    fn with_node(&mut self, id: u16, f: impl FnOnce(&mut Node, Time)) {
        let i = self.idx(id);
        let h = &mut self.hosts[i];
        if h.paused {
            return;
        }
        let local = h.clock.local(self.now);
        if let Some(node) = h.node.as_mut() {
            f(node, local);
            self.drive(i);
        }
    }

    // ----- observations -------------------------------------------------------------

    /// The status of a running server now.
    pub fn status(&self, id: u16) -> Option<Status> {
        let h = &self.hosts[self.idx(id)];
        h.node.as_ref().map(|n| n.status(h.clock.local(self.now)))
    }

    /// The servers holding a valid lease now (at most one, by S2).
    pub fn leaders(&self) -> Vec<u16> {
        (1..=self.opts.n as u16)
            .filter(|&id| self.status(id).is_some_and(|s| s.lease_until.is_some()))
            .collect()
    }

    /// The single lease holder, if there is exactly one.
    pub fn leader(&self) -> Option<u16> {
        match self.leaders()[..] {
            [l] => Some(l),
            _ => None,
        }
    }

    pub fn term(&self, id: u16) -> u64 {
        self.status(id).map_or(0, |s| s.term)
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
