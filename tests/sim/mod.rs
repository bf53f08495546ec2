//! A deterministic simulator of an electd cluster (issue 2).
//!
//! One virtual real-time clock jumps from event to event; every node has its own clock
//! running at a rate within `drift` of real time. The network delays, loses, duplicates,
//! reorders and partitions datagrams; processes pause (their timers fire late), crash
//! (losing all volatile state and any write not yet on disk) and restart with the state
//! file they had. Everything random is drawn from one seed: the same seed replays the
//! same run event for event. The checker (`check.rs`) runs after every event.
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
        }
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

/// A node's clock: local = offset + real * (1e6 + error) / 1e6.
#[derive(Copy, Clone, Debug)]
pub struct Clock {
    offset: u64,
    error_ppm: i64,
}

impl Clock {
    pub fn local(&self, real: Real) -> Time {
        let skew = (i128::from(real) * i128::from(self.error_ppm) / 1_000_000) as i64;
        Time(self.offset + (real as i64 + skew) as u64)
    }

    /// The first real time at which the local clock reads at least `t`.
    pub fn real(&self, t: Time) -> Real {
        let local = t.0.saturating_sub(self.offset) as i128;
        let mut r = (local * 1_000_000 / (1_000_000 + i128::from(self.error_ppm))) as u64;
        while self.local(r) < t {
            r += 1;
        }
        while r > 0 && self.local(r - 1) >= t {
            r -= 1;
        }
        r
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
    /// Incremented at every crash and pause, so stale events are recognised.
    inc: u64,
    pub restarts: u32,
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
    cfgs: Vec<NodeConfig>,
}

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
            let error_ppm = rng.below(2 * e as u64 + 1) as i64 - e;
            let clock = Clock {
                offset: rng.below(1 << 40),
                error_ppm,
            };
            cfgs.push(NodeConfig {
                id: s.id,
                servers: servers.clone(),
                fingerprint: 0xE1EC_7D00 ^ opts.n as u32,
                heartbeat: opts.heartbeat,
                rtt: opts.rtt,
                missed_heartbeats: opts.k,
                drift_ppm: opts.drift_ppm,
                max_hold: Duration::from_secs(60),
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
                restarts: 0,
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
            cfgs,
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
                if h.inc != inc || h.node.is_none() {
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
            Ev::Resume { host, inc } => {
                let h = &mut self.hosts[host];
                if h.inc != inc || !h.paused {
                    return;
                }
                h.paused = false;
                let backlog = std::mem::take(&mut h.backlog);
                let local = h.clock.local(self.now);
                if let Some(node) = h.node.as_mut() {
                    node.handle_timeout(local);
                }
                self.drive(host);
                for ev in backlog {
                    match ev {
                        Ev::Deliver { to, from, bytes } => self.deliver(to, from, &bytes),
                        Ev::PersistDone { host, state, .. } => {
                            let local = self.hosts[host].clock.local(self.now);
                            if let Some(node) = self.hosts[host].node.as_mut() {
                                node.handle_persisted(local, state);
                            }
                            self.drive(host);
                        }
                        _ => {}
                    }
                }
            }
            Ev::Restart { host } => {
                let h = &mut self.hosts[host];
                if h.node.is_some() {
                    return;
                }
                let local = h.clock.local(self.now);
                let node = Node::new(self.cfgs[host].clone(), h.disk, local).expect("valid config");
                h.node = Some(node);
                h.timer_at = None;
                h.paused = false;
                if self.opts.trace {
                    self.trace
                        .push(format!("{} start {} disk={:?}", self.now, h.id, h.disk));
                }
                self.drive(host);
            }
        }
    }

    fn deliver(&mut self, to: usize, from: usize, bytes: &[u8]) {
        let h = &mut self.hosts[to];
        let local = h.clock.local(self.now);
        let Some(node) = h.node.as_mut() else { return };
        match wire::decode(bytes) {
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
                    let bytes = Rc::new(wire::encode_to_vec(&msg));
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
                    h.write_done_at = at;
                    let inc = h.inc;
                    self.push(at, Ev::PersistDone { host, inc, state });
                }
                Output::Event(e) => {
                    if self.opts.trace {
                        self.trace
                            .push(format!("{} {} {:?}", self.now, host + 1, e));
                    }
                    self.check.on_event(self.now, self.hosts[host].id, e);
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

    fn transmit(&mut self, from: usize, to: usize, bytes: &Rc<Vec<u8>>) {
        self.sent += 1;
        if self.cut[from][to] || self.rng.below(1000) < u64::from(self.opts.loss_pm) {
            return;
        }
        let copies = if self.rng.below(1000) < u64::from(self.opts.dup_pm) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let spread = self.opts.delay_max.saturating_sub(self.opts.delay_min);
            let at = self.now + self.opts.delay_min + self.rng.below(spread + 1);
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

    // ----- fault verbs --------------------------------------------------------------

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
        h.paused = false;
        h.backlog.clear();
        h.timer_at = None;
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

    /// Sends `yield` to a server; true if it was leader.
    pub fn resign(&mut self, id: u16) -> bool {
        let mut r = false;
        // No supervisors yet: the RESIGN may leave at once.
        self.with_node(id, |n, t| {
            r = n.handle_yield(t);
            n.handle_released(t);
        });
        r
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
        while self.now < end {
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
        while self.now < end {
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
