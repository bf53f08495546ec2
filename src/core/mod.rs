//! The protocol core: both machines of one server, driven by `handle_*` and drained by
//! `poll_output` (SPEC sections 4 to 6).
//!
//! A `Node` never reads a clock, touches a socket or a file, or draws from a global
//! random generator: `now` comes in with every call, randomness from the seed, and
//! everything it wants done comes out of `poll_output`. State that must be durable is
//! asked for with `Output::Persist`; every datagram queued after such a request is held
//! back until the driver confirms the write with `handle_persisted`.
//!
//! One sub-state per file, with the handlers that change it: `types` (what goes in and
//! out), [`elector`] (WATCHING and VOTING: claims, the vote, faith in a leader),
//! `decision` (the pure choice of a round), [`candidate`] (the tally board; FOLLOWER
//! and LEADER, the moves between them), `leadership` (a leader's LEADs,
//! acknowledgements and lease), `resign` (a planned handoff), `fitness` (health,
//! drain, preference, when to hand over), `output` (write before send: held outputs,
//! persistence), `timers` (the table of deadlines and their firing), `invariants`
//! (checked after every input), `peers` (one struct per other server). This file
//! holds the `Node`, its inputs and its views.

pub mod candidate;
mod decision;
pub mod elector;
mod fitness;
mod invariants;
mod leadership;
mod output;
mod peers;
mod resign;
mod timers;
mod types;

pub use leadership::LEASE_MARGIN;
pub use timers::Timer;
pub use types::*;

use crate::rng::SplitMix64;
use crate::time::Time;
use crate::wire::{Body, Message, PeerSet};
use candidate::{LeadIn, Tally};
use elector::{Claim, ElectorState, Slate};
use leadership::{Leadership, lease_len};
use log::{debug, error, info, warn};
use output::Held;
use peers::Peer;
use resign::Resign;
use std::collections::VecDeque;
use std::time::Duration;

/// A node's timers saved before a reload (`Node::timers_before`).
#[derive(Clone, Debug)]
pub struct TimersBefore {
    cfg: NodeConfig,
    staged: Option<NodeConfig>,
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
    /// Put before every log line ("group orders: "; empty for a single group).
    log_tag: String,

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
    /// From when this server, while unhealthy (not drained, not stopping), may be
    /// elected as a last resort; `None`: not at all (SPEC section 13, `set_last_resort`).
    last_resort_from: Option<Time>,
    /// The position of the first LEAD this leader sent after it turned unfit: a health or
    /// drain handover goes only to a server that acknowledged it (or a later one) as fit,
    /// so a fault shared by every server, noticed a moment later by some, is not handed
    /// to a server that is already failing.
    unfit_from: (u64, u64),
    /// Until when an unfit leader collects the ACKs of that LEAD before it picks a
    /// successor (RTT after it left; sooner once every live server has answered), so
    /// the successor is the best fit server, not the first to answer.
    unfit_wait: Option<Time>,
    /// A preemption about to hand over: the position of the LEAD this leader sent to
    /// ask every follower, the server it would hand over to, and until when it waits
    /// for the answers of the servers preferred to that one (RTT; sooner once every
    /// live one has answered). A handover decided on reports a heartbeat old went to
    /// a server less preferred than one that had just turned fit, and the seat moved
    /// twice (swarm seed 12914).
    preempt_ask: Option<PreemptAsk>,
    /// When a RESIGN named this server as successor: its preempt-delay counts from then,
    /// so `yield --to` is not undone at once by a preemption (issue 11).
    named_at: Option<Time>,
    /// The successor named by the RESIGN that released this server, for the round it
    /// opened.
    successor: Option<usize>,
    /// The round under way (or the next) was opened by the followed leader's RESIGN:
    /// no last resort in it (`DecisionInput::after_resign`).
    resign_round: bool,

    leader: Option<usize>,
    /// No vote for anyone but `leader` before this time (SPEC section 5).
    faith_until: Time,
    last_seen: (u64, u64),
    /// Per server, what this server knows of it (indexed like `ids`).
    peers: Vec<Peer>,

    elector: ElectorState,
    elector_deadline: Time,
    slate: Slate,
    retry_doublings: u32,
    resigned_last: bool,

    tally: Tally,
    /// The UNFIT flag of this server's last ACK (sparse acknowledgements: a follower
    /// not asked to acknowledge a LEAD still does when its fitness changed). Kept per
    /// node, not per leadership: a new leadership asks everyone for its first
    /// `SPARSE_AFTER` heartbeats, so every follower's flag reaches it first anyway.
    last_ack_unfit: Option<bool>,
    /// The hold, in ms rounded up, of the last LEAD this server accepted as a
    /// follower: its ACK may leave only once a hold that long is on disk (checked at
    /// each ACK, `check_durable_for`).
    ack_hold_ms: u32,
    leadership: Option<Leadership>,
    resign: Resign,

    quiet_until: Time,
    last_now: Time,
    /// The term when the last input was handled (invariant: a term never falls).
    checked_term: u64,
    durable: Durable,
    requested: Option<Durable>,
    /// A write asked for since the last time none was pending changes more than the
    /// drain (`Node::sends_wait`): datagrams wait until every write is confirmed.
    write_holds: bool,
    /// The lowest hold asked for since no write was pending (`min_hold_pending`).
    pending_min_hold: u32,
    /// A reload's timers whose hold is longer than the one on disk: they take effect
    /// once a write of that hold is confirmed (`Node::set_timers`); until then the
    /// timers in force, and their hold, go on.
    staged: Option<NodeConfig>,
    held: VecDeque<Held>,
    out: VecDeque<Output>,
    counters: Counters,
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
        // The first round waits for the quiet period of every server that started
        // within K*HBT of this one (SPEC section 14, cold start by preference): a server
        // still quiet makes no claim, so a round opened before its quiet period ended
        // could not choose it, and the first leader would not be the preferred one. So
        // not at 5*HBT but at quiet + min(quiet, 5*HBT) (never before 5*HBT): with K <= 5
        // every server started within K*HBT has claimed by then. L1 still holds: from
        // the moment a majority has run for K*HBT, the first timer is at most 5*HBT away.
        let mut first_round = (quiet + quiet.min(cfg.heartbeat * 5)).max(cfg.heartbeat * 5);
        if cfg.sabotage.late_first_round {
            first_round += cfg.heartbeat * 3;
        }
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
            log_tag: String::new(),
            term,
            voted_term: durable.voted_term,
            voted_for,
            led_term: durable.led_term,
            refuse_votes_upto: 0,
            promise,
            healthy: true,
            drained: durable.drained,
            last_resort_from: Some(now),
            unfit_from: (0, 0),
            unfit_wait: None,
            preempt_ask: None,
            named_at: None,
            successor: None,
            resign_round: false,
            leader: None,
            faith_until: Time::ZERO,
            last_seen: (0, 0),
            peers: vec![Peer::default(); n],
            elector: ElectorState::Watching,
            elector_deadline: now + first_round,
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
            write_holds: false,
            pending_min_hold: 0,
            staged: None,
            held: VecDeque::new(),
            last_ack_unfit: None,
            ack_hold_ms: 0,
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
        self.peers[s].heard_at = Some(now);
        if let Body::Ack { seq, unfit } = msg.body {
            // An ACK does not send the next LEAD (issue 25): a leader that reads at
            // the heartbeat reads the ACKs of its last LEAD at the tick where the next
            // one is due; had the first of them fired that LEAD's timer, the others
            // would have been judged after it, a LEAD late, and its acknowledgements
            // never looked complete (its sparse acknowledgements never started in the
            // daemon). Every other due timer runs first, as for any datagram; the
            // heartbeat runs when the driver runs the timers after its reads
            // (`handle_timeout`), microseconds later.
            self.on_time_but(now, Some(Timer::Heartbeat));
            self.on_ack_msg(now, s, msg.term, seq, unfit);
            self.consider_handover(now);
            self.check_invariants(now);
            return Ok(());
        }
        self.on_time(now);
        match msg.body {
            Body::Lead {
                seq,
                hold_ms,
                resign,
                successor,
                unfit: lead_unfit,
                alive,
                acks,
            } => {
                if resign {
                    self.on_resign(now, s, msg.term, seq, successor);
                } else {
                    let newest = msg.term >= self.term && (msg.term, seq) > self.last_seen;
                    if newest && !self.cfg.sabotage.ignore_alive {
                        // Before the ACK leaves: its UNFIT flag counts the servers heard.
                        self.vouch(now, s, alive);
                    }
                    let lead = LeadIn {
                        term: msg.term,
                        seq,
                        hold_ms,
                        asked: acks,
                    };
                    self.on_lead(now, s, lead);
                    if newest && self.leader == Some(s) {
                        self.note_fitness(now, s, !lead_unfit);
                        self.peers[s].report = Some((now, !lead_unfit));
                    }
                }
            }
            Body::Elect {
                last_term,
                last_seq,
                priority,
                heard,
                ineligible,
                last_resort,
            } => {
                let claim = Claim {
                    term: msg.term,
                    last: (last_term, last_seq),
                    priority,
                    heard,
                    ineligible,
                    last_resort: ineligible && last_resort,
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
            // Handled above, before the timers.
            Body::Ack { .. } => {}
        }
        self.consider_handover(now);
        self.check_invariants(now);
        Ok(())
    }

    /// An ACK from server `s` of LEAD (term, seq).
    fn on_ack_msg(&mut self, now: Time, s: usize, term: u64, seq: u64, unfit: bool) {
        // Only an ACK of the newest LEAD, or the one before, tells how the sender is
        // now: a late copy of an old ACK must not make a failing server look fit (issue
        // 11 review).
        let current = match &self.leadership {
            Some(l) => term == l.term && seq.saturating_add(1) >= l.seq,
            None => (term, seq.saturating_add(1)) >= self.last_seen,
        };
        if current {
            self.peers[s].ack_pos = self.peers[s].ack_pos.max((term, seq));
            self.note_fitness(now, s, !unfit);
            self.peers[s].report = Some((now, !unfit));
            self.peers[s].fit_ack = if unfit {
                (0, 0)
            } else {
                self.peers[s].fit_ack.max((term, seq))
            };
        }
        self.on_ack(s, term, seq)
    }

    /// Sets what every log line of this node starts with (the daemon names the
    /// election group when it runs several).
    pub fn set_log_tag(&mut self, tag: &str) {
        self.log_tag = tag.to_string();
    }

    /// Notes that server `id` was heard at `now` through a datagram that carried nothing
    /// for this group (SPEC section 4: heard_at is set by any valid datagram; with
    /// election groups one datagram carries other groups' messages). Only the heard
    /// counts of claims and the `alive` map use it; no vote, faith or lease does.
    pub fn handle_heard(&mut self, now: Time, id: u16) {
        if let Some(s) = self.index[usize::from(id.min(255))].map(usize::from) {
            if s != self.me {
                self.peers[s].heard_at = Some(self.peers[s].heard_at.map_or(now, |t| t.max(now)));
                self.refresh_claim(now);
            }
        }
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

    /// Starts a round now (the `elect` command).
    pub fn handle_elect(&mut self, now: Time) {
        self.on_time(now);
        if self.elector == ElectorState::Watching {
            self.enter_voting(now);
        }
        self.check_invariants(now);
    }

    /// Applies new timers (SIGHUP). Each LEAD carries the hold it promised and keeps the
    /// lease length it was sent with, and followers never shorten a promise already
    /// made, so the change is safe at any moment; running timers keep their deadlines
    /// and the new values apply from the next one.
    ///
    /// A hold longer than the one on disk must be durable before a LEAD carries it
    /// (SPEC section 4). Such timers wait: the promise grows to the new hold at once and
    /// is written, and the timers take effect when that write is confirmed
    /// (`handle_persisted`). Until then the timers in force go on, with the hold already
    /// on disk, so nothing that leaves waits for this write: a leader whose disk stalls
    /// keeps sending its heartbeats and keeps its lease. Applied at once, the first LEAD
    /// with the longer hold waited for the write and held every later datagram: on a
    /// stalled disk the lease lapsed (tests/health_sim.rs,
    /// `a_reload_to_longer_timers_on_a_stalled_disk_keeps_the_lease`).
    pub fn set_timers(
        &mut self,
        heartbeat: Duration,
        rtt: Duration,
        k: u32,
        drift_ppm: u32,
        max_hold: Duration,
    ) -> Result<(), ConfigError> {
        let cfg = self.timers_cfg(heartbeat, rtt, k, drift_ppm, max_hold)?;
        let hold = cfg.hold();
        // Not longer than the hold on disk, or than the one in force (whose LEADs wait
        // for their own write as before): nothing to wait for.
        // On disk: the lowest hold that may be there once the pending writes land (a
        // write that lowered it may still be in flight: second review).
        let covered = ms_ceil(hold) <= self.min_hold_pending().max(ms_ceil(self.hold));
        if covered || self.cfg.sabotage.reload_holds_sends {
            self.staged = None;
            self.apply_timers(cfg);
            return Ok(());
        }
        debug!(
            "{}new timers wait for their hold promise ({hold:?}) to be on disk",
            self.log_tag
        );
        self.staged = Some(cfg);
        self.promise = self.promise.max(hold);
        self.persist_ahead();
        self.check_invariants(self.last_now);
        Ok(())
    }

    /// The timers in force and any waiting for their hold to be written: what a
    /// reload refused after `set_timers` puts back with `put_back_timers`.
    pub fn timers_before(&self) -> TimersBefore {
        TimersBefore {
            cfg: self.cfg.clone(),
            staged: self.staged.clone(),
        }
    }

    /// Puts back what `timers_before` saved, in the same turn (those timers were in
    /// force a moment ago, and those waiting wait again; the promise grown for them
    /// stays, which only makes a restart wait longer).
    pub fn put_back_timers(&mut self, before: TimersBefore) {
        self.apply_timers(before.cfg);
        self.staged = before.staged;
    }

    fn timers_cfg(
        &self,
        heartbeat: Duration,
        rtt: Duration,
        k: u32,
        drift_ppm: u32,
        max_hold: Duration,
    ) -> Result<NodeConfig, ConfigError> {
        let cfg = NodeConfig {
            heartbeat,
            rtt,
            missed_heartbeats: k,
            drift_ppm,
            max_hold,
            ..self.cfg.clone()
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Puts `cfg`'s timers in force.
    fn apply_timers(&mut self, cfg: NodeConfig) {
        self.hold = cfg.hold();
        self.lease_len = lease_len(self.hold, cfg.drift_ppm);
        self.cfg = cfg;
    }

    /// Staged timers take effect once their hold is durable.
    pub(super) fn apply_staged(&mut self) {
        let ready = self
            .staged
            .as_ref()
            .is_some_and(|c| ms_ceil(c.hold()) <= self.min_hold_pending());
        if ready {
            if let Some(cfg) = self.staged.take() {
                debug!("{}new timers in force, their hold on disk", self.log_tag);
                self.apply_timers(cfg);
            }
        }
    }

    /// The lease length and heartbeat a reload asked for (in force, or waiting for
    /// their hold to be written): what a supervisor's grace must fit.
    pub fn timers_asked(&self) -> (Duration, Duration) {
        match &self.staged {
            Some(c) => (lease_len(c.hold(), c.drift_ppm), c.heartbeat),
            None => (self.lease_len, self.cfg.heartbeat),
        }
    }

    /// True while a reload's timers wait for their hold to be written.
    pub fn timers_waiting(&self) -> bool {
        self.staged.is_some()
    }

    /// The hold the promise may not shrink below: staged timers' (their write is asked
    /// for ahead of any LEAD that carries it).
    pub(super) fn promise_floor(&self) -> Duration {
        self.staged.as_ref().map_or(Duration::ZERO, |c| c.hold())
    }

    // ----- views --------------------------------------------------------------------

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
            acks_in_turn: lease.map(|l| l.asks_some()),
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

    /// The round-trip bound now in force (a reload's waits with its other timers).
    pub fn rtt(&self) -> Duration {
        self.cfg.rtt
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
}
