//! Unit tests of the wire format: round trips, bit flips, one error per check.

use super::*;
use crate::rng::SplitMix64;
use byteorder::{BigEndian, ByteOrder};

fn samples() -> Vec<Message> {
    let m = |term, body| Message {
        sender: 7,
        fingerprint: 0xDEAD_BEEF,
        term,
        body,
    };
    vec![
        m(
            1,
            Body::Lead {
                seq: 1,
                hold_ms: 3000,
                resign: false,
                successor: 0,
                unfit: false,
                alive: PeerSet::EMPTY,
                acks: PeerSet::EMPTY,
            },
        ),
        m(
            u64::MAX,
            Body::Lead {
                seq: u64::MAX,
                hold_ms: u32::MAX,
                resign: true,
                successor: 255,
                unfit: false,
                alive: PeerSet::EMPTY,
                acks: PeerSet::EMPTY,
            },
        ),
        m(
            4,
            Body::Lead {
                seq: 9,
                hold_ms: 300,
                resign: true,
                successor: 0,
                unfit: false,
                alive: PeerSet::EMPTY,
                acks: PeerSet::EMPTY,
            },
        ),
        m(
            9,
            Body::Elect {
                last_term: 8,
                last_seq: 42,
                priority: 10,
                heard: 3,
                ineligible: false,
                last_resort: false,
            },
        ),
        m(
            0,
            Body::Elect {
                last_term: 0,
                last_seq: 0,
                priority: 255,
                heard: 255,
                ineligible: true,
                last_resort: true,
            },
        ),
        m(5, Body::Vote { candidate: 255 }),
        m(5, Body::Vote { candidate: 1 }),
        m(
            77,
            Body::Ack {
                seq: 123_456_789,
                unfit: false,
            },
        ),
        m(
            78,
            Body::Ack {
                seq: 1,
                unfit: true,
            },
        ),
    ]
}

#[test]
fn every_kind_round_trips() {
    for msg in samples() {
        let bytes = encode_to_vec(&msg);
        assert_eq!(
            bytes.len(),
            HEADER_LEN + msg.body.kind().body_len() + TRAILER_LEN
        );
        assert_eq!(decode(&bytes), Ok(msg), "{msg:?}");
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let mut checked = 0;
    for msg in samples() {
        let bytes = encode_to_vec(&msg);
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&b).is_err(), "flip of bit {bit} in {msg:?} accepted");
            checked += 1;
        }
    }
    assert!(checked > 1000);
}

#[test]
fn truncation_and_extension_are_rejected() {
    for msg in samples() {
        let bytes = encode_to_vec(&msg);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}

/// Re-signs `bytes` after a field edit, so the check under test is not the CRC.
fn resign(mut bytes: Vec<u8>) -> Vec<u8> {
    let n = bytes.len() - TRAILER_LEN;
    let crc = crc32fast::hash(&bytes[..n]);
    BigEndian::write_u32(&mut bytes[n..], crc);
    bytes
}

#[test]
fn each_field_check_has_its_own_error() {
    let vote = encode_to_vec(&samples()[5]);
    let edit = |i: usize, v: u8| {
        let mut b = vote.clone();
        b[i] = v;
        decode(&resign(b))
    };
    assert_eq!(edit(0, b'X'), Err(DecodeError::BadMagic));
    assert_eq!(edit(2, 2), Err(DecodeError::BadVersion(2)));
    assert_eq!(edit(3, 9), Err(DecodeError::BadKind(9)));
    assert_eq!(
        edit(3, 1),
        Err(DecodeError::BadLength {
            kind: Kind::Lead,
            len: vote.len()
        })
    );
    assert_eq!(edit(4, 1), Err(DecodeError::BadFlags(1)));
    assert_eq!(edit(5, 4), Err(DecodeError::BadFlags(4)));
    assert_eq!(edit(7, 0), Err(DecodeError::BadId(0)));
    assert_eq!(edit(6, 1), Err(DecodeError::BadId(256 + 7)));
    assert_eq!(edit(21, 0), Err(DecodeError::BadId(0)));
    // A successor byte is allowed only in a RESIGN.
    let lead = encode_to_vec(&samples()[0]);
    let mut b = lead.clone();
    b[5] = 3;
    assert_eq!(decode(&resign(b)), Err(DecodeError::BadFlags(3)));
    let ack = encode_to_vec(&samples()[7]);
    let mut b = ack.clone();
    b[5] = 3;
    assert_eq!(decode(&resign(b)), Err(DecodeError::BadFlags(3)));
    let mut b = ack.clone();
    b[4] = 2;
    assert_eq!(decode(&resign(b)), Err(DecodeError::BadFlags(2)));
    // LAST_RESORT only beside INELIGIBLE (SPEC 13): alone it is refused.
    let elect = encode_to_vec(&samples()[3]);
    assert!(matches!(
        samples()[3].body,
        Body::Elect {
            ineligible: false,
            ..
        }
    ));
    let mut b = elect.clone();
    b[4] = 2;
    assert_eq!(decode(&resign(b)), Err(DecodeError::BadFlags(2)));
    let mut b = elect.clone();
    b[4] = 3;
    assert!(matches!(
        decode(&resign(b)).map(|m| m.body),
        Ok(Body::Elect {
            ineligible: true,
            last_resort: true,
            ..
        })
    ));
    assert_eq!(decode(&[0u8; 3]), Err(DecodeError::TooShort(3)));
    assert_eq!(decode(&[0u8; 100]), Err(DecodeError::TooLong(100)));
    assert_eq!(decode(&[0u8; 30]), Err(DecodeError::BadTrailer));
}

#[test]
fn keyed_round_trip_every_flip_and_wrong_key_rejected() {
    let k = Key::new(&[7u8; 32]);
    let other = Key::new(&[8u8; 32]);
    for (i, msg) in samples().into_iter().enumerate() {
        let mut b = Vec::new();
        encode_keyed(&msg, 1 << 32 | i as u64, &k, &mut b);
        assert_eq!(decode_keyed(&b, &[&k]), Ok((msg, 1 << 32 | i as u64)));
        assert_eq!(
            decode_keyed(&b, &[&other, &k]),
            Ok((msg, 1 << 32 | i as u64)),
            "next key"
        );
        assert_eq!(decode_keyed(&b, &[&other]), Err(DecodeError::BadTag));
        assert!(decode(&b).is_err(), "a keyed datagram is no unkeyed one");
        for bit in 0..b.len() * 8 {
            let mut f = b.clone();
            f[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_keyed(&f, &[&k]).is_err(), "flip {bit} accepted");
        }
        // An unkeyed datagram is refused by a keyed receiver.
        assert!(decode_keyed(&encode_to_vec(&msg), &[&k]).is_err());
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = SplitMix64::new(0x5EED);
    let mut accepted = 0;
    for i in 0..100_000u32 {
        let len = rng.below(MAX_LEN as u64 + 8) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // Half the inputs get a valid trailer, so the field checks behind it run too.
        if i % 2 == 0 && len >= TRAILER_LEN {
            if len > 4 {
                b[0..2].copy_from_slice(&MAGIC);
            }
            b = resign(b);
        }
        if decode(&b).is_ok() {
            accepted += 1;
        }
        let _ = decode_keyed(&b, &[&Key::new(b"k")]);
    }
    // With magic and trailer fixed, some random bodies are valid messages.
    assert!(accepted < 100_000);
}

// ----- bundles (issue 12) -----

fn alive(ids: &[u16]) -> PeerSet {
    let mut a = PeerSet::EMPTY;
    for &i in ids {
        a.insert(i);
    }
    a
}

/// Every sample as an entry, the LEADs with alive maps of several lengths.
fn entries() -> Vec<Entry> {
    let maps = [alive(&[]), alive(&[1, 7]), alive(&[3, 200, 255])];
    samples()
        .into_iter()
        .enumerate()
        .map(|(i, mut msg)| {
            if let Body::Lead { alive, .. } = &mut msg.body {
                *alive = maps[i % 3];
            }
            Entry {
                group: (i % 4) as u8,
                msg,
            }
        })
        .collect()
}

#[test]
fn peer_sets_hold_ids_1_to_255() {
    let a = alive(&[1, 8, 9, 255, 0, 256]);
    assert_eq!(a.iter().collect::<Vec<_>>(), vec![1, 8, 9, 255]);
    assert_eq!(a.len(), 4);
    assert!(!a.contains(0) && !a.contains(2) && a.contains(255));
    assert_eq!(alive(&[1]).wire_bytes(), &[1]);
    assert_eq!(alive(&[9]).wire_bytes(), &[0, 1]);
    assert!(PeerSet::EMPTY.wire_bytes().is_empty() && PeerSet::EMPTY.is_empty());
    // `iter` walks the set bits: the same ids, ascending, as testing each id.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut sets = vec![PeerSet::EMPTY, alive(&(1..=255).collect::<Vec<_>>())];
    sets.extend((1..=255).map(|id| alive(&[id])));
    for _ in 0..200 {
        let mut s = PeerSet::EMPTY;
        for id in 1..=255u16 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 5 == 0 {
                s.insert(id);
            }
        }
        sets.push(s);
    }
    for s in &sets {
        let naive: Vec<u16> = (1..=255).filter(|&id| s.contains(id)).collect();
        assert_eq!(s.iter().collect::<Vec<_>>(), naive);
        assert_eq!(s.len(), naive.len());
        // The wire bytes end at the highest id's byte (found by words).
        let mut bytes = [0u8; 32];
        for &id in &naive {
            bytes[usize::from(id - 1) / 8] |= 1 << ((id - 1) % 8);
        }
        let n = naive.last().map_or(0, |&id| usize::from(id - 1) / 8 + 1);
        assert_eq!(s.wire_bytes(), &bytes[..n]);
    }
}

#[test]
fn bundles_round_trip_keyed_and_not() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let all = entries();
    for n in 1..=all.len() {
        let es = &all[..n];
        let mut b = Vec::new();
        encode_bundle(7, 0xDEAD_BEEF, es, None, &mut b);
        let got = decode_any(&b, None, 4).unwrap();
        assert_eq!((got.sender, got.counter), (7, None));
        assert_eq!(got.entries, es);
        let mut k = Vec::new();
        encode_bundle(7, 0xDEAD_BEEF, es, Some((0x1234, &key)), &mut k);
        let got = decode_any(&k, Some(&[&key]), 4).unwrap();
        assert_eq!((got.counter, got.entries.as_slice()), (Some(0x1234), es));
        // Under the next key of a rotation as well; never under another one alone.
        let other = Key::new(b"another key, also thirty-two by!");
        assert!(decode_any(&k, Some(&[&other, &key]), 4).is_ok());
        assert_eq!(decode_any(&k, Some(&[&other]), 4), Err(DecodeError::BadTag));
        // A keyed cluster refuses unkeyed bundles and the reverse.
        assert!(decode_any(&b, Some(&[&key]), 4).is_err());
        assert!(decode_any(&k, None, 4).is_err());
    }
    // Version 1 still decodes, as one entry of group 0 with no alive map.
    let v1 = encode_to_vec(&samples()[0]);
    let got = decode_any(&v1, None, 1).unwrap();
    assert_eq!(
        got.entries,
        vec![Entry {
            group: 0,
            msg: samples()[0]
        }]
    );
}

#[test]
fn every_bit_flip_of_a_bundle_is_rejected() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let es = entries();
    for keyed in [false, true] {
        let mut b = Vec::new();
        encode_bundle(7, 1, &es, keyed.then_some((9, &key)), &mut b);
        let keys = [&key];
        let k = keyed.then_some(&keys[..]);
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert!(decode_any(&x, k, 4).is_err(), "flip {i} keyed {keyed}");
        }
        for cut in 0..b.len() {
            assert!(decode_any(&b[..cut], k, 4).is_err(), "cut at {cut}");
        }
    }
}

/// Re-signs an unkeyed bundle after an edit, so the field checks are reached.
fn recrc(mut b: Vec<u8>) -> Vec<u8> {
    let n = b.len() - TRAILER_LEN;
    let crc = crc32fast::hash(&b[..n]);
    b[n..].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn each_bundle_check_has_its_own_error() {
    let lead = Entry {
        group: 2,
        msg: samples()[0],
    };
    let mut b = Vec::new();
    encode_bundle(7, 1, &[lead], None, &mut b);
    assert_eq!(decode_any(&b, None, 2), Err(DecodeError::BadGroup(2)));
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut x = b.clone();
        f(&mut x);
        decode_any(&recrc(x), None, 4)
    };
    assert_eq!(edit(&|x| x[3] = 0), Err(DecodeError::BadCount(0)));
    assert_eq!(edit(&|x| x[3] = 2), Err(DecodeError::BadCount(2)));
    assert_eq!(edit(&|x| x[3] = 200), Err(DecodeError::BadCount(200)));
    assert_eq!(edit(&|x| x[4] = 1), Err(DecodeError::BadFlags(1)));
    assert_eq!(edit(&|x| x[0] = b'X'), Err(DecodeError::BadMagic));
    assert_eq!(edit(&|x| x[7] = 0), Err(DecodeError::BadId(0)));
    assert_eq!(edit(&|x| x[13] = 9), Err(DecodeError::BadKind(9)));
    // The alive map: a length beyond 32, or a trailing zero byte, is refused.
    let at = BUNDLE_HEADER_LEN + ENTRY_HEAD + LEAD_BODY;
    assert_eq!(b[at], 0, "an empty map");
    let long = edit(&|x| {
        x[at] = 33;
        x.splice(at + 1..at + 1, [1u8; 33]);
    });
    assert!(
        matches!(long, Err(DecodeError::BadLength { .. })),
        "{long:?}"
    );
    let zero = edit(&|x| {
        x[at] = 1;
        x.insert(at + 1, 0);
    });
    assert!(
        matches!(zero, Err(DecodeError::BadLength { .. })),
        "{zero:?}"
    );
    assert_eq!(
        edit(&|x| x.insert(at + 1, 0)),
        Err(DecodeError::BadCount(1)),
        "a byte after the last entry"
    );
    let huge = vec![0u8; MAX_DATAGRAM + 1];
    assert_eq!(
        decode_any(&huge, None, 4),
        Err(DecodeError::TooLong(MAX_DATAGRAM + 1))
    );
}

/// The packer keeps every bundle within MAX_BUNDLE_LEN; one heartbeat of 64 groups'
/// LEADs on 5 servers (alive map of one byte) fits in two datagrams.
#[test]
fn the_packer_splits_at_the_byte_limit() {
    let lead = |g: u8| Entry {
        group: g,
        msg: Message {
            sender: 1,
            fingerprint: 1,
            term: 1_000,
            body: Body::Lead {
                seq: 123_456,
                hold_ms: 300,
                resign: false,
                successor: 0,
                unfit: false,
                alive: alive(&[1, 2, 3, 4, 5]),
                acks: PeerSet::EMPTY,
            },
        },
    };
    let ack = Message {
        sender: 2,
        fingerprint: 1,
        term: 1_000,
        body: Body::Ack {
            seq: 123_456,
            unfit: false,
        },
    };
    assert_eq!(entry_len(&lead(0).msg), 26);
    assert_eq!(entry_len(&ack), 20);
    for (g, want) in [(1usize, 1usize), (8, 1), (64, 2)] {
        let es: Vec<Entry> = (0..g).map(|k| lead(k as u8)).collect();
        let runs = pack(&es, false);
        assert_eq!(runs.len(), want, "{g} groups");
        let mut total = 0;
        for r in runs {
            let mut b = Vec::new();
            encode_bundle(1, 1, &es[r.clone()], None, &mut b);
            assert!(b.len() <= MAX_BUNDLE_LEN);
            total += r.len();
        }
        assert_eq!(total, g);
    }
    let one: Vec<Entry> = vec![lead(0)];
    let mut b = Vec::new();
    encode_bundle(1, 1, &one, None, &mut b);
    assert_eq!(b.len(), BUNDLE_HEADER_LEN + 26 + TRAILER_LEN);
    let many: Vec<Entry> = (0..300).map(|k| lead((k % 64) as u8)).collect();
    assert!(pack(&many, true).iter().all(|r| r.len() <= MAX_ENTRIES));
}

// ----- the compact bundle (issue 25) -----

fn compact(es: &[Entry], keyed: Option<(u64, &Key)>) -> Vec<u8> {
    let mut b = Vec::new();
    let n = encode_in(Framing::Compact, 7, 0xDEAD_BEEF, es, keyed, &mut b);
    assert_eq!(n, b.len());
    b
}

/// Versions 5/6 carry exactly what versions 3/4 carry: the same `Bundle` decodes from
/// both, for every prefix of the sample entries, keyed and not.
#[test]
fn compact_bundles_are_the_same_bundles() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let all = entries();
    for n in 1..=all.len() {
        let es = &all[..n];
        for keyed in [None, Some((0x1234_0000_0001, &key))] {
            let keys = [&key];
            let k = keyed.map(|_| &keys[..]);
            let c = compact(es, keyed);
            let mut v3 = Vec::new();
            encode_bundle(7, 0xDEAD_BEEF, es, keyed, &mut v3);
            let got = decode_any(&c, k, 4).unwrap();
            assert_eq!(got.entries, es);
            assert_eq!(Ok(&got), decode_any(&v3, k, 4).as_ref());
            assert_eq!(c[2], if keyed.is_some() { 6 } else { 5 });
            assert_eq!(Framing::of(&c), Framing::Compact);
            assert_eq!(Framing::of(&v3), Framing::Bundle);
            let want: usize = es
                .iter()
                .map(|e| entry_len_in(Framing::Compact, &e.msg))
                .sum();
            let over = COMPACT_HEADER_LEN + if keyed.is_some() { 8 + TAG_LEN } else { 4 };
            assert_eq!(c.len(), over + want);
            assert_eq!(c.len(), bundle_len(Framing::Compact, es, keyed.is_some()));
            assert_eq!(v3.len(), bundle_len(Framing::Bundle, es, keyed.is_some()));
            // A keyed cluster refuses the unkeyed compact form and the reverse.
            let other = if keyed.is_some() {
                None
            } else {
                Some(&keys[..])
            };
            assert!(decode_any(&c, other, 4).is_err());
        }
    }
}

#[test]
fn every_bit_flip_and_cut_of_a_compact_bundle_is_rejected() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let es = entries();
    for keyed in [false, true] {
        let b = compact(&es, keyed.then_some((9, &key)));
        let keys = [&key];
        let k = keyed.then_some(&keys[..]);
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert!(decode_any(&x, k, 4).is_err(), "flip {i} keyed {keyed}");
        }
        for cut in 0..b.len() {
            assert!(decode_any(&b[..cut], k, 4).is_err(), "cut at {cut}");
            if !keyed && cut >= TRAILER_LEN {
                // Re-sealed, so the field checks meet the short entry.
                let x = recrc(b[..cut].to_vec());
                assert!(decode_any(&x, None, 4).is_err(), "sealed cut at {cut}");
            }
        }
        let other = Key::new(b"another key, also thirty-two by!");
        if keyed {
            assert_eq!(decode_any(&b, Some(&[&other]), 4), Err(DecodeError::BadTag));
        }
    }
}

#[test]
fn each_compact_check_has_its_own_error() {
    let ack = Entry {
        group: 1,
        msg: samples()[8],
    };
    let b = compact(&[ack], None);
    // magic, 5, count 1, sender 7, fingerprint, group 1, kind ACK|UNFIT<<4, term 78, seq 1
    assert_eq!(
        &b[..13],
        &[b'E', b'L', 5, 1, 7, 0xDE, 0xAD, 0xBE, 0xEF, 1, 0x14, 78, 1]
    );
    assert_eq!(b.len(), 17);
    assert_eq!(decode_any(&b, None, 1), Err(DecodeError::BadGroup(1)));
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut x = b.clone();
        f(&mut x);
        decode_any(&recrc(x), None, 4)
    };
    assert_eq!(edit(&|x| x[3] = 0), Err(DecodeError::BadCount(0)));
    assert_eq!(edit(&|x| x[3] = 129), Err(DecodeError::BadCount(129)));
    assert_eq!(edit(&|x| x[3] = 2), Err(DecodeError::BadCount(2)));
    assert_eq!(edit(&|x| x[4] = 0), Err(DecodeError::BadId(0)));
    assert_eq!(edit(&|x| x[10] = 0x09), Err(DecodeError::BadKind(9)));
    assert_eq!(edit(&|x| x[10] = 0x24), Err(DecodeError::BadFlags(2)));
    // An aux byte on an ACK is refused (only a RESIGN names a successor); without the
    // byte, the ACK's seq is missing (the body is read before the flags are checked).
    let aux = |x: &mut Vec<u8>| {
        x[10] = 0x94;
        x.insert(11, 5);
    };
    assert_eq!(edit(&aux), Err(DecodeError::BadFlags(5)));
    assert!(matches!(
        edit(&|x| x[10] = 0x94),
        Err(DecodeError::BadLength { .. })
    ));
    // Varints: overlong term or seq, and a seq cut short.
    assert_eq!(
        edit(&|x| x.splice(11..12, [0xCE, 0x00]).for_each(drop)),
        Err(DecodeError::BadVarint)
    );
    assert_eq!(
        edit(&|x| x.splice(12..13, [0x81, 0x00]).for_each(drop)),
        Err(DecodeError::BadVarint)
    );
    assert!(matches!(
        edit(&|x| x[12] = 0x81),
        Err(DecodeError::BadLength {
            kind: Kind::Ack,
            ..
        })
    ));
    assert_eq!(edit(&|x| x.insert(13, 0)), Err(DecodeError::BadCount(1)));
    // A RESIGN's successor rides behind the aux flag, never as a 0.
    let resign = Entry {
        group: 0,
        msg: samples()[1],
    };
    let r = compact(&[resign], None);
    assert_eq!(r[10], 0x81 | FLAG_RESIGN << 4);
    assert_eq!(r[11], 255);
    let mut x = r.clone();
    x[11] = 0;
    assert_eq!(
        decode_any(&recrc(x), None, 4),
        Err(DecodeError::BadFlags(0x91))
    );
    // hold_ms above u32::MAX: the LEAD of sample 0 is term 1, seq 1, hold 3000.
    let lead = compact(
        &[Entry {
            group: 0,
            msg: samples()[0],
        }],
        None,
    );
    assert_eq!(&lead[10..15], &[0x01, 1, 1, 0xB8, 0x17]);
    let mut x = lead.clone();
    x.splice(13..15, [0x80, 0x80, 0x80, 0x80, 0x10]);
    assert_eq!(decode_any(&recrc(x), None, 4), Err(DecodeError::BadVarint));
}

/// The idle LEAD and ACK of docs/PROTOCOL.md: 21 and 17 bytes (42 and 36 in version 3).
#[test]
fn an_idle_heartbeat_is_half_the_bytes() {
    let m = |sender, body| Entry {
        group: 0,
        msg: Message {
            sender,
            fingerprint: 0xcf7f_cb26,
            term: 1,
            body,
        },
    };
    let lead = m(
        1,
        Body::Lead {
            seq: 108,
            hold_ms: 300,
            resign: false,
            successor: 0,
            unfit: false,
            alive: alive(&[1, 2, 3]),
            acks: PeerSet::EMPTY,
        },
    );
    let ack = m(
        2,
        Body::Ack {
            seq: 108,
            unfit: false,
        },
    );
    for (e, v5, v3) in [(lead, 21, 42), (ack, 17, 36)] {
        let mut c = Vec::new();
        encode_in(
            Framing::Compact,
            e.msg.sender,
            0xcf7f_cb26,
            &[e],
            None,
            &mut c,
        );
        let mut b = Vec::new();
        encode_bundle(e.msg.sender, 0xcf7f_cb26, &[e], None, &mut b);
        assert_eq!((c.len(), b.len()), (v5, v3));
    }
}

#[test]
fn the_compact_packer_splits_at_the_byte_limit() {
    let lead = |g: u8| Entry {
        group: g,
        msg: Message {
            sender: 1,
            fingerprint: 1,
            term: u64::MAX,
            body: Body::Lead {
                seq: u64::MAX,
                hold_ms: u32::MAX,
                resign: true,
                successor: 9,
                unfit: true,
                alive: alive(&[255]),
                acks: PeerSet::EMPTY,
            },
        },
    };
    // The largest LEAD entry: 3 + 10 + 10 + 5 + 33 bytes, more than version 3's 45.
    assert_eq!(entry_len_in(Framing::Compact, &lead(0).msg), 61);
    let es: Vec<Entry> = (0..255).map(|k| lead(k as u8)).collect();
    for keyed in [false, true] {
        let runs = pack_in(Framing::Compact, &es, keyed);
        let mut total = 0;
        let key = Key::new(b"k");
        for r in runs {
            assert!(r.len() <= MAX_ENTRIES);
            let mut b = Vec::new();
            encode_in(
                Framing::Compact,
                1,
                1,
                &es[r.clone()],
                keyed.then_some((1, &key)),
                &mut b,
            );
            assert!(b.len() <= MAX_BUNDLE_LEN, "{}", b.len());
            total += r.len();
        }
        assert_eq!(total, es.len());
    }
}

// ----- the host's non-allocating paths (issue 25) -----

/// `pack_in` as it was before `runs`: the reference the iterator must match.
fn reference_pack(framing: Framing, entries: &[Entry], keyed: bool) -> Vec<std::ops::Range<usize>> {
    let fixed = frame::Format {
        bundle: Some(framing),
        keyed,
    }
    .overhead();
    let mut out = Vec::new();
    let (mut start, mut len) = (0, fixed);
    for (i, e) in entries.iter().enumerate() {
        let l = entry_len_in(framing, &e.msg);
        if i > start && (len + l > MAX_BUNDLE_LEN || i - start == MAX_ENTRIES) {
            out.push(start..i);
            start = i;
            len = fixed;
        }
        len += l;
    }
    if start < entries.len() {
        out.push(start..entries.len());
    }
    out
}

/// Random entries: every sample kind, random groups, terms and seqs from small to
/// near 2^64 (the varint lengths), alive maps of random sizes.
fn random_entries(rng: &mut SplitMix64, n: usize) -> Vec<Entry> {
    let kinds = entries();
    (0..n)
        .map(|_| {
            let mut e = kinds[rng.below(kinds.len() as u64) as usize];
            e.group = rng.below(64) as u8;
            e.msg.term = rng.next_u64() >> rng.below(64);
            if let Body::Lead {
                seq, alive, acks, ..
            } = &mut e.msg.body
            {
                *seq = rng.next_u64() >> rng.below(64);
                *alive = PeerSet::EMPTY;
                for _ in 0..rng.below(40) {
                    alive.insert(1 + rng.below(255) as u16);
                }
                // Half of them ask some followers (a RESIGN's too: never carried).
                *acks = PeerSet::EMPTY;
                for _ in 0..rng.below(2) * (1 + rng.below(20)) {
                    acks.insert(1 + rng.below(255) as u16);
                }
            }
            e
        })
        .collect()
}

#[test]
fn the_packing_iterator_is_the_packer() {
    let mut rng = SplitMix64::new(0x25_25);
    for i in 0..3_000 {
        // Mostly small (a heartbeat), now and then past the byte and entry limits.
        let n = if i % 10 == 0 {
            rng.below(400)
        } else {
            rng.below(6)
        };
        let es = random_entries(&mut rng, n as usize);
        for framing in Framing::ALL {
            for keyed in [false, true] {
                let got: Vec<_> = runs(framing, &es, keyed).collect();
                assert_eq!(got, reference_pack(framing, &es, keyed), "{i} {framing:?}");
                assert_eq!(pack_in(framing, &es, keyed), got);
            }
        }
    }
}

#[test]
fn decoding_into_a_used_vector_is_decoding() {
    let mut rng = SplitMix64::new(0x25_26);
    let key = Key::new(b"k");
    let next = Key::new(b"n");
    // Reused across every input, as the host reuses it: it holds the last one's.
    let mut into = random_entries(&mut rng, 9);
    let mut accepted = 0;
    for i in 0..20_000u32 {
        let keyed = i % 3 == 0;
        let framing = Framing::ALL[(i % 3) as usize];
        let n = 1 + rng.below(5) as usize;
        let es: Vec<Entry> = random_entries(&mut rng, n)
            .into_iter()
            .map(|mut e| {
                e.msg.sender = 3;
                e.msg.fingerprint = 0xF1F1;
                e.group %= 4;
                e
            })
            .collect();
        let mut b = Vec::new();
        encode_in(framing, 3, 0xF1F1, &es, keyed.then_some((7, &key)), &mut b);
        // Adversarial: a flip, a cut, an extension, random bytes, or a single message.
        match rng.below(6) {
            0 => {
                let bit = rng.below(b.len() as u64 * 8) as usize;
                b[bit / 8] ^= 1 << (bit % 8);
            }
            1 => b.truncate(rng.below(b.len() as u64) as usize),
            2 => b.push(rng.next_u64() as u8),
            3 => b = (0..rng.below(80)).map(|_| rng.next_u64() as u8).collect(),
            4 if !keyed => b = encode_to_vec(&es[0].msg),
            _ => {}
        }
        let keys: &[&Key] = if i % 6 == 0 { &[&next, &key] } else { &[&key] };
        let keys = keyed.then_some(keys);
        for groups in [1, 4] {
            let want = decode_any(&b, keys, groups);
            let got = decode_any_into(&b, keys, groups, &mut into);
            match (want, got) {
                (Ok(w), Ok(g)) => {
                    accepted += 1;
                    assert_eq!((g.sender, g.counter), (w.sender, w.counter), "{i}");
                    assert_eq!(into, w.entries, "{i}");
                }
                (Err(w), Err(g)) => assert_eq!(w, g, "{i}"),
                (w, g) => panic!("{i}: decode_any {w:?}, decode_any_into {g:?}"),
            }
        }
    }
    assert!(accepted > 5_000, "too few valid inputs: {accepted}");
}

// ----- versions 7 and 8: the ack map (issue 25, sparse acknowledgements) -----

/// What a framing carries of `e`: the ack map only in versions 7/8 and never a
/// RESIGN's; every other framing writes it as empty.
fn as_carried(framing: Framing, mut e: Entry) -> Entry {
    if let Body::Lead { resign, acks, .. } = &mut e.msg.body
        && (framing != Framing::CompactAcks || *resign)
    {
        *acks = PeerSet::EMPTY;
    }
    e
}

/// Random bodies round-trip in every framing, keyed and not: the ack map is kept in
/// versions 7/8 and dropped to empty in 1 to 6 (a single message also drops the alive
/// map); lengths are exact.
#[test]
fn ack_maps_travel_in_versions_7_and_8_only() {
    let mut rng = SplitMix64::new(0x25_07);
    let key = Key::new(b"k1 with enough bytes to be a key");
    let mut carried = 0;
    for i in 0..4_000u32 {
        let es: Vec<Entry> = {
            let n = 1 + rng.below(6) as usize;
            random_entries(&mut rng, n)
        }
        .into_iter()
        .map(|mut e| {
            e.msg.sender = 7;
            e.msg.fingerprint = 0xDEAD_BEEF;
            e
        })
        .collect();
        for keyed in [None, Some((0x1_0000_0009, &key))] {
            let keys = [&key];
            let k = keyed.map(|_| &keys[..]);
            for framing in Framing::ALL {
                let mut b = Vec::new();
                let n = encode_in(framing, 7, 0xDEAD_BEEF, &es, keyed, &mut b);
                assert_eq!((n, n), (b.len(), bundle_len(framing, &es, keyed.is_some())));
                let want: Vec<Entry> = es.iter().map(|&e| as_carried(framing, e)).collect();
                let got = decode_any(&b, k, 64).unwrap();
                assert_eq!(got.entries, want, "{i} {framing:?}");
                assert_eq!(Framing::of(&b), framing);
                let v = |u, k| if keyed.is_some() { k } else { u };
                let version = match framing {
                    Framing::Bundle => v(3, 4),
                    Framing::Compact => v(5, 6),
                    Framing::CompactAcks => v(7, 8),
                };
                assert_eq!(b[2], version);
                if framing == Framing::CompactAcks {
                    carried += want
                        .iter()
                        .filter(
                            |e| matches!(e.msg.body, Body::Lead { acks, .. } if !acks.is_empty()),
                        )
                        .count();
                } else {
                    // Whatever the entries, 1-6 never set the flag: byte for byte what
                    // the same entries without ack maps make.
                    let mut plain = Vec::new();
                    encode_in(framing, 7, 0xDEAD_BEEF, &want, keyed, &mut plain);
                    assert_eq!(b, plain, "{i} {framing:?}");
                }
            }
            // The single message drops both maps.
            for e in es.iter().filter(|e| e.group == 0) {
                let b = match keyed {
                    None => encode_to_vec(&e.msg),
                    Some((c, key)) => {
                        let mut b = Vec::new();
                        encode_keyed(&e.msg, c, key, &mut b);
                        b
                    }
                };
                let got = decode_any(&b, k, 1).unwrap();
                let mut want = as_carried(Framing::Compact, *e);
                if let Body::Lead { alive, .. } = &mut want.msg.body {
                    *alive = PeerSet::EMPTY;
                }
                assert_eq!(got.entries, [want]);
            }
        }
    }
    assert!(carried > 1_000, "{carried}");
}

/// One LEAD of term 5, seq 9, hold 300, alive {1, 2}, asking `acks`, as a v7 datagram.
fn acks_lead(acks: &[u16], resign: bool) -> Entry {
    Entry {
        group: 0,
        msg: Message {
            sender: 1,
            fingerprint: 0xF1F1,
            term: 5,
            body: Body::Lead {
                seq: 9,
                hold_ms: 300,
                resign,
                successor: 0,
                unfit: false,
                alive: alive(&[1, 2]),
                acks: alive(acks),
            },
        },
    }
}

#[test]
fn each_ack_map_check_has_its_own_error() {
    let mut b = Vec::new();
    encode_in(
        Framing::CompactAcks,
        1,
        0xF1F1,
        &[acks_lead(&[3], false)],
        None,
        &mut b,
    );
    // magic, 7, count, sender, fp; group 0, LEAD | ACKS << 4, term 5, seq 9, hold 300,
    // alive (1 byte: 1, 2), acks (1 byte: 3); CRC.
    assert_eq!(
        &b[..b.len() - 4],
        &[
            b'E', b'L', 7, 1, 1, 0, 0, 0xF1, 0xF1, 0, 0x41, 5, 9, 0xAC, 0x02, 1, 0x03, 1, 0x04
        ]
    );
    let ok = decode_any(&b, None, 1).unwrap();
    assert_eq!(ok.entries, [acks_lead(&[3], false)]);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut x = b.clone();
        f(&mut x);
        decode_any(&recrc(x), None, 1)
    };
    // The flag in versions 5 (and 3's flags byte): undefined there, as in older builds.
    assert_eq!(edit(&|x| x[2] = 5), Err(DecodeError::BadFlags(0x04)));
    let mut v3 = Vec::new();
    encode_bundle(1, 0xF1F1, &[acks_lead(&[], false)], None, &mut v3);
    v3[14] = FLAG_LEAD_ACKS;
    assert_eq!(
        decode_any(&recrc(v3), None, 1),
        Err(DecodeError::BadFlags(0x04))
    );
    // With RESIGN: a RESIGN never asks.
    assert_eq!(
        edit(&|x| x[10] = 0x51),
        Err(DecodeError::BadFlags(FLAG_RESIGN | FLAG_LEAD_ACKS))
    );
    // Empty map, a map of 33 bytes, a trailing zero byte, a map cut short.
    assert_eq!(
        edit(&|x| x.splice(17..19, [0]).for_each(drop)),
        Err(DecodeError::BadAcks(0))
    );
    let long = |x: &mut Vec<u8>| {
        x.splice(17..19, [33]).for_each(drop);
        x.splice(18..18, [1; 33]).for_each(drop);
    };
    assert_eq!(edit(&long), Err(DecodeError::BadAcks(33)));
    assert_eq!(
        edit(&|x| x.splice(17..19, [2, 4, 0]).for_each(drop)),
        Err(DecodeError::BadAcks(2))
    );
    assert!(matches!(
        edit(&|x| x[17] = 2),
        Err(DecodeError::BadLength {
            kind: Kind::Lead,
            ..
        })
    ));
    // Without the flag, the map is an extra byte: the entries do not fill it.
    assert_eq!(edit(&|x| x[10] = 0x01), Err(DecodeError::BadCount(1)));
    assert_eq!(DecodeError::BadAcks(0).reason(), "bad_acks");
    // Encoding a RESIGN drops its map in every framing, so no flag is ever set with it.
    for framing in Framing::ALL {
        let mut r = Vec::new();
        encode_in(framing, 1, 0xF1F1, &[acks_lead(&[3], true)], None, &mut r);
        let got = decode_any(&r, None, 1).unwrap();
        assert_eq!(got.entries, [acks_lead(&[], true)], "{framing:?}");
    }
    // A full map: 255 ids in 32 bytes.
    let all: Vec<u16> = (1..=255).collect();
    let mut f = Vec::new();
    encode_in(
        Framing::CompactAcks,
        1,
        0xF1F1,
        &[acks_lead(&all, false)],
        None,
        &mut f,
    );
    assert_eq!(
        decode_any(&f, None, 1).unwrap().entries,
        [acks_lead(&all, false)]
    );
}

/// A build that speaks up to version 5/6 (or 3/4) reads versions 7/8 (or 5 to 8) as
/// such a build does: as a single message of an unknown version (`bad_version`, or
/// `too_short`/`too_long` when no single message has its length), never as a bundle.
#[test]
fn a_capped_decoder_refuses_what_it_does_not_speak() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let es = [acks_lead(&[3], false)];
    for keyed in [None, Some((9, &key))] {
        let keys = [&key];
        let k = keyed.map(|_| &keys[..]);
        for framing in Framing::ALL {
            let mut b = Vec::new();
            encode_in(framing, 1, 0xF1F1, &es, keyed, &mut b);
            for top in Framing::ALL {
                let mut into = Vec::new();
                let got = decode_upto_into(top, &b, k, 1, &mut into);
                if framing <= top {
                    assert_eq!(into, [as_carried(framing, es[0])]);
                    assert!(got.is_ok());
                } else {
                    assert!(
                        matches!(
                            got,
                            Err(DecodeError::BadVersion(_)
                                | DecodeError::TooLong(_)
                                | DecodeError::TooShort(_))
                        ),
                        "{framing:?} under {top:?}: {got:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_bit_flip_and_cut_of_a_version_7_bundle_is_rejected_or_harmless() {
    let key = Key::new(b"k1 with enough bytes to be a key");
    let mut es = entries();
    es.push(acks_lead(&[2, 3], false));
    es.push(acks_lead(&[255], false));
    for keyed in [false, true] {
        let mut b = Vec::new();
        encode_in(
            Framing::CompactAcks,
            7,
            0xDEAD_BEEF,
            &es,
            keyed.then_some((9, &key)),
            &mut b,
        );
        let keys = [&key];
        let k = keyed.then_some(&keys[..]);
        for i in 0..b.len() * 8 {
            let mut x = b.clone();
            x[i / 8] ^= 1 << (i % 8);
            assert!(decode_any(&x, k, 4).is_err(), "flip {i} keyed {keyed}");
            if !keyed {
                // Re-sealed: the field checks meet the flip; never a panic, and what
                // decodes re-encodes to the same bytes (canonical).
                let x = recrc(x);
                if let Ok(got) = decode_any(&x, None, 256) {
                    let mut again = Vec::new();
                    encode_in(
                        Framing::CompactAcks,
                        got.sender,
                        0,
                        &got.entries,
                        None,
                        &mut again,
                    );
                    let fp = got.entries[0].msg.fingerprint;
                    again.clear();
                    encode_in(
                        Framing::CompactAcks,
                        got.sender,
                        fp,
                        &got.entries,
                        None,
                        &mut again,
                    );
                    assert_eq!(again, x, "flip {i} decoded but is not canonical");
                }
            }
        }
        for cut in 0..b.len() {
            assert!(decode_any(&b[..cut], k, 4).is_err(), "cut at {cut}");
            if !keyed && cut >= TRAILER_LEN {
                let x = recrc(b[..cut].to_vec());
                assert!(decode_any(&x, None, 4).is_err(), "sealed cut at {cut}");
            }
        }
    }
}
