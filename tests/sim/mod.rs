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
#![allow(dead_code)]

pub mod check;

use check::Checker;
use electd::host::{self as shell, HostConfig, HostSabotage, Notice, StateWrite, Transmit};
use electd::node::{Dest, Durable, Node, NodeConfig, Sabotage, ServerInfo, Status};
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
    /// Election groups (SPEC section 15, issue 12): each host runs one Node per group,
    /// with one state file for all of them and one bundle per destination per flush.
    pub groups: usize,
    /// Per group preference order (index = group), first = highest priority; a group
    /// without one uses `priorities` (see `balance`).
    pub prefer: Vec<Vec<u16>>,
    /// The daemon sends a leader's due heartbeats of every group with the LEAD of one
    /// (`Node::handle_heartbeat_due`); off: a negative control for the traffic figure
    /// (`HostSabotage::no_align`).
    pub align_heartbeats: bool,
    /// Negative control: the host confirms a write to the cores when it hands it out,
    /// before the disk has it (`HostSabotage::confirm_early`, SPEC section 4).
    pub confirm_early: bool,
    /// Negative control: server 1's driver swaps groups 0 and 1 on receipt (hands each
    /// one's entries to the other's node), as a daemon whose group table is out of
    /// order would.
    pub misroute_group: bool,
    /// Negative control: `yield` in any group resigns group 0 (a driver that ignores
    /// the group argument).
    pub yield_wrong_group: bool,
    /// Negative control (issue 21): a supervisor stall (`stall_supervisor`) stops its
    /// lease-end enforcer too, as only a frozen host could: the command runs on until
    /// the stall ends.
    pub stall_enforcer: bool,
    /// Check after every event that every lease rests on a majority that cannot vote
    /// for anyone else before it ends ("S2-support", `Sim::check_support`): what S2
    /// needs, seen before any second lease exists.
    pub check_support: bool,
}

/// Server ids 1..=n rotated left by `k`: group k's preference order with `balance`.
pub fn rotated(n: usize, k: usize) -> Vec<u16> {
    let ids: Vec<u16> = (1..=n as u16).collect();
    (0..n).map(|i| ids[(i + k) % n]).collect()
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
            groups: 1,
            prefer: vec![],
            align_heartbeats: true,
            confirm_early: false,
            misroute_group: false,
            yield_wrong_group: false,
            stall_enforcer: false,
            check_support: false,
        }
    }

    /// `balance on` (SPEC section 15): `groups` groups, group k preferring what the
    /// daemon's configuration gives it (`electd::config::balanced_order`: the server
    /// list rotated by k, and past the first n groups the second choices rotated too).
    pub fn balance(&mut self, groups: usize) {
        self.groups = groups;
        let ids: Vec<u16> = (1..=self.n as u16).collect();
        self.prefer = (0..groups)
            .map(|k| electd::config::balanced_order(&ids, k))
            .collect();
    }

    /// Server `id`'s priority in group `g`: from its preference order (the first gets
    /// the highest), or from `priorities` for a group without one.
    pub fn priority(&self, g: usize, id: u16) -> u8 {
        match self.prefer.get(g).filter(|o| !o.is_empty()) {
            Some(order) => order
                .iter()
                .position(|&x| x == id)
                .map_or(0, |i| (order.len() - i).min(255) as u8),
            None => self
                .priorities
                .iter()
                .find(|p| p.0 == id)
                .map_or(0, |p| p.1),
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

/// The state file: every group's `Durable`, written as one (SPEC section 15). It reads
/// as group 0's state, as the one-group tests read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disk(pub Vec<Durable>);

impl Disk {
    /// Group `g`'s state (a group never written has the default).
    pub fn group(&self, g: usize) -> Durable {
        self.0.get(g).copied().unwrap_or_default()
    }
}

impl std::ops::Deref for Disk {
    type Target = Durable;
    fn deref(&self) -> &Durable {
        &self.0[0]
    }
}

/// One group's `electctl run` supervisor on one host (S5 per group): the last lease
/// end the host reported (its local clock), the planned stop under way, and a counter
/// of the lines it was told that matter (each planned stop and each lease report), as
/// the daemon numbers them.
#[derive(Clone, Debug, Default)]
struct Supervisor {
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
    writing: Option<Disk>,
    /// When the last write completes.
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
    /// Per group, its supervisor.
    sup: Vec<Supervisor>,
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

impl Host {
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
}

/// The independence watch: the group allowed to change, and every group's (leader,
/// term) per server when the watch began.
struct Watch {
    active: usize,
    /// [group][id - 1]: (leader, term) as that server saw it, if it ran.
    views: Vec<Vec<Option<View>>>,
}

/// A server's view of one group: (leader, term).
type View = (Option<u16>, u64);

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
    /// lead_holds[from][to][kind]: messages of that kind (`Kind`; LEADs with their
    /// RESIGNs) on that link are caught until the real time given, and lost, held back
    /// or delayed (issue 20, `hold_leads`, `hold_kind`).
    lead_holds: Vec<Vec<LinkHolds>>,
    /// Some link holds some kind (a hint: transmit decodes only then).
    any_hold: bool,
    /// Called when a server is elected or re-elected in group 0, before its first LEAD
    /// of the term leaves (issue 20: an adversary that steers a new leadership's
    /// traffic); kept while it returns true.
    pub on_elected: Option<Box<ElectedHook>>,
}

/// An adversary's hook on elections: (the simulator, the server, the term).
pub type ElectedHook = dyn FnMut(&mut Sim, u16, u64) -> bool;

/// Per message kind (`Kind as usize`), the hold on one link: until when, and how.
type LinkHolds = [Option<(Real, LeadHold)>; 4];

/// A message kind a link hold can catch (issue 20).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Lead = 0,
    Elect = 1,
    Vote = 2,
    Ack = 3,
}

impl Kind {
    /// The kind of a message.
    pub fn of(m: &wire::Message) -> Kind {
        match m.body {
            wire::Body::Lead { .. } => Kind::Lead,
            wire::Body::Elect { .. } => Kind::Elect,
            wire::Body::Vote { .. } => Kind::Vote,
            _ => Kind::Ack,
        }
    }
}

/// What a per-link LEAD hold does with the LEADs it catches (issue 20): only LEADs, so
/// ELECTs, VOTEs and ACKs still pass, as on a path where one queue stalls.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LeadHold {
    /// Lost.
    Drop,
    /// Held back and delivered when the hold ends (with the link's delay).
    Hold,
    /// Delivered this much later than the link's delay.
    Delay(Real),
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

/// Every message of a datagram, with its group (empty if it does not decode).
pub fn decode_all(bytes: &[u8]) -> Vec<wire::Entry> {
    wire::decode_any(bytes, None, 256).map_or(Vec::new(), |b| b.entries)
}

/// A predicate on (from id, to id, message); a bundle matches when any entry does.
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
    /// LEADs caught by a per-link LEAD hold (issue 20).
    pub leads_held: u64,
    /// Supervisor stalls (issue 21).
    pub sup_stalls: u64,
    /// Issue 20's episodes: begun, with a second leader elected while the first sat,
    /// and with the first re-elected after that.
    pub lead_episodes: u64,
    pub concurrent: u64,
    pub reelected_after: u64,
    /// Re-elections of a leader while its lease was valid, under `floor_episode`.
    pub floors: u64,
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
        self.leads_held += x.leads_held;
        self.sup_stalls += x.sup_stalls;
        self.lead_episodes += x.lead_episodes;
        self.concurrent += x.concurrent;
        self.reelected_after += x.reelected_after;
        self.floors += x.floors;
    }
}

/// " gN" for a group other than 0 in a trace line (one-group traces read as before).
fn tag(group: usize) -> String {
    if group == 0 {
        String::new()
    } else {
        format!(" g{group}")
    }
}

/// How many sent datagrams the simulator remembers for redelivery.
const HISTORY: usize = 4096;

impl Sim {
    /// Builds the cluster; each node starts within `start_spread`.
    pub fn new(opts: Options) -> Sim {
        let mut rng = SplitMix64::new(opts.seed);
        let groups = opts.groups.max(1);
        let servers_of = |g: usize| -> Vec<ServerInfo> {
            (1..=opts.n as u16)
                .map(|id| ServerInfo {
                    id,
                    priority: opts.priority(g, id),
                    witness: opts.witnesses.contains(&id),
                })
                .collect()
        };
        let servers = servers_of(0);
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
            let first = NodeConfig {
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
            };
            // The other groups' jitter seeds derive from the first, so that a run with
            // one group draws exactly what it drew before groups existed.
            let mine: Vec<NodeConfig> = (0..groups)
                .map(|g| NodeConfig {
                    servers: servers_of(g),
                    seed: first.seed ^ (g as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    ..first.clone()
                })
                .collect();
            cfgs.push(mine);
            hosts.push(Host {
                id: s.id,
                shell: None,
                clock,
                disk: Disk(vec![Durable::default(); groups]),
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
                sup: vec![Supervisor::default(); groups],
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
            group_checks: (1..groups).map(|g| Checker::for_group(n, g)).collect(),
            watch: None,
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
            lead_holds: vec![vec![[None; 4]; n]; n],
            any_hold: false,
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

    /// Runs for `d` more simulated time.
    pub fn run_for(&mut self, d: Real) {
        let t = self.now + d;
        self.run_until(t);
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, from, bytes } => {
                let h = &mut self.hosts[to];
                if !h.up() {
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
                if h.inc != inc || h.paused || !h.up() || h.timer_at != Some(deadline) {
                    return;
                }
                h.timer_at = None;
                let local = h.clock.local(self.now);
                // One timer per process, at its groups' earliest deadline: the host runs
                // every group's handler (early is a no-op), as the daemon does.
                if let Some(sh) = h.shell.as_mut() {
                    sh.handle_timeout(local).expect("host");
                }
                self.drive(host);
            }
            Ev::PersistDone { host, inc, state } => {
                let h = &mut self.hosts[host];
                if h.life != inc || !h.up() {
                    return;
                }
                h.disk = state.clone();
                if h.writing.as_ref() == Some(&state) {
                    h.writing = None;
                }
                if h.paused {
                    h.backlog.push(Ev::PersistDone { host, inc, state });
                    return;
                }
                self.persisted(host, &state);
            }
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
            Ev::Rise { host, life } => {
                let h = &mut self.hosts[host];
                if h.life != life || !h.up() {
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
            Ev::Released {
                host,
                group,
                inc,
                stop,
            } => self.released(host, group, inc, stop),
            Ev::SupWake { host, group, until } => self.sup_wake(host, group, until),
            Ev::Reload { host, timers } => {
                let h = &mut self.hosts[host];
                if h.paused {
                    h.backlog.push(Ev::Reload { host, timers });
                    return;
                }
                self.stats.reloads += 1;
                h.timers = timers;
                let mut drift_hold = (0, Duration::ZERO);
                for cfg in self.cfgs[host].iter_mut() {
                    cfg.heartbeat = timers.heartbeat;
                    cfg.rtt = timers.rtt;
                    cfg.missed_heartbeats = timers.k;
                    drift_hold = (cfg.drift_ppm, cfg.max_hold);
                }
                let (drift, max_hold) = drift_hold;
                if self.opts.trace {
                    self.trace
                        .push(format!("{} reload {} {timers:?}", self.now, h.id));
                }
                if let Some(sh) = h.shell.as_mut() {
                    for node in sh.nodes_mut() {
                        node.set_timers(timers.heartbeat, timers.rtt, timers.k, drift, max_hold)
                            .expect("valid timers");
                    }
                    self.drive(host);
                }
            }
        }
    }

    /// A write of the state file completed: the host confirms it to the groups that
    /// asked (`Host::handle_write_done`).
    fn persisted(&mut self, host: usize, _state: &Disk) {
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        if let Some(sh) = h.shell.as_mut() {
            sh.handle_write_done(local, Ok(())).expect("host");
        }
        self.drive(host);
    }

    /// A process starts with the state file it has: one Node per group.
    fn start(&mut self, host: usize) {
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
            let mut node = Node::new(cfg.clone(), h.disk.group(g), local).expect("valid config");
            if !self.opts.ignore_health && !start {
                node.set_health(local, false);
            }
            groups.push((format!("g{g}"), node, h.disk.group(g)));
        }
        let hc = HostConfig {
            id: h.id,
            fingerprint: self.cfgs[host][0].fingerprint,
            max_hold: self.cfgs[host][0].max_hold,
            sources: None,
            several: groups.len() > 1,
            rtt: self.cfgs[host][0].rtt,
        };
        // No keys and no boot numbers in the simulator; the supervisors release every
        // RESIGN through `released` (the release gates stay shut).
        h.shell = Some(shell::Host::new(
            hc,
            groups,
            Default::default(),
            Default::default(),
            None,
        ));
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
        self.drive(host);
    }

    /// Group `group`'s supervisor on `host` confirms planned stop `stop`.
    fn released(&mut self, host: usize, group: usize, inc: u64, stop: u64) {
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
    fn gather(&mut self) {
        for c in self.group_checks.iter_mut() {
            if !c.violations.is_empty() {
                let v = std::mem::take(&mut c.violations);
                if self.check.violations.len() < 20 {
                    self.check.violations.extend(v);
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
        if let (Some(since), true) = (suspended_at, stopped) {
            // The supervisor enforces the lease end on the host's clock: if that clock
            // stopped, its command runs past the end it had in real time.
            let id = h.id;
            let ends: Vec<(usize, Real)> = h
                .sup
                .iter()
                .enumerate()
                .filter_map(|(g, s)| s.end.map(|u| (g, h.clock.real(u))))
                .collect();
            for (g, end) in ends {
                self.checker(g).cmd_extend(now, id, since, end);
            }
        }
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

    /// The network hands `bytes` from `from` to the daemon on `to`: into its host (the
    /// daemon's own decode, fan-out to groups and `handle_heard`), then its outputs.
    fn deliver(&mut self, to: usize, from: usize, bytes: &[u8]) {
        if !self.hosts[to].up() {
            return;
        }
        if self.opts.trace {
            for e in decode_all(bytes) {
                let tag = tag(usize::from(e.group));
                self.trace.push(format!(
                    "{} {}<-{}{tag} {:?}",
                    self.now,
                    to + 1,
                    from + 1,
                    e.msg
                ));
            }
        }
        let sabotage = self.host_sabotage(to);
        let h = &mut self.hosts[to];
        let local = h.clock.local(self.now);
        let Some(sh) = h.shell.as_mut() else { return };
        sh.set_sabotage(sabotage);
        let src = std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + from as u16));
        if sh.handle_datagram(local, src, bytes).expect("host") {
            self.delivered += 1;
        } else {
            self.dropped += 1;
        }
        self.drive(to);
    }

    /// The host rules the options break on purpose on `host` (negative controls).
    fn host_sabotage(&self, host: usize) -> HostSabotage {
        HostSabotage {
            misroute_groups: self.opts.misroute_group && host == 0,
            no_align: !self.opts.align_heartbeats,
            confirm_early: self.opts.confirm_early,
            release_on_older_confirmation: false,
        }
    }

    /// Flushes the host after an input and carries out what it asks, as the daemon's
    /// driver does (`daemon/flush.rs`): its events to the checkers and supervisors, its
    /// write to the disk, its datagrams to the network. The rules (write before what
    /// waits for it, alignment, bundling per destination) are the host's.
    fn drive(&mut self, host: usize) {
        let sabotage = self.host_sabotage(host);
        let h = &mut self.hosts[host];
        let local = h.clock.local(self.now);
        let Some(sh) = h.shell.as_mut() else { return };
        sh.set_sabotage(sabotage);
        sh.flush(local).expect("host");
        while let Some(Notice::Event { group, event, .. }) =
            self.hosts[host].shell.as_mut().and_then(|s| s.poll_event())
        {
            self.on_event(host, group, event);
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

    /// One datagram of `host` to its destination: every other server, or one.
    fn route(&mut self, host: usize, t: Transmit) {
        if self.opts.trace {
            for e in decode_all(&t.bytes) {
                let tag = tag(usize::from(e.group));
                self.trace.push(format!(
                    "{} {}->{tag} {:?} {:?}",
                    self.now,
                    host + 1,
                    t.to,
                    e.msg
                ));
            }
        }
        let tos: Vec<usize> = match t.to {
            Dest::All => (0..self.opts.n).filter(|&to| to != host).collect(),
            Dest::One(id) => vec![self.idx(id)],
        };
        let elections = t.kinds[wire::Kind::Elect as usize] + t.kinds[wire::Kind::Vote as usize];
        self.election_sent += elections * tos.len() as u64;
        let bytes = Rc::new(t.bytes);
        for to in tos {
            self.transmit(host, to, &bytes);
        }
    }

    /// Starts the host's write of the whole state file (one in flight at a time).
    fn write(&mut self, host: usize, w: StateWrite) {
        let d = self.rng.below(self.opts.persist_max + 1);
        let h = &mut self.hosts[host];
        let state = Disk(w.by_group);
        h.writing = Some(state.clone());
        let at = (self.now + d).max(h.write_done_at + 1);
        if self.opts.trace {
            let what = if state.0.len() == 1 {
                format!("{:?}", state.0[0])
            } else {
                format!("{:?}", state.0)
            };
            self.trace
                .push(format!("{} {} write {what} until {at}", self.now, h.id));
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
        if let electd::node::Event::Resigning { .. } = e {
            self.plan_stop(host, g);
        }
        if let electd::node::Event::Elected { term } = e {
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

    /// After a drain: the supervisors learn the leases, the checkers the statuses, and
    /// the process's one timer is placed at the earliest deadline of its groups.
    fn after_drive(&mut self, host: usize) {
        let now = self.now;
        let h = &self.hosts[host];
        let Some(deadline) = h.nodes().map(|n| n.next_deadline()).min() else {
            return;
        };
        let deadline = h.clock.real(deadline).max(now);
        let (id, inc) = (h.id, h.inc);
        for g in 0..h.nodes().count() {
            let h = &mut self.hosts[host];
            let node = h.node_of(g).expect("running");
            let status = node.status(h.clock.local(now));
            let lease_end = status.lease_until.map(|u| h.clock.real(u));
            let leads = node.leads().unwrap_or(0);
            if let (Some(u), Some(end)) = (status.lease_until, lease_end) {
                // The supervisor learns the lease (at once: the soonest it could start)
                // and runs the command until that end at least. A leader line: no
                // confirmation of an earlier stop counts any more. A stalled one reads
                // the line only when it runs again (`sup_wake`): its enforcer keeps
                // the end it was told last.
                let sup = &mut h.sup[g];
                sup.stopping = false;
                sup.lines += 1;
                if sup.stalled_until.is_none() {
                    sup.end = Some(u);
                    self.checker(g).cmd_lease(now, id, end);
                }
            }
            self.checker(g)
                .on_status(now, id, &status, lease_end, leads);
            self.check_watch(g, id, &status);
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
        self.gather();
    }

    /// Group `g`'s supervisor on `host` is told to stop its command for a planned
    /// handoff; it confirms after a random delay, or never (hung), and the command ends
    /// at the confirmation or at the lease end, whichever comes first.
    fn plan_stop(&mut self, host: usize, group: usize) {
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
            if decode_all(bytes).iter().any(|e| f(fid, tid, &e.msg)) {
                self.held_back.push((from, to, Rc::clone(bytes)));
                return;
            }
        }
        if self.cut[from][to] || self.rng.below(1000) < u64::from(self.opts.loss_pm) {
            return;
        }
        // Issue 20: a LEAD hold on this link catches LEADs only (decoded only while one
        // is set, so runs without holds draw and cost what they did).
        let mut extra = 0;
        if self.any_hold
            && self.lead_holds[from][to]
                .iter()
                .flatten()
                .any(|h| h.0 > self.now)
        {
            let now = self.now;
            let slots = self.lead_holds[from][to];
            let caught = decode_all(bytes)
                .iter()
                .find_map(|e| slots[Kind::of(&e.msg) as usize].filter(|h| h.0 > now));
            if let Some((until, how)) = caught {
                self.stats.leads_held += 1;
                extra = match how {
                    LeadHold::Drop => return,
                    LeadHold::Hold => until - now,
                    LeadHold::Delay(d) => d,
                };
            }
        }
        if extra == 0 && self.opts.aim_pm > 0 && self.rng.below(1000) < u64::from(self.opts.aim_pm)
        {
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
            let at = self.now + extra + lo + self.rng.below(spread + 1);
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
        if !h.paused {
            for n in h.nodes() {
                targets.push(h.clock.real(n.faith_until()));
            }
        }
        for h in self.hosts.iter().filter(|h| !h.paused) {
            for n in h.nodes() {
                if let Some(u) = n.status(h.clock.local(self.now)).lease_until {
                    targets.push(h.clock.real(u));
                }
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

    /// From now until real time `until`, LEADs (RESIGNs included) from `from` to `to`
    /// are lost, held back until `until`, or delayed (issue 20: asymmetric LEAD
    /// delivery; ELECTs, VOTEs and ACKs on that link still pass). `until` at or before
    /// now ends the hold.
    pub fn hold_leads(&mut self, from: u16, to: u16, until: Real, how: LeadHold) {
        self.hold_kind(Kind::Lead, from, to, until, how);
    }

    /// As `hold_leads`, for messages of `kind` (a one-way cut of one kind of message
    /// for a while).
    pub fn hold_kind(&mut self, kind: Kind, from: u16, to: u16, until: Real, how: LeadHold) {
        let (f, t) = (self.idx(from), self.idx(to));
        let on = until > self.now;
        self.lead_holds[f][t][kind as usize] = Some((until, how)).filter(|_| on);
        self.any_hold |= on;
        if self.opts.trace {
            self.trace.push(format!(
                "{} hold {kind:?} {from}->{to} {how:?} until {until}",
                self.now
            ));
        }
    }

    /// Ends every LEAD hold (what a `Hold` caught is still delivered at its end).
    pub fn free_leads(&mut self) {
        self.lead_holds
            .iter_mut()
            .for_each(|row| row.iter_mut().for_each(|h| *h = [None; 4]));
        self.any_hold = false;
    }

    /// True while some link holds LEADs.
    pub fn leads_held_now(&self) -> bool {
        self.lead_holds
            .iter()
            .flatten()
            .flatten()
            .any(|h| h.is_some_and(|h| h.0 > self.now))
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
    fn sup_wake(&mut self, host: usize, group: usize, until: Real) {
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
                decode_all(&e.3).iter().any(|x| f(fid, tid, &x.msg))
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
        let ends: Vec<(usize, Real)> = h
            .sup
            .iter()
            .enumerate()
            .filter_map(|(g, s)| s.end.map(|u| (g, h.clock.real(u))))
            .collect();
        for (g, end) in ends {
            self.checker(g).remap(now, id, end);
        }
        self.gather();
        let h = &mut self.hosts[i];
        if self.opts.trace {
            self.trace
                .push(format!("{now} clock {id} rate {error_ppm} ppm"));
        }
        // Timers were placed with the old rate: place them again.
        if !h.paused && h.up() {
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

    pub fn is_up(&self, id: u16) -> bool {
        self.hosts[self.idx(id)].up()
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
        // One processor per host in the simulator: its health is every group's.
        let mut changed = false;
        let Some(sh) = h.shell.as_mut() else { return };
        for node in sh.nodes_mut().filter(|n| n.healthy() != healthy) {
            changed = true;
            node.set_health(local, healthy);
            if naive && !healthy && node.is_leader(local) {
                node.handle_yield(local);
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

    /// True when datagrams from `from` to `to` are dropped by a cut.
    pub fn is_cut(&self, from: u16, to: u16) -> bool {
        self.cut[self.idx(from)][self.idx(to)]
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

    fn with_node(&mut self, g: usize, id: u16, f: impl FnOnce(&mut Node, Time)) {
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

    fn check_watch(&mut self, g: usize, id: u16, st: &Status) {
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
