//! The benchmark's byte tables (bench/wire_layout.rs, printed into BENCHMARKS.md: issue
//! 25 asks to "say what each byte of an idle LEAD and ACK carries"), held to datagrams
//! of the crate's own encoder in every version the daemon sends: every byte covered
//! once, in order, and every field named with the value the decoder reads.
//!
//! The tables are parsed from the markdown the benchmark prints, so this test holds
//! what lands in BENCHMARKS.md, not an intermediate.

#[path = "../bench/wire_layout.rs"]
mod wire_layout;

use electd::wire::{self, Body, Entry, Framing, Key, Message, PeerSet};

const FP: u32 = 0xcf7f_cb26;

fn set(ids: &[u16]) -> PeerSet {
    let mut s = PeerSet::EMPTY;
    for &i in ids {
        s.insert(i);
    }
    s
}

/// The idle LEAD of a 3-server cluster at heartbeat 100 ms (K = 3: hold 300 ms) from
/// server 1, every server alive, asking `asks` (empty: everyone).
fn idle_lead(asks: &[u16]) -> Entry {
    Entry {
        group: 0,
        msg: Message {
            sender: 1,
            fingerprint: FP,
            term: 1,
            body: Body::Lead {
                seq: 108,
                hold_ms: 300,
                resign: false,
                successor: 0,
                unfit: false,
                alive: set(&[1, 2, 3]),
                acks: set(asks),
            },
        },
    }
}

/// The ACK of that LEAD from server 2.
fn idle_ack() -> Entry {
    Entry {
        group: 0,
        msg: Message {
            sender: 2,
            fingerprint: FP,
            term: 1,
            body: Body::Ack {
                seq: 108,
                unfit: false,
            },
        },
    }
}

fn encode(framing: Framing, e: Entry, keyed: bool) -> Vec<u8> {
    let k = Key::new(b"bench wire layout, thirty-two by");
    let mut b = Vec::new();
    let counter = 1 << 32 | 7;
    wire::encode_in(
        framing,
        e.msg.sender,
        FP,
        &[e],
        keyed.then_some((counter, &k)),
        &mut b,
    );
    b
}

/// `payload` behind a minimal IPv4 header (20 bytes, no options) and a UDP header, as
/// the benchmark's raw socket captures it.
fn ip_udp(payload: &[u8]) -> Vec<u8> {
    let total = (20 + 8 + payload.len()) as u16;
    let mut p = vec![
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&7400u16.to_be_bytes());
    p.extend_from_slice(&7400u16.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

#[derive(Debug)]
struct Row {
    start: usize,
    end: usize,
    bytes: String,
    field: String,
    value: String,
}

/// The benchmark's table of `datagram`: its heading and rows, parsed from the markdown.
fn table(datagram: &[u8]) -> (String, Vec<Row>) {
    let mut out = String::new();
    wire_layout::wire_layout(&mut out, "LEAD (test)", &ip_udp(datagram));
    let heading = out
        .lines()
        .find(|l| l.starts_with("An idle"))
        .unwrap_or_default()
        .to_string();
    let rows = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| offset") && !l.starts_with("| ---"))
        .map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(c.len(), 4, "four columns: {l}");
            let (start, end) = match c[0].split_once('-') {
                Some((a, b)) => (a.parse().unwrap(), b.parse::<usize>().unwrap() + 1),
                None => (c[0].parse().unwrap(), c[0].parse::<usize>().unwrap() + 1),
            };
            Row {
                start,
                end,
                bytes: c[1].into(),
                field: c[2].into(),
                value: c[3].into(),
            }
        })
        .collect();
    (heading, rows)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every byte of `d` in exactly one row, the rows in order, each row's bytes the
/// datagram's.
fn assert_covers(d: &[u8], rows: &[Row]) {
    let mut at = 0;
    for r in rows {
        assert_eq!(r.start, at, "row {r:?} does not start where the last ended");
        assert!(
            r.end > r.start && r.end <= d.len(),
            "row {r:?} out of 0..{}",
            d.len()
        );
        assert_eq!(r.bytes, hex(&d[r.start..r.end]), "row {r:?}");
        at = r.end;
    }
    assert_eq!(
        at,
        d.len(),
        "rows end at {at} of {} bytes: {rows:#?}",
        d.len()
    );
}

/// The one row named `field`: its offsets and value.
fn field<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    let found: Vec<&Row> = rows.iter().filter(|r| r.field == name).collect();
    assert_eq!(found.len(), 1, "one row {name:?} in {rows:#?}");
    found[0]
}

fn value(rows: &[Row], name: &str) -> String {
    field(rows, name).value.clone()
}

/// The trailer is the last 4 bytes and carries the CRC-32 of all before.
fn assert_crc(d: &[u8], rows: &[Row]) {
    let r = field(rows, "CRC-32 of all before");
    assert_eq!((r.start, r.end), (d.len() - 4, d.len()));
    let crc = crc32fast::hash(&d[..d.len() - 4]);
    assert_eq!(
        u32::from_be_bytes(d[d.len() - 4..].try_into().unwrap()),
        crc
    );
    assert_eq!(r.value, format!("{crc:#010x} (matches)"));
}

const KIND: &str = "entry: kind byte (kind bits 0-3, flags 4-6, aux follows 7)";

/// The compact header, term and the fields both idle datagrams share.
fn assert_compact_head(rows: &[Row], version: u8, sender: u16) {
    assert_eq!(value(rows, "magic"), "`EL`");
    let name = if version >= 7 {
        "compact bundle with ack maps"
    } else {
        "compact bundle"
    };
    let keyed = if version % 2 == 0 { "keyed" } else { "unkeyed" };
    assert_eq!(
        value(rows, "version"),
        format!("{version} ({name}, {keyed})")
    );
    assert_eq!(value(rows, "entry count"), "1");
    assert_eq!(value(rows, "sender id"), sender.to_string());
    assert_eq!(
        (field(rows, "sender id").start, field(rows, "sender id").end),
        (4, 5)
    );
    assert_eq!(value(rows, "cluster fingerprint (CRC-32)"), "0xcf7fcb26");
    assert_eq!(value(rows, "entry: group index"), "0");
    assert_eq!(value(rows, "entry: term (varint)"), "1");
}

#[test]
fn an_idle_v7_lead_asking_one_follower() {
    let d = encode(Framing::CompactAcks, idle_lead(&[2]), false);
    assert_eq!(d.len(), 23, "the idle sparse LEAD of docs/PROTOCOL.md");
    let (heading, rows) = table(&d);
    assert!(
        heading.contains(
            "23 bytes of electd datagram (compact bundle with ack maps, version 7, unkeyed)"
        ),
        "{heading}"
    );
    assert!(heading.contains("51 bytes of IP packet = IP header 20 + UDP header 8"));
    assert_covers(&d, &rows);
    assert_compact_head(&rows, 7, 1);
    assert_eq!(
        value(&rows, KIND),
        "0x41: LEAD (1), flags ACKS (0x04), no aux"
    );
    assert_eq!(value(&rows, "LEAD: seq (varint)"), "108");
    let hold = field(&rows, "LEAD: hold_ms (K x HBT, varint)");
    assert_eq!((hold.start, hold.end, hold.value.as_str()), (13, 15, "300"));
    assert_eq!(value(&rows, "LEAD: alive map length"), "1");
    assert_eq!(
        value(&rows, "LEAD: alive map (bit i: server i + 1)"),
        "servers 1, 2, 3"
    );
    assert_eq!(value(&rows, "LEAD: ack map length"), "1");
    let asked = field(&rows, "LEAD: ack map (bit i: server i + 1)");
    assert_eq!((asked.start, asked.bytes.as_str()), (18, "02"));
    assert_eq!(asked.value, "asks server 2");
    assert_crc(&d, &rows);
    assert_eq!(rows.len(), 15);
}

#[test]
fn an_idle_v7_lead_asking_everyone_has_no_ack_map() {
    let d = encode(Framing::CompactAcks, idle_lead(&[]), false);
    let (heading, rows) = table(&d);
    assert!(heading.contains("(compact bundle with ack maps, version 7, unkeyed)"));
    assert_covers(&d, &rows);
    assert_eq!(value(&rows, KIND), "0x01: LEAD (1), flags none, no aux");
    assert!(
        !rows.iter().any(|r| r.field.contains("ack map")),
        "{rows:#?}"
    );
    assert_crc(&d, &rows);
}

#[test]
fn an_idle_v7_ack() {
    let d = encode(Framing::CompactAcks, idle_ack(), false);
    assert_eq!(d.len(), 17);
    let (heading, rows) = table(&d);
    assert!(
        heading.contains(
            "17 bytes of electd datagram (compact bundle with ack maps, version 7, unkeyed)"
        ),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_compact_head(&rows, 7, 2);
    assert_eq!(value(&rows, KIND), "0x04: ACK (4), flags none, no aux");
    let seq = field(&rows, "ACK: seq (varint)");
    assert_eq!((seq.start, seq.end, seq.value.as_str()), (12, 13, "108"));
    assert_crc(&d, &rows);
    assert_eq!(rows.len(), 10);
}

#[test]
fn an_idle_v5_lead_and_ack() {
    let d = encode(Framing::Compact, idle_lead(&[2]), false);
    assert_eq!(
        hex(&d),
        hex(&encode(Framing::Compact, idle_lead(&[]), false))
    );
    let (heading, rows) = table(&d);
    assert!(
        heading.contains("21 bytes of electd datagram (compact bundle, version 5, unkeyed)"),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_compact_head(&rows, 5, 1);
    assert_eq!(value(&rows, KIND), "0x01: LEAD (1), flags none, no aux");
    assert_eq!(value(&rows, "LEAD: seq (varint)"), "108");
    assert_eq!(value(&rows, "LEAD: hold_ms (K x HBT, varint)"), "300");
    assert_eq!(
        value(&rows, "LEAD: alive map (bit i: server i + 1)"),
        "servers 1, 2, 3"
    );
    assert!(!rows.iter().any(|r| r.field.contains("ack map")));
    assert_crc(&d, &rows);

    let d = encode(Framing::Compact, idle_ack(), false);
    let (heading, rows) = table(&d);
    assert!(
        heading.contains("(compact bundle, version 5, unkeyed)"),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_compact_head(&rows, 5, 2);
    assert_eq!(value(&rows, KIND), "0x04: ACK (4), flags none, no aux");
    assert_eq!(value(&rows, "ACK: seq (varint)"), "108");
    assert_crc(&d, &rows);
}

#[test]
fn a_classic_v3_lead() {
    let d = encode(Framing::Bundle, idle_lead(&[2]), false);
    assert_eq!(d.len(), 42);
    let (heading, rows) = table(&d);
    assert!(
        heading.contains("42 bytes of electd datagram (classic bundle, version 3, unkeyed)"),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_eq!(value(&rows, "version"), "3 (classic bundle, unkeyed)");
    assert_eq!(value(&rows, "entry count"), "1");
    assert_eq!(value(&rows, "sender id"), "1");
    assert_eq!(
        (
            field(&rows, "sender id").start,
            field(&rows, "sender id").end
        ),
        (6, 8)
    );
    assert_eq!(value(&rows, "cluster fingerprint (CRC-32)"), "0xcf7fcb26");
    assert_eq!(value(&rows, "entry: kind"), "1 (LEAD)");
    assert_eq!(value(&rows, "entry: flags"), "none");
    assert_eq!(value(&rows, "entry: term"), "1");
    assert_eq!(value(&rows, "LEAD: seq"), "108");
    assert_eq!(value(&rows, "LEAD: hold_ms (K x HBT)"), "300");
    assert_eq!(
        value(&rows, "LEAD: alive map (bit i: server i + 1)"),
        "servers 1, 2, 3"
    );
    assert!(!rows.iter().any(|r| r.field.contains("ack map")));
    assert_crc(&d, &rows);
}

/// Keyed (versions 8, 6 and 4): the counter after the header and the 16-byte tag.
#[test]
fn keyed_versions_show_counter_and_tag() {
    for (framing, version, counter_at) in [
        (Framing::CompactAcks, 8u8, 9),
        (Framing::Compact, 6, 9),
        (Framing::Bundle, 4, 12),
    ] {
        for e in [idle_lead(&[2]), idle_ack()] {
            let d = encode(framing, e, true);
            let (heading, rows) = table(&d);
            assert!(
                heading.contains(&format!("version {version}, keyed")),
                "{heading}"
            );
            assert_covers(&d, &rows);
            let c = field(&rows, "sender's counter (keyed)");
            assert_eq!((c.start, c.end), (counter_at, counter_at + 8));
            assert_eq!(c.value, format!("{} (boot 1, datagram 7)", 1u64 << 32 | 7));
            let t = field(&rows, "HMAC-SHA256 tag of all before (first 16 bytes)");
            assert_eq!((t.start, t.end), (d.len() - 16, d.len()));
            assert!(!rows.iter().any(|r| r.field.contains("CRC-32 of all")));
        }
    }
    let d = encode(Framing::CompactAcks, idle_lead(&[2]), true);
    let (_, rows) = table(&d);
    assert_eq!(
        value(&rows, "LEAD: ack map (bit i: server i + 1)"),
        "asks server 2"
    );
}

/// A version-1 single message (no alive map).
#[test]
fn a_single_message_v1() {
    let d = wire::encode_to_vec(&idle_lead(&[]).msg);
    let (heading, rows) = table(&d);
    assert!(
        heading.contains("(single message, version 1, unkeyed)"),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_eq!(value(&rows, "kind"), "1 (LEAD)");
    assert_eq!(value(&rows, "term"), "1");
    assert_eq!(value(&rows, "LEAD: seq"), "108");
    assert_eq!(value(&rows, "LEAD: hold_ms (K x HBT)"), "300");
    assert_crc(&d, &rows);
}

/// Every kind and flag in every unkeyed bundle version: covered once, the CRC matches,
/// and no row says it could not read.
#[test]
fn every_kind_and_flag_is_read_whole() {
    let m = |body| Entry {
        group: 2,
        msg: Message {
            sender: 200,
            fingerprint: FP,
            term: 1 << 40,
            body,
        },
    };
    let entries = [
        m(Body::Lead {
            seq: 1 << 20,
            hold_ms: u32::MAX,
            resign: true,
            successor: 9,
            unfit: true,
            alive: set(&[1, 200]),
            acks: PeerSet::EMPTY,
        }),
        m(Body::Lead {
            seq: 5,
            hold_ms: 3000,
            resign: false,
            successor: 0,
            unfit: true,
            alive: set(&[255]),
            acks: set(&[9, 255]),
        }),
        m(Body::Elect {
            last_term: 7,
            last_seq: 300,
            priority: 10,
            heard: 3,
            ineligible: true,
            last_resort: true,
        }),
        m(Body::Vote { candidate: 200 }),
        m(Body::Ack {
            seq: 1,
            unfit: true,
        }),
    ];
    for framing in Framing::ALL {
        let k = Key::new(b"bench wire layout, thirty-two by");
        let mut d = Vec::new();
        wire::encode_in(framing, 200, FP, &entries, None, &mut d);
        let (_, rows) = table(&d);
        assert_covers(&d, &rows);
        assert_crc(&d, &rows);
        assert!(
            !rows
                .iter()
                .any(|r| r.field == "cut short" || r.field == "not annotated"),
            "{framing:?}: {rows:#?}"
        );
        assert_eq!(
            rows.iter()
                .filter(|r| r.field.ends_with("group index"))
                .count(),
            5
        );
        let kinds: Vec<&str> = rows
            .iter()
            .filter(|r| r.field.starts_with("entry: kind"))
            .map(|r| r.value.as_str())
            .collect();
        if framing == Framing::Bundle {
            assert_eq!(
                kinds,
                ["1 (LEAD)", "1 (LEAD)", "2 (ELECT)", "3 (VOTE)", "4 (ACK)"]
            );
        } else {
            let acks = if framing == Framing::CompactAcks {
                " + ACKS (0x04)"
            } else {
                ""
            };
            assert_eq!(
                kinds,
                [
                    "0xb1: LEAD (1), flags RESIGN (0x01) + UNFIT (0x02), aux follows".to_string(),
                    format!(
                        "{:#04x}: LEAD (1), flags UNFIT (0x02){acks}, no aux",
                        if acks.is_empty() { 0x21 } else { 0x61 }
                    ),
                    "0x32: ELECT (2), flags INELIGIBLE (0x01) + LAST_RESORT (0x02), no aux"
                        .to_string(),
                    "0x03: VOTE (3), flags none, no aux".to_string(),
                    "0x14: ACK (4), flags UNFIT (0x01), no aux".to_string(),
                ]
            );
            assert_eq!(value(&rows, "entry: aux (a RESIGN's successor)"), "9");
            assert_eq!(value(&rows, "VOTE: candidate"), "200");
            assert_eq!(value(&rows, "ELECT: last_seq (varint)"), "300");
        }
        let asked: Vec<&str> = rows
            .iter()
            .filter(|r| r.field.starts_with("LEAD: ack map ("))
            .map(|r| r.value.as_str())
            .collect();
        if framing == Framing::CompactAcks {
            assert_eq!(asked, ["asks servers 9, 255"]);
        } else {
            assert!(asked.is_empty());
        }
        let mut keyed = Vec::new();
        wire::encode_in(framing, 200, FP, &entries, Some((3, &k)), &mut keyed);
        let (_, rows) = table(&keyed);
        assert_covers(&keyed, &rows);
        assert!(
            !rows
                .iter()
                .any(|r| r.field == "cut short" || r.field == "not annotated")
        );
    }
}

/// An unknown version gets one row saying so, not another version's layout.
#[test]
fn an_unknown_version_is_not_annotated() {
    let mut d = encode(Framing::CompactAcks, idle_lead(&[2]), false);
    d[2] = 9;
    let (heading, rows) = table(&d);
    assert!(
        heading.contains("(version 9: layout unknown to this benchmark)"),
        "{heading}"
    );
    assert_covers(&d, &rows);
    assert_eq!(value(&rows, "magic"), "`EL`");
    assert_eq!(value(&rows, "version"), "9");
    assert_eq!(rows.len(), 3, "{rows:#?}");
    assert_eq!(rows[2].value, "version 9: layout unknown to this benchmark");
}

/// Every truncation and every single-byte corruption of the datagrams above: no
/// panic, and still every byte covered exactly once.
#[test]
fn short_and_corrupt_input_never_panics() {
    let mut ds = Vec::new();
    for framing in Framing::ALL {
        for keyed in [false, true] {
            ds.push(encode(framing, idle_lead(&[2]), keyed));
            ds.push(encode(framing, idle_ack(), keyed));
        }
    }
    ds.push(wire::encode_to_vec(&idle_ack().msg));
    for d in &ds {
        for n in 0..=d.len() {
            let (_, rows) = table(&d[..n]);
            assert_covers(&d[..n], &rows);
        }
        for i in 0..d.len() {
            for x in [0x00, 0x80, 0xff, d[i] ^ 0x40] {
                let mut c = d.clone();
                c[i] = x;
                let (_, rows) = table(&c);
                assert_covers(&c, &rows);
            }
        }
    }
    // Shorter than the IP and UDP headers.
    let mut out = String::new();
    wire_layout::wire_layout(&mut out, "x", &[0x45, 0, 0]);
    wire_layout::wire_layout(&mut out, "x", &[]);
}

/// The floor of the idle benchmark (bench/floor.rs) sends datagrams of electd's idle
/// sizes: a sparse idle LEAD and an ACK in the framing servers of one build use at
/// rest (version 7, `CompactAcks`). It sent 42 and 36 bytes, version 3's sizes, three
/// framings after electd had moved to 22 and 17.
#[test]
fn the_floor_sends_electds_idle_sizes() {
    #[allow(dead_code)]
    #[path = "../bench/floor.rs"]
    mod floor;
    let lead = encode(Framing::CompactAcks, idle_lead(&[2]), false);
    let ack = encode(Framing::CompactAcks, idle_ack(), false);
    assert_eq!(
        (floor::LEAD_LEN, floor::ACK_LEN),
        (lead.len(), ack.len()),
        "bench/floor.rs: the floor's datagram sizes against electd's idle LEAD and ACK"
    );
}
