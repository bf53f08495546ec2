//! Rolling upgrades of the wire (issue 25): the compact bundle (versions 5 and 6) and
//! the compact bundle with ack maps (versions 7 and 8) go to a peer only once it has
//! been heard in them, bootstrapped by the probes of src/host/peers.rs. Three hosts
//! joined by an instant, lossless network and instant disks; a server of an "old
//! build" is a host capped at a framing (`Host::cap_wire`): capped at `Compact` it is
//! the build before the ack map (versions 1 to 6), capped at `Bundle` the build before
//! the compact bundle (versions 1 to 4). It sends nothing above its cap and drops what
//! is above it as such a build does (`bad_version`, `too_short` or `too_long`).

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
    /// The highest framing each server speaks.
    caps: [Framing; 3],
    now: Time,
    sent: Vec<Sent>,
    /// Datagrams above its cap each server was sent (and dropped), and of those the
    /// ones that were no probe's copy (an original it missed).
    old_dropped: [u64; 3],
    originals_dropped: [u64; 3],
}

/// A new build, one before the ack map (versions 1-6), one before the compact bundle.
const NEW: Framing = Framing::CompactAcks;
const V5: Framing = Framing::Compact;
const V3: Framing = Framing::Bundle;

/// What a capped host counted as the drops of a version it does not speak.
fn version_drops(h: &Host) -> u64 {
    let d = &h.metrics().dropped;
    ["bad_version", "too_short", "too_long"]
        .iter()
        .map(|r| d.get(r).copied().unwrap_or(0))
        .sum()
}

fn keys() -> Keys {
    Keys {
        current: wire::Key::new(b"upgrade key, thirty-two bytes ok"),
        next: None,
    }
}

fn host(id: u16, preferred: u16, keyed: bool, now: Time, cap: Framing) -> Host {
    booted(id, preferred, keyed, now, cap, 11 * u64::from(id), 1)
}

/// As [`host`], with the core's RNG `seed` and the host's `boot` number (a restart
/// comes with the next one).
fn booted(
    id: u16,
    preferred: u16,
    keyed: bool,
    now: Time,
    cap: Framing,
    seed: u64,
    boot: u32,
) -> Host {
    let cfg = host_cfg(id, false);
    let node_cfg = NodeConfig {
        missed_heartbeats: 2,
        ..node_cfg(id, seed, Some(preferred))
    };
    let node = Node::new(node_cfg, Durable::default(), now).unwrap();
    let groups = vec![("default".to_string(), node, Durable::default())];
    let extra = electd::store::Extra {
        boot,
        ..Default::default()
    };
    let mut h = Host::new(cfg, groups, Default::default(), extra, keyed.then(keys));
    h.cap_wire(cap);
    h
}

impl Net {
    fn new(caps: [Framing; 3], preferred: u16, keyed: bool) -> Net {
        Net {
            hosts: (1..=3)
                .map(|id| host(id, preferred, keyed, ms(0), caps[usize::from(id - 1)]))
                .collect(),
            caps,
            now: ms(0),
            sent: Vec::new(),
            old_dropped: [0; 3],
            originals_dropped: [0; 3],
        }
    }

    /// Net::new with servers capped where `old` says (at version 3), the rest new.
    fn old(old: [bool; 3], preferred: u16, keyed: bool) -> Net {
        Net::new(old.map(|o| if o { V3 } else { NEW }), preferred, keyed)
    }

    fn leader(&self) -> Option<u16> {
        (0..3)
            .find(|&i| self.hosts[i].group(0).node.is_leader(self.now))
            .map(|i| i as u16 + 1)
    }

    /// True when `s` reaches server `to`.
    fn reaches(s: &Sent, to: u16) -> bool {
        s.to.reaches(s.from, to)
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
                    assert!(framing <= self.caps[i], "{id} sent above its cap");
                    let probe = t.kinds == [0; 5];
                    self.sent.push(Sent {
                        at: self.now,
                        from: id,
                        to: t.to,
                        framing,
                        probe,
                        kinds: t.kinds,
                    });
                    for j in 0..3 {
                        let to = j as u16 + 1;
                        let deliver = t.to.reaches(id, to);
                        if !deliver {
                            continue;
                        }
                        if framing > self.caps[j] {
                            self.old_dropped[j] += 1;
                            self.originals_dropped[j] += u64::from(!probe);
                        }
                        let (now, src) = (self.now, SocketAddr::from(([127, 0, 0, 1], 7000 + id)));
                        let ok = self.hosts[j].handle_datagram(now, src, &t.bytes).unwrap();
                        // The capped host drops it itself, as an older build does.
                        assert_eq!(ok, framing <= self.caps[j], "to {to}: {framing:?}");
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

/// Three new builds: versions 7/8 on every path within one heartbeat of the first
/// LEAD, keyed or not, and no probe after that (every pair that exchanges datagrams
/// knows the other).
#[test]
fn new_builds_switch_to_compact_within_a_heartbeat() {
    for keyed in [false, true] {
        let mut net = Net::new([NEW; 3], 1, keyed);
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
            .filter(|s| s.at > first_lead + HBT && s.framing != NEW)
            .collect();
        assert!(
            late.is_empty(),
            "keyed {keyed}: version 3 after the bootstrap: {late:?}"
        );
        let compact = net.sent.iter().filter(|s| s.framing == NEW).count();
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
                assert_eq!(me.peer_wire(p), PeerWire::CompactAcks, "{} of {p}", i + 1);
            }
        }
        let m = net.hosts[usize::from(leader - 1)].metrics();
        assert!(m.encoded[NEW.index()] > 20, "{:?}", m.encoded);
        assert!(m.accepted_framing[NEW.index()] > 20);
        assert_eq!(net.old_dropped, [0; 3]);
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
            let mut net = Net::old(old, preferred, keyed);
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
                let same = (o.at, o.from, o.to) == (p.at, p.from, p.to)
                    && (o.framing, p.framing) == (Framing::Bundle, NEW);
                assert!(
                    same && heartbeat_only(o) && !o.probe,
                    "{tag}: {p:?} after {o:?}"
                );
            }
            // From the start: never compact to the old server but a probe's copy.
            let unprobed = net
                .sent
                .iter()
                .filter(|s| Net::reaches(s, old_id) && s.framing != V3)
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
                all.filter(|s| s.framing != V3).count() as u64
            });
            assert_eq!(net.originals_dropped, [0; 3], "{tag}");
            let h = &net.hosts[usize::from(old_id - 1)];
            assert_eq!(version_drops(h), net.old_dropped[usize::from(old_id - 1)]);
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
                let v3 = between.iter().filter(|s| s.framing != NEW);
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

/// A server replaced by an older build (before the ack map, or before the compact
/// bundle) after the cluster spoke versions 7/8: it is sent them until its first
/// datagram (its first round, within 6 heartbeats of its start; keyed, its new boot
/// number), then its own level again; it follows the leader, which never loses its
/// lease, and after it was heard it never misses an original.
#[test]
fn a_downgraded_peer_is_heard_and_served_its_level() {
    for cap in [V5, V3] {
        for keyed in [false, true] {
            let tag = format!("{cap:?} keyed {keyed}");
            let mut net = Net::new([NEW; 3], 1, keyed);
            net.run_to(ms(2_000));
            assert_eq!(net.leader(), Some(1));
            assert_eq!(net.hosts[0].peer_wire(3), PeerWire::CompactAcks);
            // Server 3 restarts as an older build (keyed: with its next boot number).
            let mut h = host(3, 1, keyed, net.now, cap);
            if keyed {
                h = booted(3, 1, true, net.now, cap, 33, 2);
            }
            net.hosts[2] = h;
            net.caps[2] = cap;
            let restart = net.now;
            let mut lease_lost = false;
            for _ in 0..(10 * HBT.as_millis() as u64) {
                let t = net.now + Duration::from_millis(1);
                net.run_to(t);
                lease_lost |= !net.hosts[0].group(0).node.is_leader(net.now);
            }
            assert!(!lease_lost, "{tag}: the leader lost its lease");
            assert_eq!(net.hosts[0].peer_wire(3), PeerWire::of(cap), "{tag}");
            let heard_at = net
                .sent
                .iter()
                .find(|s| s.at > restart && s.from == 3)
                .map(|s| s.at)
                .unwrap();
            assert!(heard_at <= restart + HBT * 6, "{tag}: {heard_at:?}");
            let first = net
                .sent
                .iter()
                .find(|s| s.at > restart && s.from == 3)
                .unwrap();
            eprintln!(
                "downgraded to {tag}: first datagram {:?} after {:?}; above its cap sent to it \
                 meanwhile {} ({} originals)",
                first.kinds,
                Duration::from_nanos(heard_at.0 - restart.0),
                net.old_dropped[2],
                net.originals_dropped[2],
            );
            let bad = net
                .sent
                .iter()
                .filter(|s| s.at > heard_at && Net::reaches(s, 3))
                .filter(|s| s.framing > cap && !s.probe)
                .count();
            assert_eq!(bad, 0, "{tag}: above its cap after it was heard");
            assert_eq!(version_drops(&net.hosts[2]), net.old_dropped[2], "{tag}");
            let follows = net.hosts[2].group(0).node.status(net.now).leader;
            assert_eq!(follows, Some(1), "{tag}");
        }
    }
}

/// Mixed clusters: (new, v5, new) and (new, v3, v5), each server preferred in turn,
/// keyed or not. Elected once, the leader keeps its lease for 400 heartbeats with
/// missed-heartbeats 2; no server is ever sent an original above what it speaks (only
/// probes' copies, which it drops and counts); two new builds speak versions 7/8 to each
/// other; `Dest::All` gets the lowest level among the peers; every peer is known at
/// its level by whoever it sends to.
#[test]
fn mixed_clusters_elect_and_keep_a_leader() {
    for caps in [[NEW, V5, NEW], [NEW, V3, V5], [V5, NEW, NEW]] {
        for preferred in 1..=3u16 {
            for keyed in [false, true] {
                let tag = format!("{caps:?} preferred {preferred} keyed {keyed}");
                let mut net = Net::new(caps, preferred, keyed);
                net.run_to(ms(1_000));
                let leader = net.leader().expect("a leader");
                assert_eq!(leader, preferred, "{tag}");
                let elections = net.elections();
                let start = net.now;
                net.run_to(ms(1_000) + HBT * 400);
                assert_eq!(net.leader(), Some(leader), "{tag}");
                assert_eq!(net.elections(), elections, "{tag}: a round after the first");
                assert_eq!(net.originals_dropped, [0; 3], "{tag}: an original dropped");
                for (j, (h, cap)) in net.hosts.iter().zip(caps).enumerate() {
                    assert_eq!(version_drops(h), net.old_dropped[j], "{tag}");
                    if cap == NEW {
                        assert_eq!(net.old_dropped[j], 0, "{tag}");
                    }
                }
                let late = net.sent.iter().filter(|s| s.at > start);
                for s in late {
                    let to = match s.to {
                        Dest::One(x) => caps[usize::from(x - 1)],
                        Dest::Only(_) => unreachable!("a unicast host sends to each alone"),
                        Dest::All => (1..=3u16)
                            .filter(|&x| x != s.from)
                            .map(|x| caps[usize::from(x - 1)])
                            .min()
                            .unwrap(),
                    };
                    let from = caps[usize::from(s.from - 1)];
                    if s.probe {
                        assert_eq!(s.framing, from, "{tag}: a probe below the top");
                    } else if (from, to) == (NEW, NEW) {
                        // Two new builds: versions 7/8 on every path between them.
                        assert_eq!(s.framing, NEW, "{tag}: {s:?}");
                    } else {
                        // Never above what the receivers read. (A v5-only server
                        // whose peer sends only to All, at version 3 for a v3-only
                        // one, hears that peer in version 3 and in version-7 probes
                        // it drops: it answers in version 3.)
                        assert!(s.framing <= from.min(to), "{tag}: {s:?}");
                    }
                }
                let m = |j: usize| net.hosts[j].metrics().encoded;
                eprintln!(
                    "{tag}: encoded {:?} {:?} {:?}, dropped above the cap {:?}",
                    m(0),
                    m(1),
                    m(2),
                    net.old_dropped
                );
                // Whoever a server sends to knows it at its level.
                let leader_host = &net.hosts[usize::from(leader - 1)];
                for p in (1..=3u16).filter(|&p| p != leader) {
                    let both = caps[usize::from(p - 1)].min(caps[usize::from(leader - 1)]);
                    let at_p = net.hosts[usize::from(p - 1)].peer_wire(leader);
                    for (w, what) in [
                        (leader_host.peer_wire(p), "p at the leader"),
                        (at_p, "the leader at p"),
                    ] {
                        assert!(w <= PeerWire::of(both), "{tag}: {p}: {what}: {w:?}");
                        assert!(w >= PeerWire::Classic, "{tag}: {p}: {what}: {w:?}");
                        if both == NEW {
                            assert_eq!(w, PeerWire::CompactAcks, "{tag}: {p}: {what}");
                        }
                    }
                }
            }
        }
    }
}

/// A new build that restarts (unkeyed: nothing says so but its datagrams) beside a
/// v5-only server hears the leader's LEADs to All in version 5 and answers in it; the
/// leader, which knows it reads versions 7/8, sends its next LEAD with a version-7
/// copy, so the restarted server is back on versions 7/8 within a few heartbeats, not
/// after a probe cadence of 64.
#[test]
fn a_restarted_new_build_is_back_on_v7_within_a_few_heartbeats() {
    for keyed in [false, true] {
        for at in [2_000, 2_037, 3_210] {
            let tag = format!("keyed {keyed} restart at {at} ms");
            let mut net = Net::new([NEW, V5, NEW], 1, keyed);
            net.run_to(ms(at));
            assert_eq!(net.leader(), Some(1), "{tag}");
            let mut h = host(3, 1, keyed, net.now, NEW);
            if keyed {
                h = booted(3, 1, true, net.now, NEW, 33, 2);
            }
            net.hosts[2] = h;
            let restart = net.now;
            net.run_to(restart + HBT * 100);
            assert_eq!(net.leader(), Some(1), "{tag}");
            let from_3: Vec<&Sent> = net
                .sent
                .iter()
                .filter(|s| s.at > restart && s.from == 3 && s.to == Dest::One(1) && !s.probe)
                .collect();
            assert!(from_3.len() > 50, "{tag}: {}", from_3.len());
            let first_v7 = from_3.iter().position(|s| s.framing == NEW);
            let lower = from_3.iter().filter(|s| s.framing != NEW).count();
            eprintln!(
                "{tag}: {} ACKs to the leader, {lower} below version 7",
                from_3.len()
            );
            assert!(first_v7.is_some_and(|i| i <= 3), "{tag}: {first_v7:?}");
            assert!(lower <= 3, "{tag}: {lower} below version 7");
            assert_eq!(net.hosts[2].peer_wire(1), PeerWire::CompactAcks, "{tag}");
            assert_eq!(net.originals_dropped, [0; 3], "{tag}");
        }
    }
}

/// Two groups led by two new servers beside a v3-only one: both new servers send their
/// LEADs to All in version 3, each with a version-7 copy now and then, and each hears
/// the other's version-3 LEADs below the level it knows it at. They must not answer
/// each other's copies with copies (the lower-level hint counts once per level
/// learned): about one probe per sender in `PROBE_EVERY` heartbeat datagrams.
#[test]
fn two_new_leaders_beside_an_old_server_do_not_probe_each_other_every_heartbeat() {
    let mk = |id: u16, cap: Framing| {
        let groups = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(g, name)| {
                let cfg = NodeConfig {
                    missed_heartbeats: 2,
                    ..node_cfg(id, 11 * u64::from(id) + g as u64, Some(g as u16 + 1))
                };
                let node = Node::new(cfg, Durable::default(), ms(0)).unwrap();
                (name.to_string(), node, Durable::default())
            })
            .collect();
        let extra = electd::store::Extra {
            boot: 1,
            ..Default::default()
        };
        let mut h = Host::new(host_cfg(id, true), groups, Default::default(), extra, None);
        h.cap_wire(cap);
        h
    };
    let caps = [NEW, NEW, V3];
    let mut net = Net::new(caps, 1, false);
    net.hosts = (1..=3)
        .map(|id| mk(id, caps[usize::from(id - 1)]))
        .collect();
    net.run_to(ms(1_000));
    let leads = |net: &Net, g: usize| {
        (0..3)
            .find(|&i| net.hosts[i].group(g).node.is_leader(net.now))
            .map(|i| i as u16 + 1)
    };
    assert_eq!((leads(&net, 0), leads(&net, 1)), (Some(1), Some(2)));
    let start = net.now;
    net.run_to(start + HBT * 640);
    assert_eq!((leads(&net, 0), leads(&net, 1)), (Some(1), Some(2)));
    assert_eq!(net.originals_dropped, [0; 3]);
    for from in [1u16, 2] {
        let late = net.sent.iter().filter(|s| s.at > start && s.from == from);
        let (probes, all): (Vec<&Sent>, Vec<&Sent>) = late.partition(|s| s.probe);
        eprintln!(
            "server {from}: {} datagrams, {} probes",
            all.len(),
            probes.len()
        );
        assert!(all.len() >= 640, "{}", all.len());
        assert!(
            probes.len() <= 2 * (all.len() / PROBE_EVERY as usize + 2),
            "server {from}: {} probes in {} datagrams",
            probes.len(),
            all.len()
        );
    }
}
