//! Hosts on a network with a delay per datagram (tests/targeted.rs,
//! tests/targeted_adversary.rs): N servers, per-server timers and wire levels, a rule
//! that may lose or slow each LEAD datagram, crashes (`down`), instant disks. Every
//! step is deterministic: the hosts' seeds are fixed.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use crate::hostnet::{HBT, host_cfg, ms, node_cfg};
use electd::host::Host;
use electd::node::{Durable, Node, NodeConfig, Sabotage, ServerInfo};
use electd::time::Time;
use electd::wire::{Body, Framing, Kind, decode_any};
use std::net::SocketAddr;
use std::time::Duration;

pub struct Flight {
    pub at: Time,
    pub from: u16,
    pub to: u16,
    pub bytes: Vec<u8>,
}

/// What the rule says of one datagram carrying a LEAD.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Fate {
    Deliver,
    Lose,
    Late(Duration),
}

/// A LEAD datagram on its way out, as the rule sees it.
#[derive(Copy, Clone, Debug)]
pub struct LeadOut {
    pub from: u16,
    pub to: u16,
    /// The LEAD's seq (the rules run within one term).
    pub seq: u64,
}

pub type Rule = Box<dyn FnMut(&LeadOut) -> Fate>;

pub struct Net {
    pub n: usize,
    pub hosts: Vec<Host>,
    pub now: Time,
    pub air: Vec<Flight>,
    pub delay: Duration,
    pub rule: Rule,
    pub down: Vec<u16>,
    pub elects_out: Vec<u64>,
    /// Per sender, its LEADs in order: (seq, sparse).
    pub leads: Vec<Vec<(u64, bool)>>,
    /// A probe's copy follows its original: lose it with it.
    pub drop_copy: Option<(u16, u16)>,
    /// Per server: datagrams carrying a LEAD delivered to it, and sent by it (one per
    /// destination reached, lost ones included).
    pub leads_in: Vec<u64>,
    pub leads_sent: Vec<u64>,
}

pub fn servers(n: usize) -> Vec<ServerInfo> {
    (1..=n as u16)
        .map(|id| ServerInfo {
            id,
            priority: 0,
            witness: false,
        })
        .collect()
}

impl Net {
    pub fn new(
        n: usize,
        unicast: bool,
        sabotage: Sabotage,
        tune: impl Fn(u16, NodeConfig) -> NodeConfig,
        caps: &[(u16, Framing)],
    ) -> Net {
        let hosts = (1..=n as u16)
            .map(|id| {
                let cfg = electd::host::HostConfig {
                    unicast,
                    ..host_cfg(id, false)
                };
                let ncfg = tune(
                    id,
                    NodeConfig {
                        sabotage: sabotage.clone(),
                        servers: servers(n),
                        ..node_cfg(id, 17 * u64::from(id), None)
                    },
                );
                let node = Node::new(ncfg, Durable::default(), ms(0)).unwrap();
                let gs = vec![("default".to_string(), node, Durable::default())];
                let mut h = Host::new(cfg, gs, Default::default(), Default::default(), None);
                if let Some(&(_, f)) = caps.iter().find(|c| c.0 == id) {
                    h.cap_wire(f);
                }
                h
            })
            .collect();
        Net {
            n,
            hosts,
            now: ms(0),
            air: Vec::new(),
            delay: Duration::from_millis(1),
            rule: Box::new(|_| Fate::Deliver),
            down: Vec::new(),
            elects_out: vec![0; n],
            leads: vec![Vec::new(); n],
            drop_copy: None,
            leads_in: vec![0; n],
            leads_sent: vec![0; n],
        }
    }

    pub fn src(id: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + id))
    }

    pub fn up(&self, i: usize) -> bool {
        !self.down.contains(&(i as u16 + 1))
    }

    pub fn leader_now(&self) -> Option<usize> {
        (0..self.n).find(|&i| self.up(i) && self.hosts[i].group(0).node.is_leader(self.now))
    }

    pub fn leader(&mut self, settle_for: Duration) -> usize {
        let end = self.now + Duration::from_secs(5);
        while self.leader_now().is_none() && self.now < end {
            self.step(end);
        }
        let l = self.leader_now().expect("no leader within 5 s");
        self.run(settle_for);
        l
    }

    pub fn run(&mut self, d: Duration) {
        let until = self.now + d;
        for _ in 0..1_000_000 {
            if !self.step(until) {
                break;
            }
        }
        self.now = until;
    }

    /// Runs until `f` holds, at most `d`; true if it did.
    pub fn run_until(&mut self, d: Duration, mut f: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now + d;
        while !f(self) {
            if !self.step(end) {
                self.now = end;
                return f(self);
            }
        }
        true
    }

    pub fn step(&mut self, until: Time) -> bool {
        self.carry();
        let now = self.now;
        let deadline = (0..self.n)
            .filter(|&i| self.up(i))
            .map(|i| self.hosts[i].next_deadline(now))
            .min();
        let arrival = self.air.iter().map(|f| f.at).min();
        let Some(next) = deadline.into_iter().chain(arrival).min() else {
            return false;
        };
        let next = next.max(now);
        if next > until {
            return false;
        }
        self.now = next;
        let (here, later): (Vec<Flight>, Vec<Flight>) = std::mem::take(&mut self.air)
            .into_iter()
            .partition(|f| f.at <= next);
        self.air = later;
        for f in here {
            let j = usize::from(f.to - 1);
            if self.up(j) {
                self.hosts[j]
                    .handle_datagram(next, Self::src(f.from), &f.bytes)
                    .unwrap();
            }
        }
        for i in 0..self.n {
            if self.up(i) && self.hosts[i].next_deadline(next) <= next {
                self.hosts[i].handle_timeout(next).unwrap();
            }
        }
        self.carry();
        true
    }

    pub fn carry(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..self.n {
                let id = i as u16 + 1;
                while self.hosts[i].poll_event().is_some() {}
                if self.hosts[i].poll_write().is_some() {
                    self.hosts[i].handle_write_done(self.now, Ok(())).unwrap();
                    moved = true;
                }
                while let Some(t) = self.hosts[i].poll_transmit() {
                    moved = true;
                    let lead = t.kinds[Kind::Lead as usize] > 0;
                    let copy = t.kinds.iter().all(|&k| k == 0);
                    if t.kinds[Kind::Elect as usize] > 0 {
                        self.elects_out[i] += 1;
                    }
                    if !self.up(i) {
                        continue;
                    }
                    let (mut seq, mut sparse) = (0, false);
                    if lead {
                        let b = decode_any(&t.bytes, None, 1).unwrap();
                        for e in &b.entries {
                            if let Body::Lead { seq: q, acks, .. } = e.msg.body {
                                seq = q;
                                sparse = !acks.is_empty();
                            }
                        }
                        let v = &mut self.leads[i];
                        match v.last_mut() {
                            Some(last) if last.0 == seq => last.1 |= sparse,
                            _ => v.push((seq, sparse)),
                        }
                    }
                    for to in 1..=self.n as u16 {
                        if !t.to.reaches(id, to) {
                            continue;
                        }
                        let mut extra = Duration::ZERO;
                        if copy && self.drop_copy == Some((id, to)) {
                            continue;
                        }
                        if lead {
                            self.leads_sent[i] += 1;
                            self.drop_copy = None;
                            let out = LeadOut { from: id, to, seq };
                            match (self.rule)(&out) {
                                Fate::Deliver => {}
                                Fate::Lose => {
                                    self.drop_copy = Some((id, to));
                                    continue;
                                }
                                Fate::Late(d) => extra = d,
                            }
                            self.leads_in[usize::from(to - 1)] += 1;
                        }
                        self.air.push(Flight {
                            at: self.now + self.delay + extra,
                            from: id,
                            to,
                            bytes: t.bytes.clone(),
                        });
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the hosts never stopped sending");
    }

    /// Loses leader `l`'s next LEAD to server `to` and sends the three LEAD datagrams
    /// after it 4 ms late (the network's jitter: a follower whose faith ends then
    /// hears nothing in time), then runs 40 heartbeats.
    pub fn lose_next_lead_to(&mut self, l: usize, to: u16) {
        let lid = l as u16 + 1;
        let start = self.last_seq(l) + 1;
        let mut lost = false;
        let mut late_left = 0u32;
        self.rule = Box::new(move |o| {
            if o.from != lid || o.seq < start {
                return Fate::Deliver;
            }
            if o.to == to && !lost {
                lost = true;
                late_left = 3;
                return Fate::Lose;
            }
            if lost && late_left > 0 {
                late_left -= 1;
                return Fate::Late(Duration::from_millis(4));
            }
            Fate::Deliver
        });
        self.run(HBT * 40);
        self.rule = Box::new(|_| Fate::Deliver);
    }

    /// The seq of server `i`'s newest LEAD (0: none yet).
    pub fn last_seq(&self, i: usize) -> u64 {
        self.leads[i].last().map_or(0, |l| l.0)
    }

    /// Makes leader `l` miss an ACK (its next LEAD is lost to everyone), then runs
    /// until it is sparse again: returns just after its first sparse LEAD following
    /// the dense ones, with that LEAD's seq.
    pub fn first_sparse_after_dense(&mut self, l: usize) -> u64 {
        let lid = l as u16 + 1;
        let lose = self.last_seq(l) + 1;
        self.rule = Box::new(move |o| {
            if o.from == lid && o.seq == lose {
                Fate::Lose
            } else {
                Fate::Deliver
            }
        });
        self.run(HBT * 2);
        self.rule = Box::new(|_| Fate::Deliver);
        let from = self.leads[l].len();
        let ok = self.run_until(Duration::from_secs(20), |net| {
            let d = &net.leads[l];
            d.len() > from + 1 && !d[d.len() - 2].1 && d[d.len() - 1].1
        });
        assert!(ok, "the leader never went sparse again");
        self.last_seq(l)
    }

    pub fn term(&self, i: usize) -> u64 {
        self.hosts[i].group(0).node.term()
    }

    pub fn elects(&self) -> u64 {
        self.elects_out.iter().sum()
    }
}

/// `n` unicast servers (wire levels capped by `caps`) run to a leader at rest, whose
/// LEADs ask some followers (and go to them alone unless `untargeted`); returns the net
/// and the leader's index.
pub fn settled(n: usize, sabotage: Sabotage, caps: &[(u16, Framing)]) -> (Net, usize) {
    let mut net = Net::new(n, true, sabotage, |_, c| c, caps);
    let l = net.leader(HBT * 40);
    (net, l)
}
