//! What goes in and out of the core: its configuration, durable state, outputs,
//! events, status and counters.

use super::elector::ElectorState;
use crate::time::Time;
use crate::wire::{Message, PeerSet};
use std::fmt;
use std::time::Duration;

/// The largest number of servers in a cluster (ids are 1..=255).
pub const MAX_SERVERS: usize = 255;

/// One configured server, as the core needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Its id, 1..=255.
    pub id: u16,
    /// Higher wins ties between equally up-to-date claimants.
    pub priority: u8,
    /// Votes and acknowledges but never leads.
    pub witness: bool,
}

/// Test-only switches that break the protocol, to prove the checkers can fail.
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sabotage {
    /// Votes are not written to the state file (a restart forgets them).
    pub forget_votes: bool,
    /// The tally board counts votes of any term.
    pub stale_tallies: bool,
    /// Vote for the best claimant even while the leader is live.
    pub ignore_live_leader: bool,
    /// Ignore the heard-count eligibility rule.
    pub ignore_heard: bool,
    /// Always wait the whole VOTING window (no early decision), for comparison.
    pub full_window: bool,
    /// Issue 10, fix 1 reverted: the highest term led is not persisted, and any RESIGN
    /// at or above this server's term releases it, whoever's leadership it ends.
    pub volatile_led: bool,
    /// Issue 10, fix 2 reverted: the hold carried in a LEAD is rounded down to whole
    /// milliseconds.
    pub hold_rounded_down: bool,
    /// Issue 10, fix 3 reverted: each accepted LEAD sets faith to now + its hold,
    /// cutting short a longer promise made earlier.
    pub hold_replaced: bool,
    /// The RESIGN leaves at once, without waiting for local supervisors (S5 broken).
    pub resign_early: bool,
    /// Followers ignore the `alive` map of LEADs (issue 12): after a leader's crash
    /// they know only each other's ELECTs, and the first round elects nobody.
    pub ignore_alive: bool,
    /// Followers send ACKs to every server, as before issue 12 (for comparison).
    pub ack_to_all: bool,
    /// Issue 20 reverted: a re-elected leader keeps counting the acknowledgements of
    /// its old term (SPEC section 6 before the fix).
    pub reelect_keeps_acks: bool,
    /// Issue 22: claims are ranked without preference (no priority: the newest term,
    /// then the smallest id), so neither a cold start nor an election after a failure
    /// follows `priority`, `prefer` or `balance` (a liveness breakage only).
    pub unranked_claims: bool,
    /// Issue 22: no server claims as a last resort (SPEC section 13), so a fault every
    /// server shares can leave the cluster leaderless (a liveness breakage only).
    pub no_last_resort: bool,
    /// Issue 22's detour back: with `preempt-delay`, a leader hands over to the most
    /// preferred server that has been fit for the delay, even while a more preferred
    /// one is fit but not yet for the delay (1 -> 3 -> 2; a liveness breakage only).
    pub preempt_detours: bool,
    /// Every LEAD asks every follower to acknowledge it, as before issue 25's sparse
    /// acknowledgements (for comparison; changes only traffic).
    pub dense_acks: bool,
    /// Issue 25's sparse acknowledgements without their guard: a leader keeps asking
    /// only some followers after an ACK it asked for did not come (a liveness
    /// breakage only: one lost ACK can cost the lease).
    pub sparse_ignores_misses: bool,
    /// Issue 25's sparse acknowledgements without their lease-held gate: a leader asks
    /// only some followers even while the lease it already holds ends before the next
    /// LEAD's ACKs can come (after a reload to a longer heartbeat; a liveness breakage
    /// only: one lost ACK can cost the lease).
    pub sparse_ignores_lease_held: bool,
    /// A LEAD that asks only some followers still goes to every server, as before
    /// issue 25's targeted heartbeats (for comparison; changes only traffic).
    pub untargeted: bool,
    /// A follower asked by a targeted LEAD starts a round at its faith's end, not a
    /// heartbeat later (a liveness breakage only: one lost LEAD can open a round
    /// against a healthy leader).
    pub no_turn_wait: bool,
    /// The first sparse LEAD after one that asked everyone goes only to the followers
    /// it names too (a liveness breakage only: the follower it skips has no room for
    /// a lost turn, and opens its round early after a crash).
    pub first_sparse_targeted: bool,
    /// A (re)started server opens its first round three heartbeats after the time
    /// SPEC 14 gives (a liveness breakage only: shows that L1, counted from the end of
    /// a majority's quiet period, still catches a late first round).
    pub late_first_round: bool,
    /// An unfit leader waits RTT from turning unfit for the answers to its LEAD, also
    /// when that LEAD waited for the drain's write (a preference breakage only: a slow
    /// write names a less preferred successor).
    pub unfit_wait_from_turn: bool,
    /// A write that only records a drain holds every later datagram, as any write
    /// did before (a liveness breakage only: a drained leader on a stalled disk stops
    /// its heartbeats and its handover waits for its lease to lapse).
    pub drain_write_holds_sends: bool,
    /// A reload's longer timers take effect at once, so the first LEAD with the longer
    /// hold waits for its write and holds every later datagram, as before (a liveness
    /// breakage only: a leader whose disk stalls loses its lease at a reload). Such a
    /// LEAD may leave only after a later write lowered the hold again; that is safe
    /// (its faith counted from when it was built, and the promise shrank only once the
    /// faith had run down to within the lower hold), and the invariant asks no more of
    /// it than of an ACK (`check_durable_for`).
    pub reload_holds_sends: bool,
    /// The hold a datagram and staged timers are measured against is the disk's now,
    /// not the lowest that may be there once the pending writes land
    /// (`min_hold_pending`, the rule before the second review). A safety breakage
    /// (D2): a follower whose shorter write stalls and whose staged reload asks for a
    /// longer one ACKs a LEAD longer than what may land, and restarts quiet for the
    /// shorter hold while the lease resting on that ACK runs on
    /// (tests/reload_stall_adversary.rs, `d2_without_the_bound_two_leases_overlap`).
    /// And a liveness one (D1): a reload back to a hold still on disk while a write
    /// lowering it is in flight applies at once, and its first LEAD waits for the
    /// stalled writes, so a leader whose disk stalls loses its lease. The core's
    /// invariant is measured with the same bound (and is off under any sabotage); the
    /// simulator's "S2-disk", from its own model of the disk, catches D2.
    pub disk_hold_bound: bool,
    /// A write that only lowers the hold promise holds every later datagram, as any
    /// write but a drain's did before (a liveness breakage only: a leader reloaded back
    /// to shorter timers on a stalled disk stops its heartbeats and loses its lease).
    pub lowering_write_holds: bool,
    /// A restarted server shrinks the hold promise it read from disk at the first
    /// shorter LEAD, though the LEADs it acknowledged before the crash may still be
    /// owed it until its quiet period ends (a safety breakage: a second crash leaves a
    /// quiet period shorter than a lease it vouched for; the simulator's "S2-disk").
    pub restart_sheds_promise: bool,
}

impl Sabotage {
    /// True when any switch is on (some invariant checks then do not apply).
    pub fn any(&self) -> bool {
        // The issue-12 and issue-22 switches change only liveness and traffic, never an
        // invariant.
        Sabotage {
            ignore_alive: false,
            ack_to_all: false,
            unranked_claims: false,
            no_last_resort: false,
            preempt_detours: false,
            dense_acks: false,
            sparse_ignores_misses: false,
            sparse_ignores_lease_held: false,
            untargeted: false,
            no_turn_wait: false,
            first_sparse_targeted: false,
            unfit_wait_from_turn: false,
            drain_write_holds_sends: false,
            reload_holds_sends: false,
            lowering_write_holds: false,
            late_first_round: false,
            ..*self
        } != Sabotage::default()
    }
}

/// The core's configuration: the cluster and the timers.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This server's id.
    pub id: u16,
    /// Every configured server, this one included.
    pub servers: Vec<ServerInfo>,
    /// The cluster fingerprint every datagram must carry.
    pub fingerprint: u32,
    /// HBT: the leader's heartbeat interval.
    pub heartbeat: Duration,
    /// RTT: the VOTING window.
    pub rtt: Duration,
    /// K: heartbeats missed before a leader is presumed dead.
    pub missed_heartbeats: u32,
    /// rho in millionths: bound on clock rate error between servers.
    pub drift_ppm: u32,
    /// The longest hold a LEAD may carry (`max-hold`); longer ones are refused.
    pub max_hold: Duration,
    /// `preempt-delay`: a leader hands over to a server of strictly higher priority that
    /// it has heard fit (eligible and healthy) for this long (SPEC section 14).
    pub preempt_delay: Option<Duration>,
    /// Seed of the retry jitter.
    pub seed: u64,
    /// Panic when an invariant of the core is broken (the simulator and tests); in
    /// production a broken invariant is logged as an error.
    #[doc(hidden)]
    pub strict: bool,
    #[doc(hidden)]
    pub sabotage: Sabotage,
}

/// Why a configuration cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No servers, or more than 255.
    ServerCount(usize),
    /// A server id outside 1..=255.
    BadId(u16),
    /// The same id twice.
    DuplicateId(u16),
    /// This server's id is not in the list.
    NotListed(u16),
    /// A timer outside its allowed range.
    Timing(&'static str),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ServerCount(n) => write!(f, "{n} servers listed; 1 to 255 are allowed"),
            ConfigError::BadId(id) => write!(f, "server id {id} is outside 1..=255"),
            ConfigError::DuplicateId(id) => write!(f, "server id {id} is listed twice"),
            ConfigError::NotListed(id) => {
                write!(f, "this server's id {id} is not in the server list")
            }
            ConfigError::Timing(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ConfigError {}

impl NodeConfig {
    /// Checks the rules of SPEC section 2 and the server list.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.servers.len();
        if n == 0 || n > MAX_SERVERS {
            return Err(ConfigError::ServerCount(n));
        }
        let mut seen = [false; 256];
        for s in &self.servers {
            if !(1..=255).contains(&s.id) {
                return Err(ConfigError::BadId(s.id));
            }
            if std::mem::replace(&mut seen[usize::from(s.id)], true) {
                return Err(ConfigError::DuplicateId(s.id));
            }
        }
        if !(1..=255).contains(&self.id) || !seen[usize::from(self.id)] {
            return Err(ConfigError::NotListed(self.id));
        }
        if self.heartbeat < Duration::from_millis(10) {
            return Err(ConfigError::Timing("heartbeat must be at least 10ms"));
        }
        if self.heartbeat > Duration::from_secs(3600) {
            return Err(ConfigError::Timing("heartbeat must be at most 1h"));
        }
        if self.rtt >= self.heartbeat {
            return Err(ConfigError::Timing("rtt must be shorter than heartbeat"));
        }
        if self.rtt.is_zero() {
            return Err(ConfigError::Timing("rtt must be positive"));
        }
        if !(2..=100).contains(&self.missed_heartbeats) {
            return Err(ConfigError::Timing(
                "missed-heartbeats must be between 2 and 100",
            ));
        }
        if self.drift_ppm >= 100_000 {
            return Err(ConfigError::Timing("drift must be in [0, 0.1)"));
        }
        if self.max_hold > Duration::from_millis(u64::from(u32::MAX)) {
            return Err(ConfigError::Timing("max-hold must be at most 49 days"));
        }
        // Compared as carried: a LEAD's hold is rounded up to whole milliseconds, and
        // a receiver refuses one above its max-hold (issue 20: 100.9ms * 3 passed
        // against max-hold 302.7ms, then every LEAD carried 303 ms and was refused).
        if self.hold_as_carried() > self.max_hold {
            return Err(ConfigError::Timing(
                "heartbeat * missed-heartbeats must not exceed max-hold (in whole milliseconds, rounded up, as a LEAD carries it)",
            ));
        }
        Ok(())
    }

    /// Majority of the configured servers: floor(N/2)+1.
    pub fn quorum(&self) -> usize {
        self.servers.len() / 2 + 1
    }

    /// K*HBT: how long a follower keeps faith in a leader it heard.
    pub fn hold(&self) -> Duration {
        self.heartbeat * self.missed_heartbeats
    }

    /// The hold as a LEAD carries it: K*HBT rounded up to whole milliseconds.
    pub fn hold_as_carried(&self) -> Duration {
        Duration::from_millis(self.hold().as_nanos().div_ceil(1_000_000) as u64)
    }
}

/// The state that must survive a restart (SPEC section 4).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// Highest term seen.
    pub term: u64,
    /// Highest term voted in.
    pub voted_term: u64,
    /// Whom this server voted for in `voted_term` (0: nobody).
    pub voted_for: u16,
    /// The highest term this server has led (or given up the right to lead): it never
    /// leads a term at or below it, so late VOTEs cannot revive a leadership.
    pub led_term: u64,
    /// The hold promise, in milliseconds rounded up: the longest faith this server may
    /// still owe a leader (sets the quiet period after a restart).
    pub hold_ms: u32,
    /// `electctl drain`: this server may not lead until undrained (SPEC section 13).
    pub drained: bool,
}

/// Terms at or above this are refused (SPEC section 8): no datagram can exhaust them.
pub const MAX_TERM: u64 = 1 << 62;
/// A datagram whose term is more than this ahead of ours is refused too, so one
/// datagram cannot carry a cluster to the term limit (it would then be unable to elect).
pub const MAX_TERM_JUMP: u64 = 1 << 40;

/// Where a datagram goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Every other server (the multicast group, or unicast fan-out).
    All,
    /// One server.
    One(u16),
    /// A steady leader's LEAD that asks only these followers to acknowledge it: only
    /// they need it (docs/PROTOCOL.md, "Targeted heartbeats"). A host whose datagrams
    /// reach every server at once (multicast) sends it as `All`; a unicast host sends
    /// it to each of them alone.
    Only(PeerSet),
}

impl Dest {
    /// True when a datagram `from` sends to this destination reaches server `to`, on a
    /// network where each server gets only what is sent to it (unicast).
    pub fn reaches(self, from: u16, to: u16) -> bool {
        match self {
            Dest::All => to != from,
            Dest::One(x) => x == to,
            Dest::Only(set) => set.contains(to),
        }
    }
}

/// Something the core noticed that a driver or checker may want.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This server cast a vote (it has left, or was delivered to itself).
    Voted {
        /// The election term.
        term: u64,
        /// The server voted for.
        candidate: u16,
    },
    /// This server won a round and now leads `term` (its lease comes with acks).
    Elected {
        /// The term won.
        term: u64,
    },
    /// This server stopped being leader.
    SteppedDown {
        /// The term it led.
        term: u64,
    },
    /// A planned handoff began: this server stopped reporting leader. The RESIGN
    /// leaves once the driver calls `handle_released` (every local supervisor has
    /// confirmed that its command exited) or at `until`, the end of the lease.
    Resigning {
        /// The term being given up.
        term: u64,
        /// When the RESIGN leaves at the latest (the lease end, or now).
        until: Time,
        /// The successor the RESIGN names, if any.
        to: Option<u16>,
        /// Why this server hands over.
        reason: Handover,
    },
    /// The RESIGN of `term` left: followers are released.
    Resigned {
        /// The term given up.
        term: u64,
    },
    /// Another leader of this server's own term was seen: SPEC section 8 is broken.
    DualLeader {
        /// The term.
        term: u64,
        /// The other leader.
        other: u16,
    },
}

/// Why a leader hands over (SPEC sections 6, 13, 14).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Handover {
    /// `yield`, `yield ID` or SIGTERM.
    Yield,
    /// This server turned unhealthy and another server is known to be fit.
    Health,
    /// This server was drained and another server is known to be fit.
    Drain,
    /// A server of higher priority has been fit for `preempt-delay`.
    Preempt,
}

impl Handover {
    /// A short stable name, used as the metrics label.
    pub fn name(self) -> &'static str {
        match self {
            Handover::Yield => "yield",
            Handover::Health => "health",
            Handover::Drain => "drain",
            Handover::Preempt => "preempt",
        }
    }
}

/// One thing the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send a datagram.
    Send {
        /// Its destination.
        dest: Dest,
        /// The message.
        msg: Message,
    },
    /// Write this state durably, then call `handle_persisted` with it.
    Persist(Durable),
    /// A notification.
    Event(Event),
}

/// Why a datagram was not processed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The sender is not in the server list.
    UnknownSender,
    /// The sender is this server (its own multicast echo).
    OwnEcho,
    /// The sender runs with a different cluster definition.
    Fingerprint,
    /// A term at or above 2^62, or too far ahead of this server's (SPEC section 8).
    TermLimit,
    /// A LEAD whose hold exceeds `max-hold` (SPEC section 8).
    HoldLimit,
}

impl Reject {
    /// A short stable name, used as the metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            Reject::UnknownSender => "unknown_sender",
            Reject::OwnEcho => "own_echo",
            Reject::Fingerprint => "fingerprint",
            Reject::TermLimit => "term_limit",
            Reject::HoldLimit => "hold_limit",
        }
    }
}

/// The role reported to applications.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// This server holds a valid lease.
    Leader,
    /// Anything else.
    Follower,
}

impl Role {
    /// The lower-case name used in status output.
    pub fn name(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
        }
    }
}

/// A snapshot of what the node reports (SPEC section 11, `status`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// Leader while the lease is valid.
    pub role: Role,
    /// The leader heard within its hold (or this server while it holds the lease).
    pub leader: Option<u16>,
    /// The highest term seen; while leading, the term led (the fencing token).
    pub term: u64,
    /// End of this server's lease, on its own clock.
    pub lease_until: Option<Time>,
    /// The ELECTOR's state.
    pub elector: ElectorState,
    /// The highest term voted in.
    pub voted_term: u64,
    /// While leading: whether the newest LEAD asked only some followers to
    /// acknowledge it (issue 25, sparse acknowledgements); None on a follower.
    pub acks_in_turn: Option<bool>,
}

/// Counters for metrics.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Rounds this server took part in (entered VOTING).
    pub rounds: u64,
    /// Votes cast.
    pub votes: u64,
    /// Rounds that ended without a vote (for any reason).
    pub abstentions: u64,
    /// Times this server became leader.
    pub elected: u64,
    /// LEADs of this server's own term from another leader.
    pub dual_leader: u64,
    /// LEADs with a term below this server's term.
    pub stale_leads: u64,
    /// ACKs that matched no recent LEAD of this leader.
    pub unmatched_acks: u64,
    /// LEADs accepted that asked other followers to acknowledge them, not this one
    /// (issue 25, sparse acknowledgements): ACKs not sent.
    pub acks_not_asked: u64,
    /// Handovers begun, by reason: yield, health, drain, preempt (`Handover as usize`).
    pub handovers: [u64; 4],
    /// Rounds in which this server voted for the successor a RESIGN named.
    pub successor_votes: u64,
}

/// A preemption waiting for fresh reports (`Node::consider_handover`): `from`, the
/// position of the LEAD that asked every follower; `to`, the server the seat would
/// go to; `until`, the end of the wait (RTT after that LEAD).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreemptAsk {
    pub(crate) from: (u64, u64),
    pub(crate) to: usize,
    pub(crate) until: Time,
}
