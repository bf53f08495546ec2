//! Rolling upgrades of the wire (issue 25): the compact bundle (versions 5 and 6) goes
//! to a peer only once it has been heard in it, bootstrapped by the probes of
//! src/host/peers.rs. Three hosts joined by an instant, lossless network and instant
//! disks; a server of an "old build" is a host whose compact datagrams never leave and
//! that drops every compact datagram it is sent (as an old build does, counting it
//! `bad_version`), so it only ever sends versions 3/4 and reads them.

mod hostnet;

use electd::auth::Keys;
use electd::host::{Host, PROBE_EVERY, PeerWire};
use electd::node::{Dest, Durable, Node, NodeConfig};
use electd::time::Time;
use electd::wire::{self, Framing, Kind};
use hostnet::{HBT, HostNet, host_cfg, ms, node_cfg};
use std::net::SocketAddr;
use std::time::Duration;

/// One datagram as it left: when, from, to, its framing, and whether it was a probe's
/// copy (no messages counted).
#[derive(Clone, Debug)]
struct Sent {
    at: Time,
    from: u16,
    to: Dest,
    framing: Framing,
    probe: bool,
    kinds: [u64; 5],
}

struct Net {
    hosts: Vec<Host>,
    old: [bool; 3],
    keyed: bool,
    now: Time,
    sent: Vec<Sent>,
    /// Compact datagrams an old build was sent (and dropped): its `bad_version`.
    old_dropped: [u64; 3],
}

fn keys() -> Keys {
    Keys {
        current: wire::Key::new(b"upgrade key, thirty-two bytes ok"),
        next: None,
    }
}

fn host(id: u16, preferred: u16, keyed: bool, now: Time) -> Host {
    let cfg = host_cfg(id, false);
    let node_cfg = NodeConfig {
        missed_heartbeats: 2,
        ..node_cfg(id, 11 * u64::from(id), Some(preferred))
    };
    let node = Node::new(node_cfg, Durable::default(), now).unwrap();
    let groups = vec![("default".to_string(), node, Durable::default())];
    let extra = electd::store::Extra {
        boot: 1,
        ..Default::default()
    };
    Host::new(cfg, groups, Default::default(), extra, keyed.then(keys))
}

impl Net {
    fn new(old: [bool; 3], preferred: u16, keyed: bool) -> Net {
        Net {
            hosts: (1..=3)
                .map(|id| host(id, preferred, keyed, ms(0)))
                .collect(),
            old,
            keyed,
            now: ms(0),
            sent: Vec::new(),
            old_dropped: [0; 3],
        }
    }

    fn leader(&self) -> Option<u16> {
        (0..3)
            .find(|&i| self.hosts[i].group(0).node.is_leader(self.now))
            .map(|i| i as u16 + 1)
    }

    /// True when `s` reaches server `to`.
    fn reaches(s: &Sent, to: u16) -> bool {
        s.from != to
            && match s.to {
                Dest::All => true,
                Dest::One(x) => x == to,
            }
    }

    fn elections(&self) -> u64 {
        self.sent
            .iter()
            .map(|s| s.kinds[Kind::Elect as usize] + s.kinds[Kind::Vote as usize])
            .sum()
    }
}

fn heartbeat_only(s: &Sent) -> bool {
    s.kinds[Kind::Elect as usize] + s.kinds[Kind::Vote as usize] == 0
}

/// Three new builds: compact within one heartbeat of the first LEAD, keyed or not, and
/// no probe after that (every pair that exchanges datagrams knows the other).
impl HostNet for Net {
    fn hosts(&mut self) -> &mut [Host] {
        &mut self.hosts
    }

    fn now(&mut self) -> &mut Time {
        &mut self.now
    }

    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..3 {
                let id = i as u16 + 1;
                while self.hosts[i].poll_event().is_some() {}
                if self.hosts[i].poll_write().is_some() {
                    let now = self.now;
                    self.hosts[i].handle_write_done(now, Ok(())).unwrap();
                    moved = true;
                }
                while let Some(t) = self.hosts[i].poll_transmit() {
                    moved = true;
                    let framing = Framing::of(&t.bytes);
                    if self.old[i] && framing == Framing::Compact {
                        // An old build never sends it.
                        continue;
                    }
                    self.sent.push(Sent {
                        at: self.now,
                        from: id,
                        to: t.to,
                        framing,
                        probe: t.kinds == [0; 5],
                        kinds: t.kinds,
                    });
                    for j in 0..3 {
                        let to = j as u16 + 1;
                        let deliver = match t.to {
                            Dest::All => to != id,
                            Dest::One(x) => x == to,
                        };
                        if !deliver {
                            continue;
                        }
                        if self.old[j] && framing == Framing::Compact {
                            self.old_dropped[j] += 1;
                            continue;
                        }
                        let (now, src) = (self.now, SocketAddr::from(([127, 0, 0, 1], 7000 + id)));
                        self.hosts[j].handle_datagram(now, src, &t.bytes).unwrap();
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settled");
    }
}

#[test]
fn new_builds_switch_to_compact_within_a_heartbeat() {
    for keyed in [false, true] {
        let mut net = Net::new([false; 3], 1, keyed);
        net.run_to(ms(3_000));
        let leader = net.leader().expect("a leader");
        let first_lead = net
            .sent
            .iter()
            .find(|s| s.from == leader && s.kinds[Kind::Lead as usize] > 0)
            .map(|s| s.at)
            .unwrap();
        let late: Vec<&Sent> = net
            .sent
            .iter()
            .filter(|s| s.at > first_lead + HBT && s.framing != Framing::Compact)
            .collect();
        assert!(
            late.is_empty(),
            "keyed {keyed}: version 3 after the bootstrap: {late:?}"
        );
        let compact = net
            .sent
            .iter()
            .filter(|s| s.framing == Framing::Compact)
            .count();
        assert!(compact > 50, "keyed {keyed}: {compact} compact datagrams");
        let probes = net.sent.iter().filter(|s| s.probe).count();
        let v3 = net.sent.len() - compact;
        eprintln!("new builds, keyed {keyed}: {compact} compact, {v3} version 3, {probes} probes");
        assert!(probes <= 3, "keyed {keyed}: {probes} probes");
        for i in 0..3u16 {
            let me = &net.hosts[usize::from(i)];
            let want = if i + 1 == leader {
                // The leader hears every follower's ACKs.
                vec![1, 2, 3]
            } else {
                vec![leader]
            };
            for p in want.into_iter().filter(|&p| p != i + 1) {
                assert_eq!(me.peer_wire(p), PeerWire::Compact, "{} of {p}", i + 1);
            }
        }
        let m = net.hosts[usize::from(leader - 1)].metrics();
        assert!(m.encoded[Framing::Compact.index()] > 20, "{:?}", m.encoded);
        assert!(m.accepted_framing[Framing::Compact.index()] > 20);
    }
}

/// Server `old_id` runs an old build: it keeps getting version 3, but for the probes'
/// copies (one heartbeat datagram in `PROBE_EVERY` to it, each after its version-3
/// original), so it never misses a heartbeat: no election after the first, with
/// missed-heartbeats 2. The two new servers speak compact between them where they can.
#[test]
fn an_old_peer_keeps_getting_version_3_but_for_the_probes() {
    for (old_id, preferred) in [(3u16, 1u16), (3, 3), (1, 2)] {
        for keyed in [false, true] {
            let mut old = [false; 3];
            old[usize::from(old_id - 1)] = true;
            let mut net = Net::new(old, preferred, keyed);
            net.run_to(ms(1_000));
            let leader = net.leader().expect("a leader");
            assert_eq!(leader, preferred);
            let elections = net.elections();
            let start = net.now;
            net.run_to(ms(1_000) + HBT * 400);
            let tag = format!("old {old_id}, leader {leader}, keyed {keyed}");
            assert_eq!(net.leader(), Some(leader), "{tag}");
            assert_eq!(net.elections(), elections, "{tag}: a round after the first");
            // Every probe is a copy that follows its version-3 original at once.
            for (i, p) in net.sent.iter().enumerate().filter(|(_, s)| s.probe) {
                let o = &net.sent[i - 1];
                let same = (o.at, o.from, o.to, o.framing) == (p.at, p.from, p.to, Framing::Bundle);
                assert!(
                    same && heartbeat_only(o) && !o.probe,
                    "{tag}: {p:?} after {o:?}"
                );
            }
            // From the start: never compact to the old server but a probe's copy.
            let unprobed = net
                .sent
                .iter()
                .filter(|s| Net::reaches(s, old_id) && s.framing == Framing::Compact)
                .filter(|s| !s.probe)
                .count();
            assert_eq!(unprobed, 0, "{tag}: compact to the old build");
            let to_old: Vec<&Sent> = net
                .sent
                .iter()
                .filter(|s| s.at > start && Net::reaches(s, old_id))
                .collect();
            let (v3, compact): (Vec<&Sent>, Vec<&Sent>) =
                to_old.iter().partition(|s| s.framing == Framing::Bundle);
            assert!(
                compact.iter().all(|s| s.probe),
                "{tag}: compact that is no probe"
            );
            assert!(v3.len() >= 380, "{tag}: {} version-3 datagrams", v3.len());
            // Each probe follows its original; at most one in PROBE_EVERY per sender.
            let senders = if old_id == leader { 2 } else { 1 };
            let most = senders * (v3.len() as u64 / u64::from(PROBE_EVERY) + 1) as usize;
            assert!(
                !compact.is_empty() && compact.len() <= most,
                "{tag}: {}",
                compact.len()
            );
            assert_eq!(net.old_dropped[usize::from(old_id - 1)], {
                let all = net.sent.iter().filter(|s| Net::reaches(s, old_id));
                all.filter(|s| s.framing == Framing::Compact).count() as u64
            });
            for s in &compact {
                assert!(heartbeat_only(s), "{tag}: an ELECT or VOTE probed");
            }
            eprintln!(
                "{tag}: to the old server {} version-3 datagrams and {} probes",
                v3.len(),
                compact.len()
            );
            for i in (1..=3u16).filter(|&i| i != old_id) {
                let h = &net.hosts[usize::from(i - 1)];
                assert_eq!(h.peer_wire(old_id), PeerWire::Classic, "{tag}: at {i}");
            }
            // The two new servers: the one that sends to the other does so in compact.
            let new: Vec<u16> = (1..=3).filter(|&i| i != old_id).collect();
            let between = net
                .sent
                .iter()
                .filter(|s| s.at > start && new.contains(&s.from))
                .filter(|s| matches!(s.to, Dest::One(x) if new.contains(&x)))
                .collect::<Vec<_>>();
            if old_id != leader {
                assert!(!between.is_empty(), "{tag}");
                let v3 = between.iter().filter(|s| s.framing != Framing::Compact);
                let v3: Vec<_> = v3.take(3).collect();
                assert!(
                    v3.is_empty(),
                    "{tag}: {} datagrams, v3: {v3:?}",
                    between.len()
                );
            }
        }
    }
}

/// A server replaced by an old build after the cluster spoke compact: it is sent
/// compact until its first datagram (its first round, within 5 heartbeats of its
/// start), then version 3 again; it follows the leader, which never loses its lease.
#[test]
fn a_downgraded_peer_is_heard_and_served_version_3() {
    let mut net = Net::new([false; 3], 1, false);
    net.run_to(ms(2_000));
    assert_eq!(net.leader(), Some(1));
    assert_eq!(net.hosts[0].peer_wire(3), PeerWire::Compact);
    // Server 3 restarts as an old build.
    net.hosts[2] = host(3, 1, net.keyed, net.now);
    net.old[2] = true;
    let restart = net.now;
    let mut lease_lost = false;
    for _ in 0..(10 * HBT.as_millis() as u64) {
        let t = net.now + Duration::from_millis(1);
        net.run_to(t);
        lease_lost |= !net.hosts[0].group(0).node.is_leader(net.now);
    }
    assert!(!lease_lost, "the leader lost its lease");
    assert_eq!(net.hosts[0].peer_wire(3), PeerWire::Classic);
    assert_eq!(net.hosts[1].peer_wire(3), PeerWire::Classic);
    let heard_at = net
        .sent
        .iter()
        .find(|s| s.at > restart && s.from == 3)
        .map(|s| s.at)
        .unwrap();
    assert!(heard_at <= restart + HBT * 6, "{heard_at:?}");
    let first = net
        .sent
        .iter()
        .find(|s| s.at > restart && s.from == 3)
        .unwrap();
    eprintln!(
        "downgraded: first datagram {:?} after {:?}; compact sent to it meanwhile {}",
        first.kinds,
        Duration::from_nanos(heard_at.0 - restart.0),
        net.old_dropped[2]
    );
    let bad = net
        .sent
        .iter()
        .filter(|s| s.at > heard_at && Net::reaches(s, 3))
        .filter(|s| s.framing == Framing::Compact && !s.probe)
        .count();
    assert_eq!(bad, 0, "compact to the old build after it was heard");
    let follows = net.hosts[2].group(0).node.status(net.now).leader;
    assert_eq!(follows, Some(1));
}
