//! The protocol core: both machines of one server, driven by `handle_*` and drained by
//! `poll_output` (SPEC sections 4 to 6).
//!
//! A `Node` never reads a clock, touches a socket or a file, or draws from a global
//! random generator: `now` comes in with every call, randomness from the seed, and
//! everything it wants done comes out of `poll_output`. State that must be durable is
//! asked for with `Output::Persist`; every datagram queued after such a request is held
//! back until the driver confirms the write with `handle_persisted`.

use crate::candidate::{Leadership, Tally};
use crate::elector::{Abstain, Claim, Decision, DecisionInput, ElectorState, Slate, decide};
use crate::rng::SplitMix64;
use crate::time::Time;
use crate::wire::{Body, Message, PeerSet};
use log::{debug, error, info, warn};
use std::collections::VecDeque;
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
}

impl Sabotage {
    /// True when any switch is on (some invariant checks then do not apply).
    pub fn any(&self) -> bool {
        // The issue-12 switches change only liveness and traffic, never an invariant.
        Sabotage {
            ignore_alive: false,
            ack_to_all: false,
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
        if self.hold() > self.max_hold {
            return Err(ConfigError::Timing(
                "heartbeat * missed-heartbeats must not exceed max-hold",
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
    /// Times the known leader changed.
    pub leader_changes: u64,
    /// LEADs of this server's own term from another leader.
    pub dual_leader: u64,
    /// LEADs with a term below this server's term.
    pub stale_leads: u64,
    /// ACKs that matched no recent LEAD of this leader.
    pub unmatched_acks: u64,
    /// Handovers begun, by reason: yield, health, drain, preempt (`Handover as usize`).
    pub handovers: [u64; 4],
    /// Rounds in which this server voted for the successor a RESIGN named.
    pub successor_votes: u64,
}

/// An output waiting for a durable write.
#[derive(Clone, Debug)]
enum Held {
    Send(Dest, Message),
    SelfVote(u64),
    /// A re-election to this term, applied once led_term = term is durable.
    Reelect(u64),
}

/// A planned handoff in progress (SPEC section 6, Resign).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Resign {
    /// No handoff under way.
    Idle,
    /// No longer reporting leader; waiting for local supervisors to confirm that their
    /// commands exited, at most until `until` (the lease end). No LEAD leaves meanwhile.
    Waiting {
        term: u64,
        seq: u64,
        until: Time,
        to: Option<usize>,
    },
    /// The first RESIGN left; the second is due at `at`.
    Again {
        term: u64,
        seq: u64,
        at: Time,
        to: Option<usize>,
    },
}

/// One server's protocol state: ELECTOR and CANDIDATE.
#[derive(Debug)]
pub struct Node {
    cfg: NodeConfig,
    me: usize,
    ids: Vec<u16>,
    witness: Vec<bool>,
    index: Vec<Option<u8>>,
    quorum: usize,
    hold: Duration,
    lease_len: Duration,
    rng: SplitMix64,

    term: u64,
    voted_term: u64,
    voted_for: Option<usize>,
    /// The highest term led (persisted): never lead a term at or below it.
    led_term: u64,
    /// After a resignation, VOTEs for this server up to this term are ignored until a
    /// round of its own chooses it again (volatile).
    refuse_votes_upto: u64,
    /// The longest faith this server may still owe (persisted, rounded up to ms).
    promise: Duration,

    /// The health the driver reports (checks, `electctl run --max-restarts`).
    healthy: bool,
    /// Drained by the operator (persisted).
    drained: bool,
    /// Per server: when it last reported its fitness (an ACK, with or without UNFIT; an
    /// ELECT, with or without INELIGIBLE), and since when it has been reported fit
    /// continuously (None after an unfit report) (SPEC sections 13, 14).
    fit_at: Vec<Option<Time>>,
    fit_since: Vec<Option<Time>>,
    /// Per server, for a leader: the position (term, seq) of the LEAD acknowledged by its
    /// latest ACK that said fit ((0, 0) after an unfit one). A handover needs an ACK of a
    /// recent LEAD: a fit report dated by its receipt could be a late copy, or come from
    /// a server that crashed or froze since (issue 11 review).
    fit_ack: Vec<(u64, u64)>,
    /// The position of the first LEAD this leader sent after it turned unfit: a health or
    /// drain handover goes only to a server that acknowledged it (or a later one) as fit,
    /// so a fault shared by every server, noticed a moment later by some, is not handed
    /// to a server that is already failing.
    unfit_from: (u64, u64),
    /// Until when an unfit leader collects the ACKs of that LEAD before it picks a
    /// successor (RTT after it left; sooner once every live server has answered), so
    /// the successor is the best fit server, not the first to answer.
    unfit_wait: Option<Time>,
    /// Per server, the position of the newest current LEAD it acknowledged (fit or not).
    ack_pos: Vec<(u64, u64)>,
    /// When a RESIGN named this server as successor: its preempt-delay counts from then,
    /// so `yield --to` is not undone at once by a preemption (issue 11).
    named_at: Option<Time>,
    /// The successor named by the RESIGN that released this server, for the round it
    /// opened.
    successor: Option<usize>,

    leader: Option<usize>,
    /// No vote for anyone but `leader` before this time (SPEC section 5).
    faith_until: Time,
    last_seen: (u64, u64),
    /// Per server, when a datagram of it last arrived here.
    heard_at: Vec<Option<Time>>,
    /// Per server, when the followed leader last said it had heard it (the `alive` map
    /// of a LEAD): followers acknowledge to the leader only, so a follower learns from
    /// the leader which other followers are alive.
    vouched_at: Vec<Option<Time>>,

    elector: ElectorState,
    elector_deadline: Time,
    slate: Slate,
    retry_doublings: u32,
    resigned_last: bool,

    tally: Tally,
    leadership: Option<Leadership>,
    resign: Resign,

    quiet_until: Time,
    last_now: Time,
    /// The term when the last input was handled (invariant: a term never falls).
    checked_term: u64,
    durable: Durable,
    requested: Option<Durable>,
    held: VecDeque<Held>,
    out: VecDeque<Output>,
    counters: Counters,
}

/// K*HBT*(1-2*rho): how long a majority's acknowledgement lets a leader lead.
fn lease_len(hold: Duration, drift_ppm: u32) -> Duration {
    let ns = crate::time::duration_nanos(hold) as u128;
    Duration::from_nanos((ns * u128::from(1_000_000 - 2 * drift_ppm) / 1_000_000) as u64)
}

/// A duration in whole milliseconds, rounded up (a hold must never shrink in transit).
fn ms_ceil(d: Duration) -> u32 {
    let ns = crate::time::duration_nanos(d);
    u32::try_from(ns.div_ceil(1_000_000)).unwrap_or(u32::MAX)
}

fn ms_floor(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

impl Node {
    /// Starts a server at `now` with the state read from its state file.
    pub fn new(cfg: NodeConfig, durable: Durable, now: Time) -> Result<Node, ConfigError> {
        cfg.validate()?;
        let n = cfg.servers.len();
        let mut index = vec![None; 256];
        for (i, s) in cfg.servers.iter().enumerate() {
            index[usize::from(s.id)] = Some(i as u8);
        }
        let me = index[usize::from(cfg.id)]
            .map(usize::from)
            .ok_or(ConfigError::NotListed(cfg.id))?;
        let hold = cfg.hold();
        let lease_len = lease_len(hold, cfg.drift_ppm);
        // Before a restart this server may have promised a leader its hold: stay quiet
        // for the hold promise on disk (SPEC section 5, Decision).
        let promise = Duration::from_millis(u64::from(durable.hold_ms));
        let quiet = hold.max(promise);
        let voted_for = index[usize::from(durable.voted_for)].map(usize::from);
        let term = durable.term.max(durable.voted_term);
        Ok(Node {
            me,
            ids: cfg.servers.iter().map(|s| s.id).collect(),
            witness: cfg.servers.iter().map(|s| s.witness).collect(),
            index,
            quorum: cfg.quorum(),
            hold,
            lease_len,
            rng: SplitMix64::new(cfg.seed ^ u64::from(cfg.id).rotate_left(32)),
            term,
            voted_term: durable.voted_term,
            voted_for,
            led_term: durable.led_term,
            refuse_votes_upto: 0,
            promise,
            healthy: true,
            drained: durable.drained,
            fit_at: vec![None; n],
            fit_since: vec![None; n],
            fit_ack: vec![(0, 0); n],
            unfit_from: (0, 0),
            unfit_wait: None,
            ack_pos: vec![(0, 0); n],
            named_at: None,
            successor: None,
            leader: None,
            faith_until: Time::ZERO,
            last_seen: (0, 0),
            heard_at: vec![None; n],
            vouched_at: vec![None; n],
            elector: ElectorState::Watching,
            elector_deadline: now + cfg.heartbeat * 5,
            slate: Slate::new(n),
            retry_doublings: 0,
            resigned_last: false,
            tally: Tally::new(n),
            leadership: None,
            resign: Resign::Idle,
            quiet_until: now + quiet,
            last_now: now,
            checked_term: term,
            durable,
            requested: None,
            held: VecDeque::new(),
            out: VecDeque::new(),
            counters: Counters::default(),
            cfg,
        })
    }

    // ----- inputs -------------------------------------------------------------------

    /// Handles a decoded datagram received at `now`.
    pub fn handle_datagram(&mut self, now: Time, msg: &Message) -> Result<(), Reject> {
        let s = self.index[usize::from(msg.sender.min(255))]
            .map(usize::from)
            .ok_or(Reject::UnknownSender)?;
        if s == self.me {
            return Err(Reject::OwnEcho);
        }
        if msg.fingerprint != self.cfg.fingerprint {
            return Err(Reject::Fingerprint);
        }
        self.admit(msg)?;
        // Heard first: a round that the timer opens in this same call counts the sender.
        self.heard_at[s] = Some(now);
        self.on_time(now);
        match msg.body {
            Body::Lead {
                seq,
                hold_ms,
                resign,
                successor,
                unfit: lead_unfit,
                alive,
            } => {
                if resign {
                    self.on_resign(now, s, msg.term, seq, successor);
                } else {
                    let newest = msg.term >= self.term && (msg.term, seq) > self.last_seen;
                    if newest && !self.cfg.sabotage.ignore_alive {
                        // Before the ACK leaves: its UNFIT flag counts the servers heard.
                        self.vouch(now, s, alive);
                    }
                    self.on_lead(now, s, msg.term, seq, hold_ms);
                    if newest && self.leader == Some(s) {
                        self.note_fitness(now, s, !lead_unfit);
                    }
                }
            }
            Body::Elect {
                last_term,
                last_seq,
                priority,
                heard,
                ineligible,
            } => {
                let claim = Claim {
                    term: msg.term,
                    last: (last_term, last_seq),
                    priority,
                    heard,
                    ineligible,
                };
                // Fit means it could be elected: eligible, and hearing a majority (SPEC
                // section 5). A server that hears too few is no successor, however healthy.
                // Only a claim of a round under way (a late claim of an old round says
                // nothing about now).
                if msg.term > self.term {
                    self.note_fitness(now, s, !ineligible && usize::from(heard) >= self.quorum);
                }
                self.on_elect(now, s, claim)
            }
            Body::Vote { candidate } => {
                if candidate == self.cfg.id {
                    self.on_vote(now, s, msg.term);
                }
            }
            Body::Ack { seq, unfit } => {
                // Only an ACK of the newest LEAD, or the one before, tells how the sender
                // is now: a late copy of an old ACK must not make a failing server look
                // fit (issue 11 review).
                let current = match &self.leadership {
                    Some(l) => msg.term == l.term && seq.saturating_add(1) >= l.seq,
                    None => (msg.term, seq.saturating_add(1)) >= self.last_seen,
                };
                if current {
                    self.ack_pos[s] = self.ack_pos[s].max((msg.term, seq));
                    self.note_fitness(now, s, !unfit);
                    self.fit_ack[s] = if unfit {
                        (0, 0)
                    } else {
                        self.fit_ack[s].max((msg.term, seq))
                    };
                }
                self.on_ack(s, msg.term, seq)
            }
        }
        self.consider_handover(now);
        self.check_invariants(now);
        Ok(())
    }

    /// Refuses what no single datagram may do (SPEC section 8): terms at or above 2^62
    /// or far ahead of ours, and holds above `max-hold`.
    fn admit(&self, msg: &Message) -> Result<(), Reject> {
        let too_high = |t: u64| t >= MAX_TERM || t > self.term.saturating_add(MAX_TERM_JUMP);
        if too_high(msg.term) {
            return Err(Reject::TermLimit);
        }
        match msg.body {
            Body::Elect { last_term, .. } if too_high(last_term) => Err(Reject::TermLimit),
            Body::Lead { hold_ms, .. }
                if Duration::from_millis(u64::from(hold_ms)) > self.cfg.max_hold =>
            {
                Err(Reject::HoldLimit)
            }
            _ => Ok(()),
        }
    }

    /// Handles the passage of time; calling it early or twice does nothing.
    pub fn handle_timeout(&mut self, now: Time) {
        self.on_time(now);
        self.consider_handover(now);
        self.check_invariants(now);
    }

    /// Sets this server's health (its checks and supervisors, SPEC section 13). An
    /// unhealthy server claims INELIGIBLE and says UNFIT in its ACKs; an unhealthy
    /// leader hands over as soon as another server is known to be fit, and keeps
    /// leading while none is.
    pub fn set_health(&mut self, now: Time, healthy: bool) {
        self.on_time(now);
        let was = self.unfit();
        self.healthy = healthy;
        self.on_unfit(now, was);
        self.consider_handover(now);
        self.check_invariants(now);
    }

    /// A leader that just turned unfit sends a LEAD at once: its UNFIT flag tells the
    /// followers, and their ACKs of it say who is fit now. A handover waits for those.
    fn on_unfit(&mut self, now: Time, was_unfit: bool) {
        if was_unfit && !self.unfit() {
            // Turned fit: without a live leader, a round now, not at the backed-off
            // retry (rounds back off while every claim is INELIGIBLE).
            if self.elector == ElectorState::Watching
                && self.leadership.is_none()
                && !self.leader_live(now)
            {
                self.retry_doublings = 0;
                self.elector_deadline = self.elector_deadline.min(now);
                self.on_time(now);
            }
            return;
        }
        if was_unfit || !self.unfit() || self.resign != Resign::Idle {
            return;
        }
        if self.leadership.is_some() {
            self.send_lead(now);
        }
        if let Some(l) = &self.leadership {
            self.unfit_from = (l.term, l.seq);
            self.unfit_wait = Some(now + self.cfg.rtt);
        }
    }

    /// Drains (true) or undrains this server (`electctl drain`, SPEC section 13). The
    /// drain is persisted; a drained leader hands over as an unhealthy one does.
    pub fn set_drained(&mut self, now: Time, drained: bool) {
        self.on_time(now);
        let was = self.unfit();
        self.drained = drained;
        self.persist();
        self.on_unfit(now, was);
        self.consider_handover(now);
        self.check_invariants(now);
    }

    /// The health last set by `set_health`.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// True while drained.
    pub fn drained(&self) -> bool {
        self.drained
    }

    /// True when this server may not lead now: a witness, unhealthy or drained.
    pub fn unfit(&self) -> bool {
        self.witness[self.me] || !self.healthy || self.drained
    }

    /// Whether server `id` is known fit at `now`: `Some(true)` when its latest ACK or
    /// ELECT, heard within K*HBT + HBT, said it could lead; `Some(false)` when it said it
    /// could not (a witness never can); `None` when no such report came within that
    /// window (a leader's, for one: LEADs carry none).
    pub fn peer_fit(&self, now: Time, id: u16) -> Option<bool> {
        let i = usize::from(self.index[usize::from(id.min(255))]?);
        let window = self.hold + self.cfg.heartbeat;
        // A leader sends no ACKs and no ELECTs: its last report goes stale, and
        // stale is unknown, not unfit.
        let reported = self.fit_at[i].is_some_and(|t| now.saturating_since(t) <= window);
        if !reported {
            return None;
        }
        Some(self.known_fit(now, i))
    }

    /// Starts a round now (the `elect` command).
    pub fn handle_elect(&mut self, now: Time) {
        self.on_time(now);
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
        self.check_invariants(now);
    }

    /// Begins a planned handoff (SIGTERM, `yield`); returns false when not leader.
    ///
    /// The role stops being reported as leader at once and no LEAD leaves any more, so
    /// the lease end is fixed. The RESIGN that releases the followers waits for
    /// `handle_released` (every local supervisor has confirmed that its command exited)
    /// or for the lease end, whichever comes first (SPEC section 6, Resign).
    pub fn handle_yield(&mut self, now: Time) -> bool {
        self.handle_yield_to(now, None)
    }

    /// Begins a planned handoff to server `to` (`yield ID`, SPEC section 14): the RESIGN
    /// names it, and voters choose it when it makes an eligible claim in the round that
    /// follows (otherwise the usual choice). `None`, an unknown id or this server's own
    /// is a plain yield. Returns false when not leader.
    pub fn handle_yield_to(&mut self, now: Time, to: Option<u16>) -> bool {
        self.on_time(now);
        let to = to
            .and_then(|id| self.index[usize::from(id.min(255))])
            .map(usize::from)
            .filter(|&i| i != self.me);
        let ok = self.begin_resign(now, to, Handover::Yield);
        self.check_invariants(now);
        ok
    }

    fn begin_resign(&mut self, now: Time, to: Option<usize>, reason: Handover) -> bool {
        if self.resign != Resign::Idle {
            return false;
        }
        let Some(l) = self.leadership.take() else {
            return false;
        };
        self.counters.handovers[reason as usize] += 1;
        self.drop_held_leads(l.term);
        self.tally.clear();
        self.counters.leader_changes += 1;
        self.push_event(Event::SteppedDown { term: l.term });
        let until = l.lease_until().filter(|&u| u > now).unwrap_or(now);
        self.push_event(Event::Resigning {
            term: l.term,
            until,
            to: to.map(|i| self.ids[i]),
            reason,
        });
        info!(
            "resigning leadership of term {} ({}{}): the RESIGN waits for local supervisors, {} ms at most",
            l.term,
            reason.name(),
            to.map_or(String::new(), |i| format!(", to server {}", self.ids[i])),
            until.saturating_since(now).as_millis()
        );
        self.resign = Resign::Waiting {
            term: l.term,
            seq: l.seq,
            until,
            to,
        };
        if self.cfg.sabotage.resign_early || until <= now {
            self.send_resign(now);
        }
        true
    }

    /// Records a fitness report from server `s`: `fit_since` restarts after a report
    /// that said unfit or after a silence longer than K*HBT + HBT.
    fn note_fitness(&mut self, now: Time, s: usize, fit: bool) {
        let window = self.hold + self.cfg.heartbeat;
        let fresh = self.fit_at[s].is_some_and(|t| now.saturating_since(t) <= window);
        if !fit {
            // Remembered as a report (for `peer_fit`); `known_fit` needs `fit_since`.
            self.fit_since[s] = None;
            self.fit_at[s] = Some(now);
            return;
        }
        if !fresh || self.fit_since[s].is_none() {
            self.fit_since[s] = Some(now);
        }
        self.fit_at[s] = Some(now);
    }

    /// Server `i` acknowledged, as fit, a LEAD of this leader at or after position
    /// `from` and no older than the one before the newest: it is alive and fit now.
    fn acked_fit_since(&self, i: usize, from: (u64, u64)) -> bool {
        let Some(l) = &self.leadership else {
            return false;
        };
        let ack = self.fit_ack[i];
        ack >= from && ack.0 == l.term && ack.1.saturating_add(2) >= l.seq
    }

    /// Server `i` was reported fit within K*HBT + HBT and never unfit since.
    fn known_fit(&self, now: Time, i: usize) -> bool {
        let window = self.hold + self.cfg.heartbeat;
        i != self.me
            && !self.witness[i]
            && self.fit_since[i].is_some()
            && self.fit_at[i].is_some_and(|t| now.saturating_since(t) <= window)
    }

    /// A leader with a valid lease hands over when it is unfit and another server is
    /// known fit, or when a server of higher priority has been fit for `preempt-delay`
    /// (SPEC sections 13, 14). The successor is the fit server of highest priority, then
    /// smallest id.
    fn consider_handover(&mut self, now: Time) {
        if self.resign != Resign::Idle || !self.is_leader(now) {
            return;
        }
        let mine = self.cfg.servers[self.me].priority;
        let best = |want: &dyn Fn(usize) -> bool| {
            (0..self.ids.len())
                .filter(|&i| self.known_fit(now, i) && want(i))
                .max_by_key(|&i| (self.cfg.servers[i].priority, std::cmp::Reverse(self.ids[i])))
        };
        let (to, reason) = if self.unfit() {
            let reason = if self.drained {
                Handover::Drain
            } else {
                Handover::Health
            };
            let from = self.unfit_from;
            // Wait for the answers to the LEAD sent when this server turned unfit: all
            // of them from the servers heard lately, or RTT.
            let window = self.hold + self.cfg.heartbeat;
            let answered = (0..self.ids.len()).all(|i| {
                i == self.me
                    || self.witness[i]
                    || self.ack_pos[i] >= from
                    || self.heard_at[i].is_none_or(|t| now.saturating_since(t) > window)
            });
            if !answered && self.unfit_wait.is_some_and(|t| now < t) {
                return;
            }
            (best(&|i| self.acked_fit_since(i, from)), reason)
        } else if let Some(delay) = self.cfg.preempt_delay {
            // A server named successor keeps the seat for the delay before preempting.
            let named = self
                .named_at
                .is_some_and(|t| now.saturating_since(t) < delay);
            let p = best(&|i| {
                !named
                    && self.cfg.servers[i].priority > mine
                    && self.fit_since[i].is_some_and(|t| now.saturating_since(t) >= delay)
                    && self.acked_fit_since(i, (0, 0))
            });
            (p, Handover::Preempt)
        } else {
            (None, Handover::Preempt)
        };
        if let Some(to) = to {
            info!(
                "handing over to server {} ({})",
                self.ids[to],
                match reason {
                    Handover::Health => "this server is unhealthy",
                    Handover::Drain => "this server is drained",
                    _ => "it has higher priority and was fit for preempt-delay",
                }
            );
            self.begin_resign(now, Some(to), reason);
        }
    }

    /// Every local supervisor has confirmed that its command exited: the RESIGN of a
    /// planned handoff may leave now. Does nothing when no handoff is waiting.
    pub fn handle_released(&mut self, now: Time) {
        self.on_time(now);
        self.send_resign(now);
        self.check_invariants(now);
    }

    /// True while a planned handoff waits for local supervisors.
    pub fn resign_pending(&self) -> bool {
        matches!(self.resign, Resign::Waiting { .. })
    }

    /// True once no handoff is under way (both RESIGNs have been queued, or none began):
    /// a stopping daemon may exit.
    pub fn resign_complete(&self) -> bool {
        self.resign == Resign::Idle
    }

    /// Confirms that `state` is durable; releases the datagrams that waited for it.
    pub fn handle_persisted(&mut self, now: Time, state: Durable) {
        // Confirmations come in order; an older one must never lower what is durable.
        let d = self.durable;
        if state.term >= d.term && state.voted_term >= d.voted_term && state.led_term >= d.led_term
        {
            self.durable = state;
        }
        if self.requested == Some(state) {
            self.requested = None;
        }
        self.release(now);
        self.check_invariants(now);
    }

    /// Emits held outputs, in order, while no write is outstanding.
    fn release(&mut self, now: Time) {
        while self.requested.is_none() {
            let Some(h) = self.held.pop_front() else {
                break;
            };
            match h {
                Held::Send(dest, msg) => self.emit_send(dest, msg),
                Held::SelfVote(term) => {
                    self.push_event(Event::Voted {
                        term,
                        candidate: self.cfg.id,
                    });
                    self.on_vote(now, self.me, term);
                }
                Held::Reelect(term) => self.apply_reelection(now, term),
            }
        }
    }

    /// Applies new timers (SIGHUP). Each LEAD carries the hold it promised and keeps the
    /// lease length it was sent with, and followers never shorten a promise already
    /// made, so the change is safe at any moment; running timers keep their deadlines
    /// and the new values apply from the next one.
    pub fn set_timers(
        &mut self,
        heartbeat: Duration,
        rtt: Duration,
        k: u32,
        drift_ppm: u32,
        max_hold: Duration,
    ) -> Result<(), ConfigError> {
        let cfg = NodeConfig {
            heartbeat,
            rtt,
            missed_heartbeats: k,
            drift_ppm,
            max_hold,
            ..self.cfg.clone()
        };
        cfg.validate()?;
        self.hold = cfg.hold();
        self.lease_len = lease_len(self.hold, drift_ppm);
        self.cfg = cfg;
        Ok(())
    }

    /// Applies a new `preempt-delay` (SIGHUP). Fitness already heard keeps counting:
    /// `fit_since` does not depend on the delay, so the new value applies at once.
    pub fn set_preempt_delay(&mut self, now: Time, delay: Option<Duration>) {
        self.on_time(now);
        self.cfg.preempt_delay = delay;
        self.consider_handover(now);
        self.check_invariants(now);
    }

    // ----- outputs ------------------------------------------------------------------

    /// The next thing the driver must do, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The earliest time at which `handle_timeout` has work to do.
    pub fn next_deadline(&self) -> Time {
        let mut d = self.elector_deadline;
        if let Some(l) = &self.leadership {
            d = d.min(l.next_lead_at).min(self.step_down_at(l));
            // The lease end changes the reported role; once past, it is no deadline.
            if let Some(u) = l.lease_until().filter(|&u| u > self.last_now) {
                d = d.min(u);
            }
        }
        if let Some(w) = self.unfit_wait.filter(|&w| w > self.last_now) {
            if self.leadership.is_some() && self.resign == Resign::Idle {
                d = d.min(w);
            }
        }
        match self.resign {
            Resign::Idle => {}
            Resign::Waiting { until, .. } => d = d.min(until),
            Resign::Again { at, .. } => d = d.min(at),
        }
        d
    }

    /// What the node reports at `now`.
    pub fn status(&self, now: Time) -> Status {
        let lease = self.leadership.as_ref().filter(|l| l.lease_valid(now));
        let leader = if lease.is_some() {
            Some(self.cfg.id)
        } else if self.leadership.is_none() && self.leader != Some(self.me) && self.leader_live(now)
        {
            self.leader.map(|i| self.ids[i])
        } else {
            None
        };
        Status {
            role: if lease.is_some() {
                Role::Leader
            } else {
                Role::Follower
            },
            leader,
            // While leading, the term led: the fencing token, durable. The highest term
            // seen may be ahead of it (this server's own vote in a round, or a
            // re-election whose write has not landed yet).
            term: lease.map_or(self.term, |l| l.term),
            lease_until: lease.and_then(|l| l.lease_until()),
            elector: self.elector,
            voted_term: self.voted_term,
        }
    }

    /// True while this server holds a valid lease at `now`.
    pub fn is_leader(&self, now: Time) -> bool {
        self.leadership.as_ref().is_some_and(|l| l.lease_valid(now))
    }

    /// True while the CANDIDATE is LEADER, with or without a valid lease.
    pub fn leads(&self) -> Option<u64> {
        self.leadership.as_ref().map(|l| l.term)
    }

    /// The highest term seen.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The lease a majority's acknowledgement gives, K*HBT*(1-2*rho), with the current
    /// timers: what `electctl run` must fit its grace period into.
    pub fn lease_len(&self) -> Duration {
        self.lease_len
    }

    /// Until when this server keeps faith in its leader (no vote for anyone else before
    /// it): what an adversary in the simulator aims deliveries at.
    pub fn faith_until(&self) -> Time {
        self.faith_until
    }

    /// The hold promise: the longest faith this server may still owe a leader.
    pub fn hold_promise(&self) -> Duration {
        self.promise
    }

    /// The heartbeat interval now in force.
    pub fn heartbeat(&self) -> Duration {
        self.cfg.heartbeat
    }

    /// Each other server's id and when it was last heard.
    pub fn peers(&self) -> impl Iterator<Item = (u16, Option<Time>)> + '_ {
        (0..self.ids.len())
            .filter(move |&i| i != self.me)
            .map(move |i| (self.ids[i], self.last_heard(i)))
    }

    /// The counters for metrics.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    // ----- timers -------------------------------------------------------------------

    fn step_down_at(&self, l: &Leadership) -> Time {
        // A new leader gets K*HBT to gather a lease; after that it must keep one.
        (l.since + self.hold).max(l.lease_until().unwrap_or(Time::ZERO))
    }

    fn on_time(&mut self, now: Time) {
        self.last_now = self.last_now.max(now);
        if let Some(l) = &self.leadership {
            if now >= self.step_down_at(l) {
                let had = l.lease_until().is_some();
                warn!(
                    "lost quorum: stepping down from term {} ({})",
                    l.term,
                    if had {
                        "lease expired"
                    } else {
                        "no lease within K*HBT"
                    }
                );
                self.step_down(now);
            }
        }
        match self.resign {
            Resign::Waiting { until, .. } if now >= until => {
                info!("lease ended before every local supervisor confirmed: resigning now");
                self.send_resign(now);
            }
            Resign::Again { term, seq, at, to } if now >= at => {
                self.resign = Resign::Idle;
                self.send_lead_msg(term, seq, true, to);
            }
            _ => {}
        }
        if let Some(l) = &self.leadership {
            if now >= l.next_lead_at {
                self.send_lead(now);
            }
        }
        if now >= self.elector_deadline {
            match self.elector {
                ElectorState::Watching => self.enter_voting(now),
                ElectorState::Voting => self.finish_round(now),
            }
        }
    }

    // ----- ELECTOR ------------------------------------------------------------------

    /// When server `i` was last heard, directly or through the followed leader.
    fn last_heard(&self, i: usize) -> Option<Time> {
        self.heard_at[i].max(self.vouched_at[i])
    }

    /// The servers this leader heard within two heartbeats (itself included): the
    /// `alive` map of its LEADs. Only direct hearing counts, never a vouch.
    fn alive(&self) -> PeerSet {
        let mut set = PeerSet::EMPTY;
        set.insert(self.ids[self.me]);
        let now = self.last_now;
        for (i, h) in self.heard_at.iter().enumerate() {
            if h.is_some_and(|t| now.saturating_since(t) <= self.cfg.heartbeat * 2) {
                set.insert(self.ids[i]);
            }
        }
        set
    }

    /// Records that the leader `s`, in a LEAD that is the newest seen, reports the
    /// servers of `alive` heard.
    fn vouch(&mut self, now: Time, s: usize, alive: PeerSet) {
        for id in alive.iter() {
            if let Some(i) = self.index.get(usize::from(id)).copied().flatten() {
                let i = usize::from(i);
                if i != self.me && i != s {
                    self.vouched_at[i] = Some(now);
                }
            }
        }
    }

    fn leader_live(&self, now: Time) -> bool {
        self.leader.is_some() && now < self.faith_until
    }

    /// Servers heard within K*HBT + HBT, this one included. The extra heartbeat matters:
    /// a hold timer fires K*HBT after the last LEAD, a little late on a real scheduler,
    /// and the other followers were last heard by their ACKs of that same LEAD; with a
    /// window of exactly K*HBT every survivor counted only itself after a leader crash,
    /// and the first round elected nobody.
    fn heard_count(&self, now: Time) -> u8 {
        let window = self.hold + self.cfg.heartbeat;
        let others = (0..self.ids.len())
            .filter(|&i| i != self.me)
            .filter(|&i| {
                self.last_heard(i)
                    .is_some_and(|t| now.saturating_since(t) <= window)
            })
            .count();
        u8::try_from(others + 1).unwrap_or(u8::MAX)
    }

    /// Forgets the leader and releases this server's faith in it (only a RESIGN of the
    /// followed leadership, or this server's own RESIGN, may do that).
    fn release_leader(&mut self, now: Time) {
        self.leader = None;
        self.faith_until = self.faith_until.min(now);
    }

    fn enter_voting(&mut self, now: Time) {
        self.elector = ElectorState::Voting;
        self.elector_deadline = now + self.cfg.rtt;
        self.counters.rounds += 1;
        let claim = Claim {
            term: self.term.saturating_add(1),
            last: self.last_seen,
            priority: self.cfg.servers[self.me].priority,
            heard: self.heard_count(now),
            // A server waiting to resign may not lead the next round either.
            // A sitting leader claims eligible even when unfit: it keeps its seat until a
            // fit server acknowledges it (SPEC 13), and a round must be able to re-elect
            // it in a higher term, or a server whose term ran ahead never follows it,
            // never ACKs, and is never handed the seat (swarm seed 5138).
            ineligible: (self.unfit() && self.leadership.is_none())
                || self.resigned_last
                || self.resign_pending(),
        };
        self.slate.record(self.me, claim);
        if now < self.quiet_until {
            // A server that may not vote yet stays out of other slates too: its claim
            // would make a majority slate that cannot elect anyone, and every such round
            // raises the others' terms for nothing.
            return;
        }
        debug!(
            "round opened: proposing term {} (heard {})",
            claim.term, claim.heard
        );
        let msg = self.message(
            claim.term,
            Body::Elect {
                last_term: claim.last.0,
                last_seq: claim.last.1,
                priority: claim.priority,
                heard: claim.heard,
                ineligible: claim.ineligible,
            },
        );
        self.send(Dest::All, msg);
        self.decide_if_complete(now);
    }

    fn retry_wait(&mut self) -> Duration {
        let rtt = crate::time::duration_nanos(self.cfg.rtt);
        let base = Duration::from_nanos(2 * rtt + self.rng.below(rtt));
        base.checked_mul(1 << self.retry_doublings.min(16))
            .unwrap_or(self.hold)
            .min(self.hold)
    }

    fn finish_round(&mut self, now: Time) {
        let ignore_live = self.cfg.sabotage.ignore_live_leader;
        let decision = decide(&DecisionInput {
            slate: &self.slate,
            quorum: self.quorum,
            witness: &self.witness,
            ids: &self.ids,
            quiet: now < self.quiet_until,
            live_leader: if self.leader_live(now) && !ignore_live {
                self.leader
            } else {
                None
            },
            voted: (self.voted_term, self.voted_for),
            ignore_heard: self.cfg.sabotage.ignore_heard,
            successor: self.successor,
        });
        if let (Some(p), Decision::Vote { candidate, .. }) = (self.successor.take(), decision) {
            if p == candidate {
                self.counters.successor_votes += 1;
            }
        }
        // A round with a majority slate is worth retrying soon (its heard counts may just
        // have been stale); a round without one backs off, so a cut-off server stays quiet.
        // A majority slate in which every claim says INELIGIBLE (every server unhealthy,
        // drained or a witness) cannot elect anyone until one turns fit, which restarts
        // the rounds at once (on_fit): back off too, rather than repeat it every 2-3 RTT.
        // Not after this server's own resignation: it is eligible again in the next round
        // (its INELIGIBLE claim was for this one only), so that round must come soon.
        let all_ineligible = !self.resigned_last
            && (0..self.ids.len()).all(|i| self.slate.get(i).is_none_or(|c| c.ineligible));
        if self.slate.len() >= self.quorum && !all_ineligible {
            self.retry_doublings = 0;
        } else {
            self.retry_doublings = self.retry_doublings.saturating_add(1);
        }
        self.elector = ElectorState::Watching;
        self.slate.clear();
        self.resigned_last = false;
        let wait = self.retry_wait();
        self.elector_deadline = now + wait;
        match decision {
            Decision::Vote { term, candidate } => self.cast_vote(now, term, candidate),
            Decision::Abstain(why) => {
                self.counters.abstentions += 1;
                if why != Abstain::NoMajority {
                    debug!("round closed without a vote: {why:?}");
                }
            }
        }
    }

    fn cast_vote(&mut self, now: Time, term: u64, candidate: usize) {
        self.counters.votes += 1;
        self.voted_term = term;
        self.voted_for = Some(candidate);
        self.term = self.term.max(term);
        self.persist();
        debug!("voting for {} in term {term}", self.ids[candidate]);
        if candidate == self.me {
            // A round after its resignation chose this server: its votes count again.
            self.refuse_votes_upto = self.refuse_votes_upto.min(term.saturating_sub(1));
            // Delivered locally, but only once the vote is durable, like any other.
            self.held.push_back(Held::SelfVote(term));
            self.release(now);
        } else {
            let msg = self.message(
                term,
                Body::Vote {
                    candidate: self.ids[candidate],
                },
            );
            self.send(Dest::One(self.ids[candidate]), msg);
        }
    }

    fn on_elect(&mut self, now: Time, s: usize, claim: Claim) {
        if self.leader_live(now) && self.is_straggler(&claim) {
            return;
        }
        // A claim for a term we have reached opens no round: it comes from a round that
        // just closed, or from a server behind us, which our next LEAD or our own retry
        // timer (always armed without a leader) will bring along. Without this, the
        // tail of one round's claims opened the next round at every server.
        if self.elector == ElectorState::Watching && claim.term <= self.term {
            return;
        }
        self.slate.record(s, claim);
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
        self.decide_if_complete(now);
    }

    /// True once every server we can expect a claim from has made one: each server heard
    /// within K*HBT + HBT, except a leader whose hold has run out. Waiting the rest of
    /// the window could not change the slate, so the round may be decided now. Any slate
    /// is safe to decide on; this only saves up to RTT on every election, and makes a
    /// resignation's handoff nearly immediate (every server claims at once).
    fn slate_complete(&self, now: Time) -> bool {
        if self.slate.len() < self.quorum {
            return false;
        }
        // Only a converged round: every claim proposes the same term. A server catching
        // up on a backlog of old claims waits the window out, instead of deciding one
        // round per stale claim (and raising its term each time).
        let e = self.slate.round_term();
        if (0..self.ids.len()).any(|i| self.slate.get(i).is_some_and(|c| Some(c.term) != e)) {
            return false;
        }
        // A live leader that claims INELIGIBLE has resigned: its RESIGN, sent first, is
        // still in flight. Deciding now would abstain for it and split the round.
        if let Some(l) = self.leader.filter(|_| self.leader_live(now)) {
            if self.slate.get(l).is_some_and(|c| c.ineligible) {
                return false;
            }
        }
        let window = self.hold + self.cfg.heartbeat;
        let dead_leader = self.leader.filter(|_| !self.leader_live(now));
        (0..self.ids.len()).all(|i| {
            self.slate.get(i).is_some()
                || Some(i) == dead_leader
                || self
                    .last_heard(i)
                    .is_none_or(|t| now.saturating_since(t) > window)
        })
    }

    fn decide_if_complete(&mut self, now: Time) {
        if self.elector == ElectorState::Voting
            && !self.cfg.sabotage.full_window
            && self.slate_complete(now)
            && self.slate_has_eligible()
        {
            self.finish_round(now);
        }
    }

    /// True when some claim in the slate could be chosen. A round in which nobody is
    /// eligible (every server unhealthy or drained, say) is not decided early: it would
    /// end without a vote, so without raising the term, and every claim of that term
    /// arriving just after it (a duplicate, a late one) would open another round at
    /// once, whose claim did the same elsewhere: an ELECT storm at network speed. Left
    /// open for its window, a round absorbs them.
    fn slate_has_eligible(&self) -> bool {
        (0..self.ids.len()).any(|i| {
            self.slate.get(i).is_some_and(|c| {
                !c.ineligible
                    && !self.witness[i]
                    && (self.cfg.sabotage.ignore_heard || usize::from(c.heard) >= self.quorum)
            })
        })
    }

    /// True for a claim from a server that cannot be hearing our live leader: it proposes
    /// a term we are past, or (in our term) it is behind by at least max(K-1, 2) of the
    /// leader's LEADs (a follower whose hold expired missed K-1 at least; a healthy one
    /// is at most one behind, the LEAD in flight). Ignoring it is always safe (it only
    /// means we do not vote), and it keeps a cut-off or one-way-deaf follower from
    /// re-electing a healthy leader over and over: the leader's next LEAD it does hear
    /// brings it up to date.
    fn is_straggler(&self, claim: &Claim) -> bool {
        let (term, seq) = self.last_seen;
        let lag = u64::from(self.cfg.missed_heartbeats - 1).max(2);
        if claim.term > term.saturating_add(1) {
            // Its term is ahead of our leader's: it cannot accept our leader's LEADs, and
            // only a round (re-electing our leader in its term) can bring the two
            // together. Ahead of the leadership, not of our own term: a leader whose own
            // term ran ahead of the term it leads (it voted for itself in a round that
            // did not re-elect it) ignored such a claimant as a straggler for good, and
            // the claimant never followed again (swarm seed 75336 of 100,000).
            return false;
        }
        claim.term <= self.term
            || claim.last.0 < term
            || (claim.last.0 == term && claim.last.1.saturating_add(lag) <= seq)
    }

    /// The faith a LEAD carrying `hold_ms` earns: max(own K*HBT, its hold), exactly.
    fn faith_hold(&self, hold_ms: u32) -> Duration {
        self.hold.max(Duration::from_millis(u64::from(hold_ms)))
    }

    /// The ELECTOR's part of accepting a LEAD (from another server or from itself): the
    /// leader, its position, and faith until max(faith_until, now + hold). A later LEAD
    /// never shortens what an earlier one promised (SPEC section 5, WATCHING).
    fn watch_leader(&mut self, now: Time, s: usize, term: u64, seq: u64, hold: Duration) {
        if self.leader != Some(s) {
            self.counters.leader_changes += 1;
            if s != self.me {
                info!("following leader {} in term {term}", self.ids[s]);
            }
        }
        self.leader = Some(s);
        self.successor = None;
        self.faith_until = if self.cfg.sabotage.hold_replaced {
            now + hold
        } else {
            self.faith_until.max(now + hold)
        };
        self.last_seen = self.last_seen.max((term, seq));
        self.retry_doublings = 0;
        let round_over = match self.elector {
            ElectorState::Watching => true,
            ElectorState::Voting => self.slate.round_term().is_none_or(|e| term >= e),
        };
        if round_over {
            self.elector = ElectorState::Watching;
            self.slate.clear();
            self.elector_deadline = self.faith_until;
            // The round after a resignation is over (a leader followed): a server that
            // resigned is INELIGIBLE for that round only. Cleared in finish_round alone,
            // the flag outlived a round that a LEAD ended, and the next round, seconds
            // later, found this server INELIGIBLE for nothing.
            self.resigned_last = false;
        }
    }

    /// Updates the hold promise for a LEAD accepted at `now` that earns `hold` of faith
    /// (SPEC section 4): it grows at once, and shrinks to `hold` only once the faith
    /// owed for longer holds has run out to within `hold`. So at every moment the
    /// promise covers the faith still owed, and is never a lifetime maximum.
    fn update_promise(&mut self, now: Time, hold: Duration) {
        if hold >= self.promise || self.faith_until <= now + hold {
            if hold < self.promise {
                debug!("hold promise shrinks from {:?} to {hold:?}", self.promise);
            }
            self.promise = hold;
        }
    }

    // ----- CANDIDATE ----------------------------------------------------------------

    fn on_lead(&mut self, now: Time, s: usize, term: u64, seq: u64, hold_ms: u32) {
        if term < self.term {
            self.counters.stale_leads += 1;
            return;
        }
        // Released by a RESIGN (no leader, its position recorded): a LEAD at or before
        // that position was sent before the RESIGN and overtaken by it. Accepting it
        // would bring back faith in a leadership that has ended, and this server would
        // abstain in the round that picks the successor (a yield to a named server
        // then fell back to the usual choice; the swarm found it by reordering).
        if self.leader.is_none() && (term, seq) <= self.last_seen {
            self.counters.stale_leads += 1;
            return;
        }
        if let Some(l) = &self.leadership {
            if term == l.term {
                error!(
                    "leader {} also claims term {term}: stepping down",
                    self.ids[s]
                );
                self.counters.dual_leader += 1;
                self.push_event(Event::DualLeader {
                    term,
                    other: self.ids[s],
                });
            } else {
                info!(
                    "leader {} of term {term} supersedes term {}",
                    self.ids[s], l.term
                );
            }
            self.step_down(now);
        }
        self.term = term;
        let hold = self.faith_hold(hold_ms);
        self.update_promise(now, hold);
        // The ACK below leaves only once the term and the promise are on disk.
        self.persist();
        self.watch_leader(now, s, term, seq, hold);
        self.tally.clear();
        // UNFIT also when this server hears too few servers to be elected: a leader
        // that counted it fit would hand over to a server no round can choose.
        // Not set for being a witness (a witness is never a successor anyway, and older
        // builds drop flagged ACKs), but set during the startup quiet period, when this
        // server could not take over (it may not vote).
        let unfit = !self.healthy
            || self.drained
            || now < self.quiet_until
            || usize::from(self.heard_count(now)) < self.quorum;
        let ack = self.message(term, Body::Ack { seq, unfit });
        // To the leader only: nobody else uses it, and idle traffic stays linear in
        // the number of servers (the LEAD's `alive` map tells the others who lives).
        let dest = if self.cfg.sabotage.ack_to_all {
            Dest::All
        } else {
            Dest::One(self.ids[s])
        };
        self.send(dest, ack);
    }

    /// A LEAD with RESIGN: releases this server only if it ends the leadership it
    /// follows (same leader, same term, a seq above the last seen). A late or duplicated
    /// RESIGN of any other leadership is ignored (SPEC section 5).
    fn on_resign(&mut self, now: Time, s: usize, term: u64, seq: u64, successor: u16) {
        let follows = if self.cfg.sabotage.volatile_led {
            term >= self.term && self.leader.is_none_or(|l| l == s)
        } else {
            self.leader == Some(s) && self.last_seen.0 == term && seq > self.last_seen.1
        };
        if !follows || self.leadership.is_some() {
            debug!(
                "ignored a RESIGN of term {term} seq {seq} from {} (not the followed leadership)",
                self.ids[s]
            );
            return;
        }
        self.successor = self.index[usize::from(successor.min(255))].map(usize::from);
        if self.successor == Some(self.me) {
            self.named_at = Some(now);
        }
        match self.successor {
            Some(p) => info!(
                "leader {} resigned term {term}, handing over to server {}",
                self.ids[s], self.ids[p]
            ),
            None => info!("leader {} resigned term {term}", self.ids[s]),
        }
        self.term = self.term.max(term);
        self.last_seen = self.last_seen.max((term, seq));
        self.release_leader(now);
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
        // A round held open for this resignation may now be complete.
        self.decide_if_complete(now);
    }

    fn on_vote(&mut self, now: Time, voter: usize, term: u64) {
        if term < self.term
            || self.witness[self.me]
            || self.resign_pending()
            || term <= self.refuse_votes_upto
        {
            return;
        }
        let count = self
            .tally
            .record(voter, term, self.cfg.sabotage.stale_tallies);
        if count < self.quorum {
            return;
        }
        match &mut self.leadership {
            // Never lead a term already led (persisted, so across restarts too): late or
            // duplicated VOTEs must not revive a leadership that was given up, whose
            // RESIGN may already have released the followers.
            None if term <= self.led_term => {}
            None => {
                self.led_term = term;
                self.term = term;
                self.persist();
                self.leadership = Some(Leadership::new(term, self.ids.len(), now));
                self.counters.elected += 1;
                self.push_event(Event::Elected { term });
                info!("elected leader of term {term}");
                self.send_lead(now);
            }
            // Re-elected: acknowledgements of the old term still count, because those
            // voters will not vote for anyone else while they hear us. The lease goes on
            // in the old term until led_term = term is on disk: reported at once, the new
            // term could be led a second time by a restart that the write did not
            // survive (late VOTEs of that term elect it again; swarm seed 31270).
            Some(l) if term > l.term && term > self.led_term => {
                self.led_term = term;
                self.term = term;
                self.persist();
                self.held.push_back(Held::Reelect(term));
                self.release(now);
            }
            Some(_) => {}
        }
    }

    /// A re-election whose led_term is durable now takes effect: LEADs of the new term,
    /// reported as the term led.
    fn apply_reelection(&mut self, now: Time, term: u64) {
        let Some(l) = self.leadership.as_mut().filter(|l| term > l.term) else {
            return;
        };
        l.term = term;
        l.seq = 0;
        self.push_event(Event::Elected { term });
        debug!("re-elected in term {term}");
        self.send_lead(now);
    }

    fn on_ack(&mut self, s: usize, term: u64, seq: u64) {
        let quorum = self.quorum;
        if let Some(l) = &mut self.leadership {
            if l.record_ack(s, term, seq) {
                l.update_lease(quorum);
            } else {
                self.counters.unmatched_acks += 1;
            }
        }
    }

    fn send_lead(&mut self, now: Time) {
        let hold = self.hold;
        // The leader hears itself: its own faith and hold promise cover each LEAD it
        // sends (its lease counts itself as acknowledged), on disk before it leaves.
        self.update_promise(now, hold);
        self.persist();
        let (term, seq) = {
            let l = self
                .leadership
                .as_mut()
                .expect("send_lead needs leadership");
            l.seq += 1;
            l.next_lead_at = now + self.cfg.heartbeat;
            l.record_send(self.me, now, self.lease_len);
            l.update_lease(self.quorum);
            (l.term, l.seq)
        };
        self.send_lead_msg(term, seq, false, None);
        // A healthy leader never starts a round against itself.
        self.watch_leader(now, self.me, term, seq, hold);
    }

    /// Forgets the heartbeats of `term` still waiting for a write: that leadership
    /// has ended, and a LEAD leaving later would promise a hold this server may no
    /// longer have on disk (the swarm found one after a reload shrank the promise).
    /// Not sending a LEAD is always safe.
    fn drop_held_leads(&mut self, term: u64) {
        self.held.retain(|h| {
            !matches!(h, Held::Send(_, m) if m.term == term
                && matches!(m.body, Body::Lead { resign: false, .. }))
        });
    }

    fn send_lead_msg(&mut self, term: u64, seq: u64, resign: bool, to: Option<usize>) {
        // Rounded up: a follower's faith must never end before the lease the leader
        // computes from its own exact hold (issue 10, finding 2).
        let hold_ms = if self.cfg.sabotage.hold_rounded_down {
            ms_floor(self.hold)
        } else {
            ms_ceil(self.hold)
        };
        let msg = self.message(
            term,
            Body::Lead {
                seq,
                hold_ms,
                resign,
                successor: to.map_or(0, |i| self.ids[i]),
                unfit: self.unfit(),
                alive: self.alive(),
            },
        );
        self.send(Dest::All, msg);
    }

    /// Sends the first RESIGN of a waiting handoff and schedules the second. Followers
    /// are released only now, once no local command can still run.
    fn send_resign(&mut self, now: Time) {
        let Resign::Waiting { term, seq, to, .. } = self.resign else {
            return;
        };
        // A restarted server's previous incarnation may have reported a lease that runs
        // until its quiet period ends at the latest (its last LEAD left before the
        // restart, and the quiet period, max(K*HBT, the hold promise on disk), covers
        // any lease it could have computed). A RESIGN releases followers from the faith
        // that lease rests on, so it waits for the quiet period too. Without this, a
        // restart that live-leader VOTEs re-elected at once, followed by a handover (a
        // check that has not risen yet), let the next lease overlap the old one.
        if now < self.quiet_until && !self.cfg.sabotage.resign_early {
            info!("the RESIGN of term {term} waits for the quiet period after the restart");
            self.resign = Resign::Waiting {
                term,
                seq,
                until: self.quiet_until,
                to,
            };
            return;
        }
        self.send_lead_msg(term, seq + 1, true, to);
        self.resign = Resign::Again {
            term,
            seq: seq + 2,
            at: now + self.cfg.heartbeat / 10,
            to,
        };
        // Its own vote in the round that follows goes to the successor too.
        self.successor = to;
        self.push_event(Event::Resigned { term });
        info!("RESIGN of term {term} sent");
        self.resigned_last = true;
        // VOTEs of a round already in flight (cast for this server as the live leader)
        // must not make it lead again at once: a yield hands over. Volatile on purpose:
        // leading such a term would be safe (it never led it), only not a handoff, and
        // a persisted mark cost a whole extra round after a restart (the swarm's L1).
        self.refuse_votes_upto = self.refuse_votes_upto.max(term.saturating_add(1));
        if self.leader == Some(self.me) {
            self.release_leader(now);
        }
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
    }

    fn step_down(&mut self, now: Time) {
        let Some(l) = self.leadership.take() else {
            return;
        };
        self.drop_held_leads(l.term);
        self.counters.leader_changes += 1;
        self.push_event(Event::SteppedDown { term: l.term });
        if self.leader == Some(self.me) {
            // Its lease has ended (or a newer leader superseded it): its own vote is free.
            self.release_leader(now);
        }
        self.tally.clear();
        if self.elector == ElectorState::Watching {
            let wait = self.retry_wait();
            self.elector_deadline = self.elector_deadline.min(now + wait);
        }
    }

    // ----- invariants ---------------------------------------------------------------

    fn invariant(&self, ok: bool, what: std::fmt::Arguments<'_>) {
        if ok {
            return;
        }
        if self.cfg.strict {
            panic!("server {}: invariant broken: {what}", self.cfg.id);
        }
        error!("invariant broken (a bug; please report it): {what}");
    }

    /// The core's invariants, checked after every input (issue 10).
    fn check_invariants(&mut self, now: Time) {
        self.invariant(
            self.term >= self.checked_term,
            format_args!("term fell from {} to {}", self.checked_term, self.term),
        );
        self.checked_term = self.term;
        self.invariant(
            self.voted_term <= self.term,
            format_args!("voted_term {} above term {}", self.voted_term, self.term),
        );
        if let Some(l) = &self.leadership {
            if let Some(u) = l.lease_until() {
                self.invariant(
                    u <= now + l.longest_lease(),
                    format_args!(
                        "lease ends {:?} after now + its length",
                        u.saturating_since(now)
                    ),
                );
            }
            self.invariant(
                !l.regressed(),
                format_args!("the lease end of term {} moved earlier", l.term),
            );
            self.invariant(
                l.term <= self.led_term,
                format_args!("leads term {} above led_term {}", l.term, self.led_term),
            );
        }
        // The promise covers the faith still owed (what a restart must stay quiet for).
        let owed = self.faith_until.saturating_since(now);
        self.invariant(
            self.cfg.sabotage.hold_replaced || self.promise >= owed,
            format_args!(
                "hold promise {:?} below the faith owed {owed:?}",
                self.promise
            ),
        );
        self.invariant(
            self.requested.is_some() || self.held.is_empty(),
            format_args!("outputs held with no write pending"),
        );
    }

    /// Checks, as a datagram leaves, that the state it reflects is durable.
    fn check_durable_for(&self, msg: &Message) {
        if self.cfg.sabotage.any() {
            return;
        }
        let d = &self.durable;
        self.invariant(
            self.requested.is_none(),
            format_args!("a datagram left while a write was pending"),
        );
        match msg.body {
            Body::Vote { candidate } => self.invariant(
                d.voted_term >= msg.term && (d.voted_term > msg.term || d.voted_for == candidate),
                format_args!("VOTE of term {} left before it was durable", msg.term),
            ),
            Body::Lead {
                hold_ms, resign, ..
            } => {
                self.invariant(
                    resign || d.led_term >= msg.term,
                    format_args!("LEAD of term {} left before led_term was durable", msg.term),
                );
                self.invariant(
                    resign || d.hold_ms >= hold_ms,
                    format_args!("LEAD hold {hold_ms} ms above the durable promise"),
                );
            }
            Body::Ack { .. } => self.invariant(
                d.term >= msg.term,
                format_args!("ACK of term {} left before the term was durable", msg.term),
            ),
            Body::Elect { .. } => {}
        }
    }

    // ----- persistence and output ---------------------------------------------------

    fn durable_view(&self) -> Durable {
        let mut d = Durable {
            term: self.term,
            voted_term: self.voted_term,
            voted_for: self.voted_for.map_or(0, |i| self.ids[i]),
            led_term: self.led_term,
            hold_ms: ms_ceil(self.promise),
            drained: self.drained,
        };
        if self.cfg.sabotage.forget_votes {
            d.term = self.durable.term;
            d.voted_term = self.durable.voted_term;
            d.voted_for = self.durable.voted_for;
        }
        if self.cfg.sabotage.volatile_led {
            d.led_term = self.durable.led_term;
        }
        d
    }

    /// Asks for the state to be written if it differs from what was last asked for.
    fn persist(&mut self) {
        let want = self.durable_view();
        if want != self.requested.unwrap_or(self.durable) {
            self.requested = Some(want);
            self.out.push_back(Output::Persist(want));
        }
    }

    fn send(&mut self, dest: Dest, msg: Message) {
        if self.requested.is_some() || !self.held.is_empty() {
            self.held.push_back(Held::Send(dest, msg));
        } else {
            self.emit_send(dest, msg);
        }
    }

    fn emit_send(&mut self, dest: Dest, msg: Message) {
        self.check_durable_for(&msg);
        if let (Dest::One(c), Body::Vote { .. }) = (dest, msg.body) {
            self.push_event(Event::Voted {
                term: msg.term,
                candidate: c,
            });
        }
        self.out.push_back(Output::Send { dest, msg });
    }

    fn push_event(&mut self, e: Event) {
        self.out.push_back(Output::Event(e));
    }

    fn message(&self, term: u64, body: Body) -> Message {
        Message {
            sender: self.cfg.id,
            fingerprint: self.cfg.fingerprint,
            term,
            body,
        }
    }
}
