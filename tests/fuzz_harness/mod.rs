//! Fuzz harnesses shared by the cargo-fuzz targets (`fuzz/`) and by `cargo test`
//! (`tests/fuzz_regressions.rs`), which replays every saved input.
#![allow(dead_code)]

use electd::node::{Dest, Durable, Event, Node, NodeConfig, Output, Sabotage, ServerInfo};
use electd::time::Time;
use electd::wire::{self, Key};
use std::collections::BTreeMap;
use std::time::Duration;

/// The decoder: never panics, and whatever it accepts re-encodes to the same bytes.
/// Each input is tried as it is and with its CRC trailer made right, so the fuzzer
/// reaches the checks of every field behind the trailer (random bytes almost never
/// carry a valid CRC).
pub fn decode(data: &[u8]) {
    decode_one(data);
    if data.len() >= 4 {
        let mut fixed = data.to_vec();
        let n = fixed.len() - 4;
        let crc = crc32fast::hash(&fixed[..n]);
        fixed[n..].copy_from_slice(&crc.to_be_bytes());
        decode_one(&fixed);
    }
}

fn decode_one(data: &[u8]) {
    if let Ok(m) = wire::decode(data) {
        assert_eq!(
            wire::encode_to_vec(&m),
            data,
            "accepted bytes must be canonical"
        );
    }
    let key = Key::new(b"fuzzing key, thirty-two bytes ok");
    if let Ok((m, counter)) = wire::decode_keyed(data, &[&key]) {
        let mut b = Vec::new();
        wire::encode_keyed(&m, counter, &key, &mut b);
        assert_eq!(b, data);
    }
    // The bundle framings (issue 12; compact and compact with ack maps, issue 25),
    // keyed or not: canonical as well, and each holds exactly what the others hold of
    // the same entries (an ack map only in versions 7/8).
    for keys in [None, Some(&[&key][..])] {
        if let Ok(bundle) = wire::decode_any(data, keys, 256) {
            if data.get(2).is_some_and(|&v| v >= wire::VERSION_BUNDLE) {
                let m = bundle.entries[0].msg;
                let framing = wire::Framing::of(data);
                let counter = bundle.counter.map(|c| (c, &key));
                let mut b = Vec::new();
                wire::encode_in(
                    framing,
                    m.sender,
                    m.fingerprint,
                    &bundle.entries,
                    counter,
                    &mut b,
                );
                assert_eq!(b, data, "accepted bundle bytes must be canonical");
                // Every other framing carries the same bundle, but for the ack maps
                // that only versions 7/8 carry (the others write them as empty).
                for other in wire::Framing::ALL.into_iter().filter(|&f| f != framing) {
                    let mut o = Vec::new();
                    wire::encode_in(
                        other,
                        m.sender,
                        m.fingerprint,
                        &bundle.entries,
                        counter,
                        &mut o,
                    );
                    let mut want = bundle.clone();
                    for e in &mut want.entries {
                        if let wire::Body::Lead { acks, .. } = &mut e.msg.body
                            && other != wire::Framing::CompactAcks
                        {
                            *acks = wire::PeerSet::EMPTY;
                        }
                    }
                    assert_eq!(
                        wire::decode_any(&o, keys, 256).as_ref(),
                        Ok(&want),
                        "every framing carries the same bundle ({other:?})"
                    );
                }
            }
        }
    }
}

const N: usize = 3;
const FP: u32 = 0xF022;

struct Host {
    node: Option<Node>,
    disk: Durable,
}

fn config(id: u16) -> NodeConfig {
    NodeConfig {
        id,
        servers: (1..=N as u16)
            .map(|id| ServerInfo {
                id,
                priority: 0,
                witness: false,
            })
            .collect(),
        fingerprint: FP,
        heartbeat: Duration::from_millis(100),
        rtt: Duration::from_millis(20),
        missed_heartbeats: 3,
        drift_ppm: 0,
        max_hold: Duration::from_secs(60),
        preempt_delay: None,
        seed: u64::from(id),
        strict: true,
        sabotage: Sabotage::default(),
    }
}

/// Three nodes on one clock; the input schedules deliveries, losses, duplicates, time,
/// crashes and commands, and injects garbage. S1, S2 and S4 are checked at every step.
/// Returns (steps, elections, steps with a lease) so callers can see it did something.
pub fn cluster(data: &[u8]) -> (u32, u32, u32) {
    let (mut steps, mut leases) = (0, 0);
    let mut now = Time(1_000_000_000);
    let mut hosts: Vec<Host> = (1..=N as u16)
        .map(|id| Host {
            node: Some(Node::new(config(id), Durable::default(), now).unwrap()),
            disk: Durable::default(),
        })
        .collect();
    let mut net: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut elected: BTreeMap<u64, u16> = BTreeMap::new();
    let mut votes: BTreeMap<(usize, u64), u16> = BTreeMap::new();
    let mut bytes = data.iter().copied();
    for _ in 0..2000 {
        let (Some(op), Some(arg)) = (bytes.next(), bytes.next()) else {
            break;
        };
        let k = usize::from(arg) % N;
        match op % 16 {
            0..=7 if !net.is_empty() => {
                let (to, b) = net.remove(usize::from(arg) % net.len());
                if let (Ok(bundle), Some(n)) =
                    (wire::decode_any(&b, None, 1), hosts[to].node.as_mut())
                {
                    for e in &bundle.entries {
                        let _ = n.handle_datagram(now, &e.msg);
                    }
                }
            }
            8 if !net.is_empty() => {
                net.remove(usize::from(arg) % net.len());
            }
            9 if !net.is_empty() && net.len() < 512 => {
                let d = net[usize::from(arg) % net.len()].clone();
                net.push(d);
            }
            0..=12 => {
                now = now + Duration::from_millis(u64::from(arg % 64));
                for n in hosts.iter_mut().filter_map(|h| h.node.as_mut()) {
                    n.handle_timeout(now);
                }
            }
            13 if arg < 48 => {
                // Crash and restart with what is on disk.
                hosts[k].node = Some(Node::new(config(k as u16 + 1), hosts[k].disk, now).unwrap());
            }
            14 if arg < 24 => {
                if let Some(n) = hosts[k].node.as_mut() {
                    if arg & 1 == 0 {
                        n.handle_elect(now);
                    } else {
                        n.handle_yield(now);
                    }
                }
            }
            15 => {
                // Garbage from outside: must be refused or harmless, never a panic.
                let len = usize::from(arg) % 48;
                let junk: Vec<u8> = bytes.by_ref().take(len).collect();
                if let (Ok(mut m), Some(n)) = (wire::decode(&junk), hosts[k].node.as_mut()) {
                    m.fingerprint = !FP; // not of this cluster: forged votes are section 10's matter
                    assert!(n.handle_datagram(now, &m).is_err());
                }
            }
            _ => {}
        }
        // Drain every node: writes land at once (in order), sends go to the network.
        for (i, host) in hosts.iter_mut().enumerate() {
            while let Some(out) = host.node.as_mut().and_then(Node::poll_output) {
                match out {
                    Output::Send { dest, msg } => {
                        // As the daemon sends it: a bundle of one entry.
                        let mut b = Vec::new();
                        let entry = [wire::Entry { group: 0, msg }];
                        wire::encode_bundle(msg.sender, msg.fingerprint, &entry, None, &mut b);
                        match dest {
                            Dest::All => (0..N)
                                .filter(|&j| j != i)
                                .for_each(|j| net.push((j, b.clone()))),
                            Dest::One(id) => net.push((usize::from(id) - 1, b)),
                            Dest::Only(set) => set
                                .iter()
                                .for_each(|id| net.push((usize::from(id) - 1, b.clone()))),
                        }
                    }
                    Output::Persist(d) => {
                        host.disk = d;
                        host.node
                            .as_mut()
                            .expect("it just spoke")
                            .handle_persisted(now, d);
                    }
                    Output::Event(Event::Elected { term }) => {
                        let id = i as u16 + 1;
                        assert!(
                            *elected.entry(term).or_insert(id) == id,
                            "S1: two leaders in term {term}"
                        );
                    }
                    Output::Event(Event::Voted { term, candidate }) => {
                        assert!(
                            *votes.entry((i, term)).or_insert(candidate) == candidate,
                            "S4: two votes in term {term}"
                        );
                    }
                    Output::Event(Event::DualLeader { .. }) => panic!("S1: dual leader"),
                    Output::Event(_) => {}
                }
            }
        }
        net.truncate(4096);
        let leaders = hosts
            .iter()
            .filter(|h| h.node.as_ref().is_some_and(|n| n.is_leader(now)))
            .count();
        assert!(leaders <= 1, "S2: {leaders} leases at once");
        steps += 1;
        leases += leaders as u32;
    }
    (steps, elected.len() as u32, leases)
}
