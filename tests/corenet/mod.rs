//! N bare cores (`electd::node::Node`) on an in-memory network with a one-millisecond
//! delay, every output honoured (writes durable at once): the harness of the sparse
//! acknowledgement tests (tests/sparse_acks.rs, tests/sparse_adversary.rs). ACKs can
//! be dropped or delayed, LEADs duplicated, servers cut off.
#![allow(dead_code)]

use electd::node::{Dest, Durable, Node, NodeConfig, Output, Sabotage, ServerInfo};
use electd::time::Time;
use electd::wire::{Body, Message, PeerSet};
use std::collections::VecDeque;
use std::time::Duration;

/// The configuration of server `id` of `n` (ids 1..=n, no priorities), heartbeat 100
/// ms, rtt 20 ms, K = `k`, drift 1 %.
pub fn cfg(id: u16, n: u16, k: u32) -> NodeConfig {
    NodeConfig {
        id,
        servers: (1..=n)
            .map(|id| ServerInfo {
                id,
                priority: 0,
                witness: false,
            })
            .collect(),
        fingerprint: 0xF1F1,
        heartbeat: Duration::from_millis(100),
        rtt: Duration::from_millis(20),
        missed_heartbeats: k,
        drift_ppm: 10_000,
        max_hold: Duration::from_secs(60),
        preempt_delay: None,
        seed: u64::from(id),
        strict: true,
        sabotage: Sabotage::default(),
    }
}

#[derive(Clone, Debug)]
pub struct Lead {
    pub at: u64,
    pub from: u16,
    pub seq: u64,
    pub asked: PeerSet,
    /// The servers the LEAD says the leader heard recently (its `alive` map).
    pub alive: PeerSet,
}

pub struct Net {
    pub n: usize,
    pub nodes: Vec<Node>,
    pub now: u64,
    pub queue: VecDeque<(u64, usize, Message)>,
    pub leads: Vec<Lead>,
    /// (at, from id, seq) of every ACK sent.
    pub acks: Vec<(u64, u16, u64)>,
    /// ACKs (from id, seq) to drop, each once.
    pub drop_acks: Vec<(u16, u64)>,
    /// (ms, index) at which a server that had led was no longer leader.
    pub lapses: Vec<(u64, usize)>,
    pub led: Vec<bool>,
    /// (at, from id, successor id) of every RESIGN sent.
    pub resigns: Vec<(u64, u16, u16)>,
    /// Milliseconds at which two servers were leader at once.
    pub overlaps: u32,
    /// Servers cut off (nothing to or from them, no timers).
    pub down: Vec<bool>,
    /// Every LEAD is delivered a second time this many ms late (duplicated and, past
    /// a heartbeat, reordered behind newer LEADs).
    pub dup_leads: Option<u64>,
    /// Extra delay of every ACK, in ms (the network's is 1 ms).
    pub ack_delay: u64,
    /// Every datagram reaches every server, a LEAD for some followers too (a
    /// multicast host); otherwise a targeted LEAD reaches only the followers it names.
    pub multicast: bool,
}

impl Net {
    pub fn new(n: u16, k: u32) -> Net {
        Net::with(n, k, &[], Sabotage::default())
    }

    /// N servers, those in `witnesses` witnesses, every one with `sabotage`.
    pub fn with(n: u16, k: u32, witnesses: &[u16], sabotage: Sabotage) -> Net {
        Net::with_cfg(n, k, |c| {
            for s in &mut c.servers {
                s.witness = witnesses.contains(&s.id);
            }
            c.sabotage = sabotage.clone();
        })
    }

    /// N servers, each configuration passed through `f`.
    pub fn with_cfg(n: u16, k: u32, f: impl Fn(&mut NodeConfig)) -> Net {
        let nodes = (1..=n)
            .map(|id| {
                let mut c = cfg(id, n, k);
                f(&mut c);
                Node::new(c, Durable::default(), Time(0)).unwrap()
            })
            .collect();
        Net {
            n: usize::from(n),
            nodes,
            now: 0,
            queue: VecDeque::new(),
            leads: Vec::new(),
            acks: Vec::new(),
            drop_acks: Vec::new(),
            lapses: Vec::new(),
            led: vec![false; usize::from(n)],
            resigns: Vec::new(),
            overlaps: 0,
            down: vec![false; usize::from(n)],
            dup_leads: None,
            ack_delay: 0,
            multicast: false,
        }
    }

    pub fn t(&self) -> Time {
        Time(self.now * 1_000_000)
    }

    pub fn flush(&mut self, i: usize) {
        let now = self.t();
        let id = i as u16 + 1;
        while let Some(o) = self.nodes[i].poll_output() {
            match o {
                Output::Persist(d) => self.nodes[i].handle_persisted(now, d),
                Output::Send { dest, msg } => {
                    match msg.body {
                        Body::Lead {
                            seq,
                            acks,
                            alive,
                            resign: false,
                            ..
                        } => self.leads.push(Lead {
                            at: self.now,
                            from: id,
                            seq,
                            asked: acks,
                            alive,
                        }),
                        Body::Lead {
                            resign: true,
                            successor,
                            ..
                        } => self.resigns.push((self.now, id, successor)),
                        Body::Ack { seq, .. } => {
                            self.acks.push((self.now, id, seq));
                            if let Some(p) = self.drop_acks.iter().position(|&d| d == (id, seq)) {
                                self.drop_acks.remove(p);
                                continue;
                            }
                        }
                        _ => {}
                    }
                    let to: Vec<usize> = match dest {
                        Dest::All => (0..self.n).filter(|&j| j != i).collect(),
                        Dest::One(p) => vec![usize::from(p) - 1],
                        Dest::Only(_) if self.multicast => {
                            (0..self.n).filter(|&j| j != i).collect()
                        }
                        Dest::Only(set) => set.iter().map(|p| usize::from(p) - 1).collect(),
                    };
                    if self.down[i] {
                        continue;
                    }
                    let dup = match msg.body {
                        Body::Lead { .. } => self.dup_leads,
                        _ => None,
                    };
                    let delay = match msg.body {
                        Body::Ack { .. } => 1 + self.ack_delay,
                        _ => 1,
                    };
                    for j in to.into_iter().filter(|&j| !self.down[j]) {
                        self.queue.push_back((self.now + delay, j, msg));
                        if let Some(d) = dup {
                            self.queue.push_back((self.now + d, j, msg));
                        }
                    }
                }
                _ => {}
            }
        }
    }

    pub fn step(&mut self) {
        self.now += 1;
        let now = self.t();
        while let Some(p) = self.queue.iter().position(|m| m.0 <= self.now) {
            let (_, j, msg) = self.queue.remove(p).unwrap();
            let _ = self.nodes[j].handle_datagram(now, &msg);
            self.flush(j);
        }
        for i in 0..self.n {
            if self.down[i] {
                continue;
            }
            if self.nodes[i].next_deadline() <= now {
                self.nodes[i].handle_timeout(now);
            }
            self.flush(i);
        }
        if (0..self.n)
            .filter(|&i| self.nodes[i].is_leader(now))
            .count()
            > 1
        {
            self.overlaps += 1;
        }
        for i in 0..self.n {
            let leads = self.nodes[i].is_leader(now);
            if self.led[i] && !leads {
                self.lapses.push((self.now, i));
            }
            self.led[i] = leads;
        }
    }

    pub fn run(&mut self, until: u64) {
        while self.now < until {
            self.step();
        }
    }

    /// Runs until `until` or just after the next LEAD of `leader` leaves.
    pub fn run_to_next_lead(&mut self, leader: usize, until: u64) {
        let before = self.leads.len();
        while self.now < until {
            self.step();
            if self.leads[before..]
                .iter()
                .any(|l| l.from == leader as u16 + 1)
            {
                return;
            }
        }
    }

    /// Runs 3 s (an election and more than `SPARSE_AFTER` heartbeats) and returns
    /// the leader's index.
    pub fn settle(&mut self) -> usize {
        self.run(3_000);
        self.leader()
    }

    /// The LEADs sent at or after `at` ms.
    pub fn leads_since(&self, at: u64) -> Vec<&Lead> {
        self.leads.iter().filter(|l| l.at >= at).collect()
    }

    pub fn leader(&self) -> usize {
        let now = self.t();
        (0..self.n)
            .find(|&i| self.nodes[i].is_leader(now))
            .expect("a leader")
    }
}

pub fn ids(s: &PeerSet) -> Vec<u16> {
    s.iter().collect()
}
