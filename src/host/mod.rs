//! The host: the pure shell around every group's core (quinn-proto's `Endpoint` to the
//! core's `Connection`). It owns the groups' `Node`s, the datagram path (decode, source
//! check, replay window and peer boot numbers, fan-out, `handle_heard`, drop counting),
//! the flush (write before what waits for it, heartbeat alignment, bundling per
//! destination, keyed counters, the framing each peer reads) and the state-file write
//! in flight (SPEC sections 3, 4, 10 and 15).
//!
//! Like the core it never reads a clock, opens a socket, touches a file or starts a
//! thread: `handle_*(now, ...)` in; `poll_transmit` (datagrams, bundled and encoded),
//! `poll_write` (the state file to write, at most one in flight) and `poll_event` out.
//! The mio daemon and the simulator (`tests/sim`) both drive it.

mod flush;
mod health;
mod peers;
mod recv;
mod reload;
mod rest;
mod stop;
mod supervisors;

use crate::auth::{Keys, ReplayWindow};
use crate::node::{Dest, Durable, Event, Node};
use crate::store::{Extra, GroupStates};
use crate::time::Time;
use crate::wire;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

pub use flush::{FlushSteps, flush_passes};
pub use peers::{FALLBACK_STREAK, PROBE_EVERY, PeerWire};
pub use reload::ReloadTimers;
pub use stop::StopState;
pub use supervisors::{ClientId, Registry, Release, SupervisorLine};

/// What the host needs to know of the cluster besides its groups.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// This server's id (the sender of every datagram).
    pub id: u16,
    /// The cluster fingerprint (for the warning about a different server list).
    pub fingerprint: u32,
    /// `max-hold` (for the warning about a refused LEAD).
    pub max_hold: Duration,
    /// Unicast mode: each server's configured address; a datagram's source must be its
    /// sender's (SPEC section 10). None in multicast mode: no source check.
    pub sources: Option<Vec<(u16, SocketAddr)>>,
    /// Unicast mode: a datagram reaches only the server it is sent to, so a LEAD for
    /// some followers (`Dest::Only`, issue 25's targeted heartbeats) goes to each of
    /// them alone. False in multicast mode: one datagram reaches every server, and it
    /// goes to all.
    pub unicast: bool,
    /// With several groups, log lines of a group are tagged "group NAME: ".
    pub several: bool,
    /// The round-trip bound (told to supervisors for their `--grace` checks).
    pub rtt: Duration,
}

/// One election group inside the host: its core and what the state file holds of it.
#[derive(Debug)]
pub struct HostGroup {
    /// Its name (the state file's key, ELECTD_GROUP, the `group` label).
    pub name: String,
    /// Its protocol core.
    pub node: Node,
    /// The state last written for this group.
    pub durable: Durable,
    /// A write this group's core asked for, not yet handed over.
    want: Option<Durable>,
    /// When its last planned handoff began (`Event::Resigning`).
    resign_began: Time,
    /// The lease end of the handoff under way (from `Resigning` to `Resigned`).
    resign_until: Option<Time>,
    /// Its check's fall/rise counting (`health.rs`).
    check: crate::health::CheckState,
    /// Its verdict as last applied (check and supervisors combined).
    verdict: crate::health::Verdict,
    /// Changes of `verdict`.
    health_changes: u64,
    /// From when this group may be elected as a last resort while unhealthy: its
    /// start plus its check's rise time (`set_check`).
    last_resort_from: Time,
}

/// One datagram to send: bundled and encoded (keyed when keys are configured).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where: every other server or one.
    pub to: Dest,
    /// The datagram.
    pub bytes: Vec<u8>,
    /// How many of its entries are of each kind (indexed by `wire::Kind as usize`);
    /// all zero in a probe's compact copy, whose messages were counted in the original.
    pub kinds: [u64; 5],
}

/// The state file as it should be written: every group's newest state (groups no
/// longer configured are kept) and the extra (boot numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateWrite {
    /// By group name, the configured groups' and the kept ones'.
    pub groups: GroupStates,
    /// This server's boot number and its peers'.
    pub extra: Extra,
    /// The configured groups' states, by index (what the simulator's disk keeps).
    pub by_group: Vec<Durable>,
}

/// What the host tells its driver besides datagrams and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// An event of group `group`'s core, in the order the cores made them.
    /// `released`: a `Resigning` whose RESIGN the host released at once, because the
    /// driver's gate said no supervisor of that group needed to confirm.
    Event {
        group: usize,
        event: Event,
        released: bool,
    },
    /// Group `group`'s waiting RESIGN was released (it leaves in this flush): `why`.
    Released { group: usize, why: Release },
    /// A numbered line for supervisor `client`.
    Supervisor {
        client: ClientId,
        line: SupervisorLine,
    },
    /// Arm supervisor `client`'s stop timers (it passed them with `supervise`) for the
    /// instants `at` of a lease end this server holds: at every renewal, and before
    /// each line that carries a lease (issue 25).
    ArmTimers {
        client: ClientId,
        /// The lease end the instants are for (boot clock).
        until: Time,
        /// The SIGTERM and SIGKILL instants (`crate::supervise::stop_at`).
        at: crate::supervise::StopAt,
    },
}

/// The host's counters (the driver counts what it sends: it knows how many copies
/// leave).
#[derive(Clone, Debug, Default)]
pub struct HostMetrics {
    /// Messages (bundle entries) accepted by a core, by kind.
    pub received: [u64; 5],
    /// Datagrams with at least one message a core accepted.
    pub datagrams_received: u64,
    /// Bytes of every datagram handed in.
    pub received_bytes: u64,
    /// Dropped datagrams and messages, by reason.
    pub dropped: BTreeMap<&'static str, u64>,
    /// State-file writes confirmed.
    pub state_writes: u64,
    /// Datagrams encoded, by framing (`wire::Framing::index`: version 3/4, compact
    /// 5/6, compact with ack maps 7/8), probe copies included; the driver counts the
    /// copies a fan-out makes.
    pub encoded: [u64; 3],
    /// Datagrams accepted, by the framing they came in (versions 1/2 count as 3/4).
    pub accepted_framing: [u64; 3],
    /// Copies in the top level sent as probes (counted in `encoded` as well).
    pub probes: u64,
}

/// Why the host cannot go on (the daemon stops; nothing that depended on it has left).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError(pub String);

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Rules of the host broken on purpose, for the simulator's negative controls.
#[derive(Clone, Debug, Default)]
pub struct HostSabotage {
    /// Entries of groups 0 and 1 are handed to the other group's core.
    pub misroute_groups: bool,
    /// No heartbeat alignment: each group's LEAD leaves on its own timer (SPEC 15).
    pub no_align: bool,
    /// A targeted LEAD goes only to the followers it names, also to a peer not known
    /// to read the ack map (which never waits for its turn: a liveness breakage only).
    pub named_only: bool,
    /// A write is confirmed to the cores as soon as it is handed out, before it is
    /// durable: what waited for it leaves at once (breaks SPEC section 4).
    pub confirm_early: bool,
    /// A waiting RESIGN is released as soon as every supervisor of its group has
    /// confirmed any line, even one older than the last leader line (breaks S5).
    pub release_on_older_confirmation: bool,
    /// Health verdicts are never applied to the cores (breaks SPEC 13).
    pub ignore_health: bool,
    /// A leader yields as soon as it turns unhealthy, before another server is known
    /// fit (breaks SPEC 13's "leads on meanwhile").
    pub naive_health_yield: bool,
    /// A stop hands over nothing (the server leaves while leading).
    pub stop_without_yield: bool,
    /// A supervisor that leaves unconfirmed counts as clear: its lease end is not kept
    /// (breaks S5 while its command runs on to that end).
    pub departure_confirms: bool,
    /// A supervisor's stop timers are armed half a second past the lease end (breaks
    /// S5 for supervisors that hold timers: their command runs on past the lease).
    pub timers_late: bool,
    /// Datagrams always wait for the next wakeup, whatever the state (issue 25: reads
    /// at the heartbeat even without a lease, in a round, with ACKs missing).
    pub defer_always: bool,
}

/// The write handed to the driver: the groups that asked and the state it holds for
/// each, confirmed to them once the driver reports it durable.
#[derive(Debug)]
struct InFlight {
    states: Vec<(usize, Durable)>,
    /// A new boot number is in this write: held datagrams may leave once it lands.
    boot: bool,
}

/// The sans-IO shell of one server: every group's core and the rules around them.
pub struct Host {
    cfg: HostConfig,
    groups: Vec<HostGroup>,
    keys: Option<Keys>,
    replay: ReplayWindow,
    /// Groups in the state file that are no longer configured: written back unchanged.
    kept: GroupStates,
    extra: Extra,
    /// `extra` changed (a peer's boot, a new boot of ours) and is not yet in a write.
    extra_dirty: bool,
    send_seq: u32,
    /// Writes handed out so far (`metrics.state_writes` counts those confirmed).
    writes_submitted: u64,
    /// The supervisors of every group (`supervisors.rs`).
    registry: Registry,
    /// Stopping since a `handle_stop`: the exit bound (`stop.rs`).
    stopping: Option<Time>,
    outbox: Vec<(Dest, wire::Entry)>,
    /// The framing each peer reads, and the probe cadence (`peers.rs`).
    wire: peers::PeerFramings,
    transmits: VecDeque<Transmit>,
    /// Keyed datagrams carrying a boot number not yet on disk (once per 2^32 sends).
    held: Vec<Transmit>,
    boot_pending: bool,
    write: Option<StateWrite>,
    in_flight: Option<InFlight>,
    notices: VecDeque<Notice>,
    metrics: HostMetrics,
    /// Rate limit of warnings per (sender, reason): one a minute (boot clock).
    warned: HashMap<(u16, &'static str), Time>,
    last_debug_drop: Option<Time>,
    sabotage: HostSabotage,
    /// Vectors reused from one input to the next (`flush.rs`).
    scratch: flush::Scratch,
    /// A waiting datagram was handed in since the last flush
    /// (`handle_waiting_datagram`): outputs are taken only after a flush.
    unflushed: bool,
}

impl Host {
    /// A host of `groups` (name, core, state on disk), in configuration order (a
    /// group's index is its wire id), with the state file's other content: groups no
    /// longer configured (`kept`) and the boot numbers (`extra`, this boot's already
    /// on disk).
    pub fn new(
        cfg: HostConfig,
        groups: Vec<(String, Node, Durable)>,
        kept: GroupStates,
        extra: Extra,
        keys: Option<Keys>,
    ) -> Host {
        let mut replay = ReplayWindow::default();
        for (&id, &boot) in &extra.peer_boots {
            replay.floor(id, boot);
        }
        Host {
            cfg,
            groups: groups
                .into_iter()
                .map(|(name, node, durable)| HostGroup {
                    name,
                    node,
                    durable,
                    want: None,
                    resign_began: Time(0),
                    resign_until: None,
                    check: crate::health::CheckState::new(None),
                    verdict: crate::health::Verdict::Ok,
                    health_changes: 0,
                    last_resort_from: Time(0),
                })
                .collect(),
            keys,
            replay,
            kept,
            extra,
            extra_dirty: false,
            send_seq: 0,
            writes_submitted: 0,
            registry: Registry::default(),
            stopping: None,
            outbox: Vec::new(),
            wire: peers::PeerFramings::default(),
            transmits: VecDeque::new(),
            held: Vec::new(),
            boot_pending: false,
            write: None,
            in_flight: None,
            notices: VecDeque::new(),
            metrics: HostMetrics::default(),
            warned: HashMap::new(),
            last_debug_drop: None,
            sabotage: HostSabotage::default(),
            scratch: flush::Scratch::default(),
            unflushed: false,
        }
    }

    /// The groups, in configuration order.
    pub fn groups(&self) -> &[HostGroup] {
        &self.groups
    }

    /// Group `g` (its core for requests: elect, yield, drain, health). Call
    /// [`Host::flush`] after changing it.
    pub fn group_mut(&mut self, g: usize) -> &mut HostGroup {
        &mut self.groups[g]
    }

    /// Every group's core (for inputs that go to all groups: timers, health).
    pub fn nodes_mut(&mut self) -> impl Iterator<Item = &mut Node> {
        self.groups.iter_mut().map(|g| &mut g.node)
    }

    /// Every group's core, to read.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.groups.iter().map(|g| &g.node)
    }

    /// Group `g`, to read.
    pub fn group(&self, g: usize) -> &HostGroup {
        &self.groups[g]
    }

    /// The host's counters.
    pub fn metrics(&self) -> &HostMetrics {
        &self.metrics
    }

    /// What `peer` was last heard to send: the framing it gets (`peers.rs`).
    pub fn peer_wire(&self, peer: u16) -> PeerWire {
        self.wire.of(peer)
    }

    /// True when datagrams are keyed (SPEC section 10).
    pub fn keyed(&self) -> bool {
        self.keys.is_some()
    }

    /// The keys (a reload may rotate them, never turn them on or off).
    pub fn set_keys(&mut self, keys: Option<Keys>) {
        self.keys = keys;
    }

    /// Breaks host rules on purpose (simulator negative controls only).
    #[doc(hidden)]
    pub fn set_sabotage(&mut self, s: HostSabotage) {
        self.sabotage = s;
    }

    /// Runs every group's due timers, then flushes.
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), HostError> {
        for g in &mut self.groups {
            g.node.handle_timeout(now);
        }
        self.flush(now)
    }

    /// The write handed out by `poll_write` finished (`Ok`: durable). Confirms it to
    /// the groups that asked, then flushes what it released. A failed write is fatal:
    /// nothing that depended on it has left, and without a working state file
    /// stopping is the only safe answer.
    pub fn handle_write_done(&mut self, now: Time, r: Result<(), String>) -> Result<(), HostError> {
        let Some(f) = self.in_flight.take() else {
            return Ok(());
        };
        r.map_err(|e| HostError(format!("cannot write the state: {e}")))?;
        self.metrics.state_writes += 1;
        for (g, state) in f.states {
            let group = &mut self.groups[g];
            group.durable = state;
            group.node.handle_persisted(now, state);
        }
        if f.boot {
            self.boot_pending = false;
            self.transmits.extend(self.held.drain(..));
        }
        self.flush(now)
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        debug_assert!(
            !self.unflushed,
            "a waiting datagram's outputs need a flush first"
        );
        let t = self.transmits.pop_front();
        if self.transmits.is_empty() {
            // Back to the start of its buffer (`clear` rewinds the ring; `pop_front`
            // does not): a steady heartbeat's datagram then takes the same slot, and
            // the same cache lines, each time, not the next slot of eight (issue 25).
            self.transmits.clear();
        }
        t
    }

    /// The state file to write now, if a write is due and none is in flight. The
    /// driver reports its end with [`Host::handle_write_done`].
    pub fn poll_write(&mut self) -> Option<StateWrite> {
        self.write.take()
    }

    /// The next notice (core events, in order).
    pub fn poll_event(&mut self) -> Option<Notice> {
        debug_assert!(
            !self.unflushed,
            "a waiting datagram's outputs need a flush first"
        );
        self.notices.pop_front()
    }

    /// The earliest deadline: every group's core's, and the lease end left behind by
    /// a supervisor that departed unconfirmed while a RESIGN waits for it (`now`: the
    /// ends already past are no deadline).
    pub fn next_deadline(&self, now: Time) -> Time {
        self.groups
            .iter()
            .map(|g| g.node.next_deadline())
            .chain(self.release_deadline(now))
            .chain(self.stopping.filter(|&b| b > now))
            .min()
            .unwrap_or(Time(u64::MAX))
    }

    /// True while a write is in flight or waits to be handed over.
    pub fn write_pending(&self) -> bool {
        self.in_flight.is_some()
            || self.write.is_some()
            || self.extra_dirty
            || self.groups.iter().any(|g| g.want.is_some())
    }

    /// The number of the write that will hold everything asked for so far: a write
    /// counts as done once `metrics().state_writes` reaches it (writes finish in the
    /// order they are handed out, one at a time). Zero when nothing is pending.
    pub fn write_holding_all(&self) -> u64 {
        if !self.write_pending() {
            0
        } else if self.extra_dirty || self.groups.iter().any(|g| g.want.is_some()) {
            self.writes_submitted + 1
        } else {
            self.writes_submitted
        }
    }

    /// True while a write handed out has not been reported done.
    pub fn write_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// The state file as it stands (every group's last written state).
    pub fn state(&self) -> StateWrite {
        let mut groups = self.kept.clone();
        for g in &self.groups {
            groups.insert(g.name.clone(), g.durable);
        }
        StateWrite {
            groups,
            extra: self.extra.clone(),
            by_group: self.groups.iter().map(|g| g.durable).collect(),
        }
    }

    /// When group `g`'s last planned handoff began.
    fn handoff_began(&self, g: usize) -> Time {
        self.groups[g].resign_began
    }

    /// "group orders: " with several groups, else nothing.
    fn tag(&self, g: usize) -> String {
        if self.cfg.several {
            format!("group {}: ", self.groups[g].name)
        } else {
            String::new()
        }
    }
}
