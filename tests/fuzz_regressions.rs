//! Replays every input saved under fuzz/regressions through the fuzz harnesses, plus a
//! fixed set of seeds, so what the fuzzers found stays fixed (issue 6).

mod fuzz_harness;

use std::path::Path;

fn inputs(dir: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn decoder_inputs() {
    let saved = inputs("decode");
    for data in &saved {
        fuzz_harness::decode(data);
    }
    let mut rng = electd::rng::SplitMix64::new(1);
    for _ in 0..20_000 {
        let len = rng.below(80) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        fuzz_harness::decode(&data);
    }
    eprintln!("decoder: {} saved inputs replayed", saved.len());
}

/// The compact bundles (versions 5 to 8): random edits of valid compact datagrams,
/// so the harness reaches the varint and entry checks that random bytes never do; the
/// harness re-seals the CRC, and checks that what is accepted re-encodes to the same
/// bytes in its framing and to the same bundle in the other.
#[test]
fn compact_decoder_inputs() {
    use electd::wire::{self, Body, Entry, Framing, Key, Message, PeerSet};
    let key = Key::new(b"fuzzing key, thirty-two bytes ok");
    let mut rng = electd::rng::SplitMix64::new(5);
    let mut alive = PeerSet::EMPTY;
    alive.insert(2);
    alive.insert(9);
    let mut acks = PeerSet::EMPTY;
    acks.insert(3);
    acks.insert(255);
    let bodies = [
        Body::Lead {
            seq: 109,
            hold_ms: 300,
            resign: false,
            successor: 0,
            unfit: true,
            alive,
            acks,
        },
        Body::Lead {
            seq: 108,
            hold_ms: 300,
            resign: true,
            successor: 3,
            unfit: false,
            alive,
            acks: PeerSet::EMPTY,
        },
        Body::Ack {
            seq: 1 << 40,
            unfit: true,
        },
        Body::Vote { candidate: 200 },
        Body::Elect {
            last_term: 0,
            last_seq: u64::MAX,
            priority: 3,
            heard: 2,
            ineligible: true,
            last_resort: true,
        },
    ];
    let (mut accepted, mut tried, mut with_acks) = (0, 0, 0);
    for round in 0..20_000u64 {
        let n = 1 + rng.below(4) as usize;
        let entries: Vec<Entry> = (0..n)
            .map(|i| Entry {
                group: rng.below(3) as u8,
                msg: Message {
                    sender: 1 + rng.below(255) as u16,
                    fingerprint: 0xF022,
                    term: rng.next_u64() >> rng.below(64),
                    body: bodies[(round as usize + i) % bodies.len()],
                },
            })
            .collect();
        let keyed = round % 2 == 1;
        let mut b = Vec::new();
        let s = entries[0].msg.sender;
        // Versions 5/6 and 7/8 in turn (odd rounds keyed).
        let framing = [Framing::Compact, Framing::CompactAcks][(round / 2 % 2) as usize];
        wire::encode_in(
            framing,
            s,
            0xF022,
            &entries,
            keyed.then_some((round, &key)),
            &mut b,
        );
        fuzz_harness::decode(&b);
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(b.len() as u64) as usize;
            b[i] = match rng.below(3) {
                0 => b[i] ^ (1 << rng.below(8)),
                1 => 0x80,
                _ => rng.next_u64() as u8,
            };
        }
        if rng.below(4) == 0 {
            b.truncate(rng.below(b.len() as u64 + 1) as usize);
        }
        fuzz_harness::decode(&b);
        tried += 1;
        if b.len() >= 4 {
            let mut fixed = b.clone();
            let n = fixed.len() - 4;
            let crc = crc32fast::hash(&fixed[..n]);
            fixed[n..].copy_from_slice(&crc.to_be_bytes());
            if let Ok(b) = wire::decode_any(&fixed, None, 256) {
                accepted += 1;
                with_acks += b
                    .entries
                    .iter()
                    .any(|e| matches!(e.msg.body, Body::Lead { acks, .. } if !acks.is_empty()))
                    as u32;
            }
        }
    }
    eprintln!(
        "compact: {tried} edited datagrams, {accepted} accepted once re-sealed, {with_acks} with an ack map"
    );
    assert!(
        accepted > 100 && with_acks > 20,
        "the edits must reach the fields behind the trailer"
    );
}

#[test]
fn cluster_inputs() {
    let saved = inputs("node");
    for data in &saved {
        let _ = fuzz_harness::cluster(data);
    }
    // Random schedules too: the harness must hold for inputs no fuzzer has seen.
    let mut rng = electd::rng::SplitMix64::new(2);
    let (mut steps, mut elections, mut leases) = (0, 0, 0);
    for _ in 0..300 {
        let data: Vec<u8> = (0..4000).map(|_| rng.next_u64() as u8).collect();
        let (s, e, l) = fuzz_harness::cluster(&data);
        steps += s;
        elections += e;
        leases += l;
    }
    eprintln!(
        "cluster: {} saved inputs; random: {steps} steps, {elections} elections, {leases} steps with a lease",
        saved.len()
    );
    assert!(
        elections > 300 && leases > steps / 20,
        "the harness must exercise elections and leases"
    );
}
