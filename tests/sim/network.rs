//! The network: datagrams from `poll_transmit` routed to their destinations, delayed
//! per link, lost, duplicated, aimed at lease ends, redelivered late or flushed from
//! the history, held back by a filter or a per-link hold of one message kind, cut and
//! partitioned; and delivery into the receiving host.

use super::acks::{AckLoss, Fate};
use super::turns::{LeadFate, LeadLoss};
use super::{Ev, Real, Sim, ms, tag};
use electd::host::Transmit;
use electd::node::Dest;
use electd::wire;
use std::collections::VecDeque;
use std::rc::Rc;

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

/// How many sent datagrams the simulator remembers for redelivery.
const HISTORY: usize = 4096;

/// The network's state: which links are cut, what was sent recently, and what is
/// held back or held on which link.
pub(super) struct Network {
    /// cut[from][to]: datagrams from `from` to `to` are dropped.
    cut: Vec<Vec<bool>>,
    /// Every datagram sent recently: (real time, from, to, bytes), for late redelivery.
    history: VecDeque<(Real, usize, usize, Rc<Vec<u8>>)>,
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
    /// The adversary on one leader's ACKs (`Sim::lose_acks`), while it runs.
    pub(super) ack_loss: Option<AckLoss>,
    /// The adversary on one leader's LEADs and its record (`Sim::lose_leads`).
    pub(super) lead_loss: Option<LeadLoss>,
}

impl Network {
    /// `n` hosts, every link up, nothing sent or held.
    pub(super) fn new(n: usize) -> Network {
        Network {
            cut: vec![vec![false; n]; n],
            history: VecDeque::with_capacity(HISTORY),
            filter: None,
            held_back: Vec::new(),
            lead_holds: vec![vec![[None; 4]; n]; n],
            any_hold: false,
            ack_loss: None,
            lead_loss: None,
        }
    }
}

impl Sim {
    /// The network hands `bytes` from `from` to the daemon on `to`: into its host (the
    /// daemon's own decode, fan-out to groups and `handle_heard`), then its outputs.
    pub(super) fn deliver(&mut self, to: usize, from: usize, bytes: &[u8]) {
        if self.hand_in(to, from, bytes, false) {
            self.drive(to);
        }
    }

    /// Hands `bytes` from `from` to the host on `to`: `waited`, as a datagram that
    /// waited in the socket for this wakeup (`handle_waiting_datagram`: flushed by the
    /// wakeup's timers or flush, which the caller runs next), else as one that woke it
    /// (`handle_datagram`, flushed at once). False when `to` is down.
    fn hand_in(&mut self, to: usize, from: usize, bytes: &[u8], waited: bool) -> bool {
        if !self.hosts[to].up() {
            return false;
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
        self.disk_on_receive(to, bytes);
        let sabotage = self.host_sabotage(to);
        let h = &mut self.hosts[to];
        let local = h.clock.local(self.now);
        if h.up() && h.nodes().all(|n| n.leads().is_some()) {
            self.stats.leader_received += 1;
        }
        let Some(sh) = h.shell.as_mut() else {
            return false;
        };
        sh.set_sabotage(sabotage);
        let src = std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + from as u16));
        let ok = if waited {
            sh.handle_waiting_datagram(local, src, bytes)
        } else {
            sh.handle_datagram(local, src, bytes).expect("host")
        };
        if ok {
            self.delivered += 1;
        } else {
            self.dropped += 1;
        }
        true
    }

    /// One datagram of `host` to its destination: every other server, or one.
    pub(super) fn route(&mut self, host: usize, t: Transmit) {
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
            Dest::Only(set) => set.iter().map(|id| self.idx(id)).collect(),
        };
        let elections = t.kinds[wire::Kind::Elect as usize] + t.kinds[wire::Kind::Vote as usize];
        let framing = wire::Framing::of(&t.bytes).index();
        self.stats.framings[framing] += 1;
        if elections == 0 {
            self.stats.heartbeat_framings[framing] += 1;
        }
        self.stats.probes += u64::from(t.kinds == [0; 5]);
        self.stats.acks_sent += t.kinds[wire::Kind::Ack as usize];
        if t.kinds[wire::Kind::Lead as usize] > 0 {
            // Issue 25, sparse acknowledgements: how many LEADs asked only some
            // followers (a keyed datagram does not decode here and is not counted).
            for e in decode_all(&t.bytes) {
                if let wire::Body::Lead {
                    resign: false,
                    acks,
                    ..
                } = e.msg.body
                {
                    self.stats.leads_sent += 1;
                    self.stats.sparse_leads += u64::from(!acks.is_empty());
                }
            }
        }
        self.election_sent += elections * tos.len() as u64;
        if t.kinds[wire::Kind::Lead as usize] > 0 {
            self.ack_loss_on_send(host, &t.bytes);
        }
        self.lead_loss_on_send(host, &t.to, &t.bytes);
        if t.kinds[wire::Kind::Lead as usize] + t.kinds[wire::Kind::Ack as usize] > 0 {
            self.disk_on_send(host, &t.bytes);
        }
        let bytes = Rc::new(t.bytes);
        for to in tos {
            self.transmit(host, to, &bytes);
        }
        self.lead_loss_sent();
    }

    /// Schedules the delivery of a copy at `at` (L-turn's record notes its delay).
    fn deliver_at(&mut self, at: Real, from: usize, to: usize, bytes: &Rc<Vec<u8>>) {
        self.lead_loss_note_delay(at - self.now);
        self.push(
            at,
            Ev::Deliver {
                to,
                from,
                bytes: Rc::clone(bytes),
            },
        );
    }

    /// One datagram onto the link `from` -> `to`: remembered, maybe sent again late,
    /// held back, cut or lost, held by kind, aimed, duplicated, delayed.
    pub(super) fn transmit(&mut self, from: usize, to: usize, bytes: &Rc<Vec<u8>>) {
        self.sent += 1;
        if self.net.history.len() == HISTORY {
            self.net.history.pop_front();
        }
        self.net
            .history
            .push_back((self.now, from, to, Rc::clone(bytes)));
        if self.opts.late_pm > 0 && self.rng.below(1000) < u64::from(self.opts.late_pm) {
            // A genuine copy that some queue held on to: it arrives long after.
            let at = self.now + 1 + self.rng.below(self.opts.late_max.max(1));
            self.stats.late += 1;
            self.deliver_at(at, from, to, bytes);
        }
        if let Some(f) = &self.net.filter {
            let (fid, tid) = (self.hosts[from].id, self.hosts[to].id);
            if decode_all(bytes).iter().any(|e| f(fid, tid, &e.msg)) {
                self.net.held_back.push((from, to, Rc::clone(bytes)));
                return;
            }
        }
        if self.net.cut[from][to] || self.rng.below(1000) < u64::from(self.opts.loss_pm) {
            return;
        }
        let mut extra = 0;
        // The ACK-loss adversary (`Sim::lose_acks`), while it runs.
        match self.ack_loss_fate(from, to, bytes) {
            Some(Fate::Lost) => return,
            Some(Fate::Late(d)) => extra = d,
            None => {}
        }
        // The LEAD-loss adversary (`Sim::lose_leads`, "L-turn"), while it runs.
        match self.lead_loss_fate(from, to) {
            Some(LeadFate::Lost) => return,
            Some(LeadFate::After(d)) => {
                self.deliver_at(self.now + d, from, to, bytes);
                return;
            }
            None => {}
        }
        // Issue 20: a LEAD hold on this link catches LEADs only (decoded only while one
        // is set, so runs without holds draw and cost what they did).
        if self.net.any_hold
            && self.net.lead_holds[from][to]
                .iter()
                .flatten()
                .any(|h| h.0 > self.now)
        {
            let now = self.now;
            let slots = self.net.lead_holds[from][to];
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
                self.deliver_at(at, from, to, bytes);
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
            self.deliver_at(at, from, to, bytes);
        }
    }

    /// A delivery time aimed at a boundary that matters, in real time: the receiver's
    /// faith end, or a lease end of some leader, from 1 ns to 1 ms either side.
    pub(super) fn aim(&mut self, to: usize) -> Option<Real> {
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
        self.near_one_of(targets)
    }

    /// One of `targets` (those ahead, within 8 holds), from 1 ns to 1 ms either side
    /// (log-uniform): the instant an aimed fault or delivery lands.
    pub(super) fn near_one_of(&mut self, mut targets: Vec<Real>) -> Option<Real> {
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
            .net
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
        self.net.filter = Some(f);
    }

    /// How many datagrams the network holds back now.
    pub fn held(&self) -> usize {
        self.net.held_back.len()
    }

    /// Delivers the held-back datagrams now, in the order sent, and holds back no more.
    pub fn release_held(&mut self) {
        self.net.filter = None;
        for (from, to, bytes) in std::mem::take(&mut self.net.held_back) {
            self.push(self.now, Ev::Deliver { to, from, bytes });
        }
        self.run_until(self.now);
    }

    /// Loses the held-back datagrams and holds back no more.
    pub fn drop_held(&mut self) {
        self.net.filter = None;
        self.net.held_back.clear();
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
        self.net.lead_holds[f][t][kind as usize] = Some((until, how)).filter(|_| on);
        self.net.any_hold |= on;
        if self.opts.trace {
            self.trace.push(format!(
                "{} hold {kind:?} {from}->{to} {how:?} until {until}",
                self.now
            ));
        }
    }

    /// Ends every LEAD hold (what a `Hold` caught is still delivered at its end).
    pub fn free_leads(&mut self) {
        self.net
            .lead_holds
            .iter_mut()
            .for_each(|row| row.iter_mut().for_each(|h| *h = [None; 4]));
        self.net.any_hold = false;
    }

    /// True while some link holds LEADs.
    pub fn leads_held_now(&self) -> bool {
        self.net
            .lead_holds
            .iter()
            .flatten()
            .flatten()
            .any(|h| h.is_some_and(|h| h.0 > self.now))
    }

    /// Delivers the held-back datagrams now, the last sent first (a reordering), and
    /// holds back no more.
    pub fn release_held_reversed(&mut self) {
        self.net.filter = None;
        for (from, to, bytes) in std::mem::take(&mut self.net.held_back).into_iter().rev() {
            self.push(self.now, Ev::Deliver { to, from, bytes });
        }
        self.run_until(self.now);
    }

    /// Delivers again, now, every datagram sent so far that matches `f` (genuine late
    /// duplicates, from the network's history).
    pub fn redeliver(&mut self, f: &Filter) -> usize {
        let old: Vec<_> = self
            .net
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

    /// Drops datagrams from `from` to `to` (one direction).
    pub fn cut_one_way(&mut self, from: u16, to: u16) {
        let (f, t) = (self.idx(from), self.idx(to));
        self.net.cut[f][t] = true;
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
        self.net
            .cut
            .iter_mut()
            .for_each(|row| row.iter_mut().for_each(|c| *c = false));
    }

    /// True when datagrams from `from` to `to` are dropped by a cut.
    pub fn is_cut(&self, from: u16, to: u16) -> bool {
        self.net.cut[self.idx(from)][self.idx(to)]
    }

    /// A datagram arrives at `to`: handled now, or queued while the process is paused.
    pub(super) fn on_deliver(&mut self, to: usize, from: usize, bytes: Rc<Vec<u8>>) {
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
        let local = h.clock.local(self.now);
        if h.shell
            .as_ref()
            .is_some_and(|s| s.datagrams_may_wait(local))
        {
            // The host's own decision (issue 25): it waits in the socket for the next
            // wakeup, which the host's next deadline bounds.
            if h.deferred.len() < 256 {
                h.deferred.push((from, bytes));
            }
            return;
        }
        self.deliver(to, from, &bytes);
    }

    /// Wakes the process of `id` with nothing to do, as a `status` request wakes the
    /// daemon: what waited in its socket is read (issue 25, reads at the heartbeat).
    pub fn poke(&mut self, id: u16) {
        let i = self.idx(id);
        if self.hosts[i].up() && !self.hosts[i].paused {
            self.drive(i);
        }
    }

    /// Hands the host every datagram that waited for this wakeup, in arrival order
    /// (none while it is paused: its wakeup reads them), as the daemon's loop does:
    /// not flushed one by one; every caller runs the wakeup's timers or a flush next,
    /// which sends their outputs with the timers' (issue 25: one flush a heartbeat).
    pub(super) fn read_deferred(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        if h.paused || h.deferred.is_empty() {
            return;
        }
        for (from, bytes) in std::mem::take(&mut h.deferred) {
            self.stats.deferred += 1;
            self.hand_in(host, from, &bytes, true);
        }
    }
}
