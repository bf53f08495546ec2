//! Issue 25, targeted heartbeats: a steady unicast leader sends each LEAD only to the
//! followers it asks to acknowledge it (docs/PROTOCOL.md, "Targeted heartbeats"),
//! driven through the hosts' own inputs on three hosts joined by a network with a
//! delay per datagram that a test may lose or lengthen, and instant disks.
//!
//! What must hold, beside the lease (the swarm's checks):
//! - at rest, each follower gets a LEAD every second heartbeat, and the leader sends
//!   one LEAD a heartbeat;
//! - one lost LEAD opens no round: the follower it was for waits a heartbeat past its
//!   faith for its next turn (`Sabotage::no_turn_wait` is the control);
//! - a crash of the leader is found as soon as without targeting: the follower the
//!   newest LEAD did not ask starts the round at the faith of the asked one.

mod hostnet;

use electd::host::Host;
use electd::node::{Durable, Node, NodeConfig, Sabotage};
use electd::time::Time;
use electd::wire::Kind;
use hostnet::{HBT, host_cfg, ms, node_cfg};
use std::net::SocketAddr;
use std::time::Duration;

/// One datagram on its way.
struct Flight {
    at: Time,
    from: u16,
    to: u16,
    bytes: Vec<u8>,
}

/// Three hosts, each datagram delivered `delay` after it left unless a rule below
/// loses or slows it.
struct Net {
    hosts: Vec<Host>,
    now: Time,
    air: Vec<Flight>,
    delay: Duration,
    /// Lose the next datagram carrying a LEAD from `.0` to `.1`.
    lose_lead: Option<(u16, u16)>,
    /// Datagrams carrying a LEAD take this much longer (network jitter).
    lead_extra: Duration,
    /// Crashed servers: they neither run nor receive.
    down: Vec<u16>,
    /// Per server: LEADs received (datagrams carrying one), ELECTs sent.
    leads_in: [u64; 3],
    elects_out: [u64; 3],
    /// Datagrams carrying a LEAD sent by each server, one per destination.
    leads_out: [u64; 3],
}

impl Net {
    fn new(unicast: bool, sabotage: Sabotage) -> Net {
        let hosts = (1..=3u16)
            .map(|id| {
                let cfg = electd::host::HostConfig {
                    unicast,
                    ..host_cfg(id, false)
                };
                let node = Node::new(
                    NodeConfig {
                        sabotage: sabotage.clone(),
                        ..node_cfg(id, 17 * u64::from(id), None)
                    },
                    Durable::default(),
                    ms(0),
                )
                .unwrap();
                let gs = vec![("default".to_string(), node, Durable::default())];
                Host::new(cfg, gs, Default::default(), Default::default(), None)
            })
            .collect();
        Net {
            hosts,
            now: ms(0),
            air: Vec::new(),
            delay: Duration::from_millis(1),
            lose_lead: None,
            lead_extra: Duration::ZERO,
            down: Vec::new(),
            leads_in: [0; 3],
            elects_out: [0; 3],
            leads_out: [0; 3],
        }
    }

    fn src(id: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + id))
    }

    fn up(&self, i: usize) -> bool {
        !self.down.contains(&(i as u16 + 1))
    }

    /// The server leading with a valid lease, if one does.
    fn leader_now(&self) -> Option<usize> {
        (0..3).find(|&i| self.up(i) && self.hosts[i].group(0).node.is_leader(self.now))
    }

    /// Runs until a server leads, at most 3 s; then `settle_for` more.
    fn leader(&mut self, settle_for: Duration) -> usize {
        let end = self.now + Duration::from_secs(3);
        while self.leader_now().is_none() && self.now < end {
            self.step(end);
        }
        let l = self.leader_now().expect("no leader within 3 s");
        self.run(settle_for);
        l
    }

    fn run(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_to(until);
    }

    fn run_to(&mut self, until: Time) {
        for _ in 0..1_000_000 {
            if !self.step(until) {
                break;
            }
        }
        self.now = until;
    }

    /// The next event (a deadline or an arrival) at or before `until`; false if none.
    fn step(&mut self, until: Time) -> bool {
        self.carry();
        let now = self.now;
        let deadline = (0..3)
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
        for i in 0..3 {
            if self.up(i) && self.hosts[i].next_deadline(next) <= next {
                self.hosts[i].handle_timeout(next).unwrap();
            }
        }
        self.carry();
        true
    }

    /// Takes every host's outputs: writes are durable at once, datagrams take off.
    fn carry(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..3 {
                let id = i as u16 + 1;
                while self.hosts[i].poll_event().is_some() {}
                if self.hosts[i].poll_write().is_some() {
                    self.hosts[i].handle_write_done(self.now, Ok(())).unwrap();
                    moved = true;
                }
                while let Some(t) = self.hosts[i].poll_transmit() {
                    moved = true;
                    let lead = t.kinds[Kind::Lead as usize] > 0;
                    if t.kinds[Kind::Elect as usize] > 0 {
                        self.elects_out[i] += 1;
                    }
                    if !self.up(i) {
                        continue;
                    }
                    for to in 1..=3u16 {
                        if !t.to.reaches(id, to) {
                            continue;
                        }
                        if lead {
                            self.leads_out[i] += 1;
                            if self.lose_lead == Some((id, to)) {
                                self.lose_lead = None;
                                continue;
                            }
                            self.leads_in[usize::from(to - 1)] += 1;
                        }
                        let extra = if lead {
                            self.lead_extra
                        } else {
                            Duration::ZERO
                        };
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

    fn term(&self, i: usize) -> u64 {
        self.hosts[i].group(0).node.term()
    }
}

/// At rest the leader sends one LEAD a heartbeat, and each follower gets every second
/// one; in multicast mode (`unicast` off) every LEAD still reaches every follower.
#[test]
fn at_rest_each_follower_gets_every_second_lead() {
    for unicast in [true, false] {
        let mut net = Net::new(unicast, Sabotage::default());
        let l = net.leader(HBT * 20);
        let (ins, outs) = (net.leads_in, net.leads_out[l]);
        net.run(HBT * 40);
        let outs = net.leads_out[l] - outs;
        for f in (0..3).filter(|&f| f != l) {
            let got = net.leads_in[f] - ins[f];
            if unicast {
                assert!(
                    (19..=21).contains(&got),
                    "follower {}: {got} LEADs in 40 heartbeats",
                    f + 1
                );
            } else {
                assert!(
                    (39..=41).contains(&got),
                    "multicast, follower {}: {got}",
                    f + 1
                );
            }
        }
        if unicast {
            assert!(
                (39..=41).contains(&outs),
                "the leader sent {outs} LEAD datagrams in 40 heartbeats"
            );
        }
        assert!(net.hosts[l].group(0).node.is_leader(net.now));
    }
}

/// Runs a settled cluster, loses the next LEAD to each follower in turn (with LEADs
/// 4 ms late, so a follower's faith of its LEAD before ends before the next one
/// arrives), and returns the ELECTs sent and whether every term stayed.
fn lose_one_lead(sabotage: Sabotage) -> (u64, bool) {
    let mut net = Net::new(true, sabotage);
    let l = net.leader(HBT * 20);
    let term = net.term(l);
    let elects: u64 = net.elects_out.iter().sum();
    for round in 0..6 {
        let f = (0..3).filter(|&f| f != l).nth(round % 2).unwrap();
        net.lead_extra = Duration::ZERO;
        net.lose_lead = Some((l as u16 + 1, f as u16 + 1));
        // The lost one, and the LEAD after it (every follower: a missed ACK), late.
        net.run(HBT * 3 / 2);
        net.lead_extra = Duration::from_millis(4);
        net.run(HBT * 2);
        net.lead_extra = Duration::ZERO;
        net.run(HBT * 10);
        assert_eq!(
            net.leader_now(),
            Some(l),
            "the leader lost its seat (round {round})"
        );
    }
    let after: u64 = net.elects_out.iter().sum();
    let same = (0..3).all(|i| net.term(i) == term);
    (after - elects, same)
}

/// One lost LEAD opens no round: the follower it was for waits for its next turn.
#[test]
fn one_lost_lead_opens_no_round() {
    let (elects, same) = lose_one_lead(Sabotage::default());
    assert_eq!(elects, 0, "a lost LEAD made a follower start a round");
    assert!(same, "a term changed");
}

/// The control: a follower that starts its round at its faith's end does.
#[test]
fn negative_control_no_turn_wait_opens_rounds() {
    let (elects, _) = lose_one_lead(Sabotage {
        no_turn_wait: true,
        ..Sabotage::default()
    });
    assert!(
        elects > 0,
        "the control caught nothing: the test cannot fail"
    );
}

/// Crashes the leader `phase` into a heartbeat, `n` times in a row on fresh clusters;
/// returns each time from the crash until a new leader holds a lease.
fn failovers(unicast: bool, sabotage: &Sabotage) -> Vec<Duration> {
    let mut out = Vec::new();
    for k in 0..10u64 {
        let mut net = Net::new(unicast, sabotage.clone());
        let l = net.leader(HBT * 20);
        // At rest; crash it k tenths into a heartbeat after 10 more.
        net.run(HBT * 10 + HBT * k as u32 / 10);
        let crash = net.now;
        net.down.push(l as u16 + 1);
        let end = crash + Duration::from_secs(3);
        while net.leader_now().is_none() && net.now < end {
            net.step(end);
        }
        assert!(
            net.leader_now().is_some(),
            "no new leader within 3 s of the crash"
        );
        out.push(net.now.saturating_since(crash));
    }
    out
}

/// A crash is found as soon as without targeting: each failover of a targeted cluster
/// within 2 ms of the same crash in multicast mode (every LEAD to every follower), and
/// never more than the hold plus 3 RTT after the crash.
#[test]
fn a_crash_is_found_as_soon_as_without_targeting() {
    let targeted = failovers(true, &Sabotage::default());
    let multicast = failovers(false, &Sabotage::default());
    println!(
        "failover ms, targeted: {:?}",
        targeted.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
    println!(
        "failover ms, multicast: {:?}",
        multicast.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
    for (k, (t, m)) in targeted.iter().zip(&multicast).enumerate() {
        assert!(
            *t <= *m + Duration::from_millis(2),
            "crash {k}/10 into a heartbeat: targeted {t:?}, multicast {m:?}"
        );
        assert!(
            *t <= HBT * 3 + Duration::from_millis(60),
            "crash {k}: {t:?}"
        );
    }
}
