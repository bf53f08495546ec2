//! The bytes of an idle LEAD and ACK, annotated for BENCHMARKS.md (issue 25: "say what
//! each byte of an idle LEAD and ACK carries"). Pure: a test includes this file too.

use std::fmt::Write as _;

pub fn wire_layout(out: &mut String, what: &str, pkt: &[u8]) {
    let ihl = usize::from(pkt.first().copied().unwrap_or(0) & 0x0f) * 4;
    let p = pkt.get(ihl + 8..).unwrap_or(&[]);
    let version = p.get(2).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "\nAn idle {what}, captured in the receiver's namespace: {} bytes of IP packet = IP header {ihl} + UDP header 8 + {} bytes of electd datagram ({} bundle, version {version}, unkeyed):\n",
        pkt.len(),
        p.len(),
        if version == 5 { "compact" } else { "classic" },
    );
    let _ = writeln!(out, "| offset | bytes | field | value |");
    let _ = writeln!(out, "| --- | --- | --- | --- |");
    // Every read is bounds-checked: a datagram of an unexpected shape prints fewer rows,
    // never panics the report.
    let be = |r: std::ops::Range<usize>| {
        p.get(r)
            .unwrap_or(&[])
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b))
    };
    let row = |out: &mut String, r: std::ops::Range<usize>, field: &str, value: String| {
        let Some(bytes) = p.get(r.clone()) else {
            return;
        };
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let span = if r.len() > 1 {
            format!("{}-{}", r.start, r.end - 1)
        } else {
            r.start.to_string()
        };
        let _ = writeln!(out, "| {span} | {} | {field} | {value} |", hex.join(" "));
    };
    // A minimal unsigned LEB128 varint at `at`: its value and the byte after it.
    let varint = |at: usize| -> (u64, usize) {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = p.get(at + i) else {
                return (v, at + i);
            };
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return (v, at + i + 1);
            }
        }
        (v, at + 10)
    };
    let alive = |out: &mut String, at: usize| -> usize {
        let alen = usize::from(p.get(at).copied().unwrap_or(0));
        row(out, at..at + 1, "LEAD: alive map length", alen.to_string());
        let ids: Vec<String> = (0..alen * 8)
            .filter(|i| {
                p.get(at + 1 + i / 8)
                    .is_some_and(|b| b & (1 << (i % 8)) != 0)
            })
            .map(|i| (i + 1).to_string())
            .collect();
        row(
            out,
            at + 1..at + 1 + alen,
            "LEAD: alive map (bit i: server i + 1)",
            format!("servers {}", ids.join(", ")),
        );
        at + 1 + alen
    };
    row(out, 0..2, "magic", "`EL`".into());
    let at = if version == 5 {
        row(out, 2..3, "version", "5 (compact bundle, unkeyed)".into());
        row(out, 3..4, "entry count", be(3..4).to_string());
        row(out, 4..5, "sender id", be(4..5).to_string());
        row(
            out,
            5..9,
            "cluster fingerprint (CRC-32)",
            format!("{:#010x}", be(5..9)),
        );
        row(out, 9..10, "entry: group index", be(9..10).to_string());
        let kb = be(10..11);
        let kind = kb & 0x0f;
        row(
            out,
            10..11,
            "entry: kind (bits 0-3), flags (4-6), aux follows (7)",
            format!(
                "{} ({}), flags {}, aux {}",
                kind,
                if kind == 1 { "LEAD" } else { "ACK" },
                (kb >> 4) & 0x07,
                if kb & 0x80 != 0 { "yes" } else { "no" }
            ),
        );
        let mut at = 11;
        if kb & 0x80 != 0 {
            row(
                out,
                at..at + 1,
                "entry: aux (successor)",
                be(at..at + 1).to_string(),
            );
            at += 1;
        }
        let (term, next) = varint(at);
        row(out, at..next, "entry: term (varint)", term.to_string());
        let (seq, next2) = varint(next);
        row(out, next..next2, "entry: seq (varint)", seq.to_string());
        at = next2;
        if kind == 1 {
            let (hold, next3) = varint(at);
            row(
                out,
                at..next3,
                "LEAD: hold_ms (K x HBT, varint)",
                hold.to_string(),
            );
            at = alive(out, next3);
        }
        at
    } else {
        row(
            out,
            2..3,
            "version",
            format!("{} (bundle, unkeyed)", be(2..3)),
        );
        row(out, 3..4, "entry count", be(3..4).to_string());
        row(out, 4..5, "bundle flags", be(4..5).to_string());
        row(out, 5..6, "reserved", be(5..6).to_string());
        row(out, 6..8, "sender id", be(6..8).to_string());
        row(
            out,
            8..12,
            "cluster fingerprint (CRC-32)",
            format!("{:#010x}", be(8..12)),
        );
        row(out, 12..13, "entry: group index", be(12..13).to_string());
        let kind = be(13..14);
        row(
            out,
            13..14,
            "entry: kind",
            format!("{kind} ({})", if kind == 1 { "LEAD" } else { "ACK" }),
        );
        row(out, 14..15, "entry: flags", be(14..15).to_string());
        row(
            out,
            15..16,
            "entry: aux (successor)",
            be(15..16).to_string(),
        );
        row(out, 16..24, "entry: term", be(16..24).to_string());
        row(out, 24..32, "entry: seq", be(24..32).to_string());
        if kind == 1 {
            row(
                out,
                32..36,
                "LEAD: hold_ms (K x HBT)",
                be(32..36).to_string(),
            );
            alive(out, 36)
        } else {
            32
        }
    };
    row(
        out,
        at..at + 4,
        "CRC-32 of all before",
        format!("{:#010x}", be(at..at + 4)),
    );
}
