//! The knobs of a run (`Options`, seed first), each server's `Timers`, and the one
//! config fixture every sim test runs with: `Options::node_configs` (a server's
//! `NodeConfig` per group) and `host_config` (its shell's `HostConfig`).

use super::{Real, ms};
use electd::host::HostConfig;
use electd::node::{NodeConfig, Sabotage, ServerInfo};
use std::time::Duration;

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
    /// Per mille of confirmations sent twice, or after an older one (the leader line's
    /// number): the host's registry must count only the newest.
    pub confirm_twice_pm: u32,
    /// Negative control (issue 24): the host releases a RESIGN on any confirmation,
    /// even of a line older than the last leader line (`HostSabotage`).
    pub release_on_older_confirmation: bool,
    /// Negative control (issue 24): a stop hands over nothing
    /// (`HostSabotage::stop_without_yield`).
    pub stop_without_yield: bool,
    /// Negative control (issue 24): a departed supervisor counts as clear
    /// (`HostSabotage::departure_confirms`).
    pub departure_confirms: bool,
    /// Negative control (issue 25): stop timers armed past the lease end
    /// (`HostSabotage::timers_late`).
    pub timers_late: bool,
    /// Datagrams always wait for the host's next wakeup (`HostSabotage::defer_always`).
    pub defer_always: bool,
    /// A suspended host's clock stops (CLOCK_MONOTONIC) instead of running on
    /// (CLOCK_BOOTTIME, what the daemon uses): a negative control for SPEC 8.
    pub monotonic_suspend: bool,
    /// Every server has a health check: its daemon starts unhealthy at every start and
    /// learns its host's health up to `rise_max` later (SPEC section 13).
    pub checks: bool,
    pub rise_max: Real,
    /// Multicast: every datagram reaches every server, a LEAD for some followers too
    /// (the host's `unicast` off). Unicast otherwise: issue 25's targeted heartbeats.
    pub multicast: bool,
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
    /// Check at every ACK and LEAD that leaves, and every state write handed out, that
    /// the lowest hold a crash could leave on disk covers the faith the server vouched
    /// for ("S2-disk", `durable.rs`): the simulator's own model of the disk, not the
    /// core's bound. On by default.
    pub check_disk: bool,
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

    /// Puts these timers into a server's config (a reload).
    pub fn apply(&self, cfg: &mut NodeConfig) {
        cfg.heartbeat = self.heartbeat;
        cfg.rtt = self.rtt;
        cfg.missed_heartbeats = self.k;
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
            confirm_twice_pm: 0,
            release_on_older_confirmation: false,
            stop_without_yield: false,
            departure_confirms: false,
            timers_late: false,
            defer_always: false,
            monotonic_suspend: false,
            checks: false,
            rise_max: 0,
            multicast: false,
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
            check_disk: true,
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

    /// Group `g`'s server list: every server with its priority there and whether it is
    /// a witness.
    pub fn servers(&self, g: usize) -> Vec<ServerInfo> {
        (1..=self.n as u16)
            .map(|id| ServerInfo {
                id,
                priority: self.priority(g, id),
                witness: self.witnesses.contains(&id),
            })
            .collect()
    }

    /// The cluster's config fingerprint.
    pub fn fingerprint(&self) -> u32 {
        0xE1EC_7D00 ^ self.n as u32
    }

    /// The config fixture: server `id`'s `NodeConfig` of every group, with the timers it
    /// starts with and `seed` for group 0's jitter.
    pub fn node_configs(&self, id: u16, seed: u64) -> Vec<NodeConfig> {
        let timers = self.timers_of(id);
        let first = NodeConfig {
            id,
            servers: self.servers(0),
            fingerprint: self.fingerprint(),
            heartbeat: timers.heartbeat,
            rtt: timers.rtt,
            missed_heartbeats: timers.k,
            drift_ppm: self.drift_ppm,
            max_hold: Duration::from_secs(60),
            preempt_delay: self.preempt_delay,
            seed,
            strict: true,
            sabotage: self.sabotage.clone(),
        };
        // The other groups' jitter seeds derive from the first, so that a run with
        // one group draws exactly what it drew before groups existed.
        (0..self.groups.max(1))
            .map(|g| NodeConfig {
                servers: self.servers(g),
                seed: first.seed ^ (g as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ..first.clone()
            })
            .collect()
    }
}

/// The config fixture's other half: the shell's `HostConfig` of a server whose groups
/// run `cfgs` (from `Options::node_configs`). No keys and no source check: the
/// simulated network carries only the cluster's own datagrams.
pub fn host_config(cfgs: &[NodeConfig], unicast: bool) -> HostConfig {
    HostConfig {
        id: cfgs[0].id,
        fingerprint: cfgs[0].fingerprint,
        max_hold: cfgs[0].max_hold,
        sources: None,
        unicast,
        several: cfgs.len() > 1,
        rtt: cfgs[0].rtt,
    }
}
