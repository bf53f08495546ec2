//! The bytes of an idle LEAD and ACK, annotated for BENCHMARKS.md (issue 25: "say what
//! each byte of an idle LEAD and ACK carries"). Pure: tests/bench_wire_layout.rs
//! includes this file too, and holds it to datagrams of the crate's own encoder.
//!
//! Every version the daemon sends has its layout here (src/wire, docs/PROTOCOL.md):
//!
//! - 1 (2 keyed), single message: magic, version, kind, flags, aux, sender u16,
//!   fingerprint u32, term u64, keyed the counter u64; the body in fixed-width
//!   integers (no alive map).
//! - 3 (4 keyed), classic bundle: magic, version, count, flags (0), reserved (0),
//!   sender u16, fingerprint u32, keyed the counter u64; per entry group, kind, flags,
//!   aux, term u64 and the body (a LEAD's with its alive map).
//! - 5 (6 keyed), compact bundle: magic, version, count, sender u8, fingerprint u32,
//!   keyed the counter u64; per entry group, the kind byte (kind in bits 0-3, its flags
//!   in 4-6, bit 7: an aux byte follows), the aux byte when flagged, term varint, and
//!   the body in varints (a LEAD's with its alive map).
//! - 7 (8 keyed): version 5 (6) whose LEAD may set `FLAG_LEAD_ACKS` (0x04, bit 6 of the
//!   kind byte); then an ack map (the followers asked to acknowledge) follows the alive
//!   map.
//!
//! Then the trailer: a CRC-32 of everything before it, or keyed a 16-byte HMAC-SHA256
//! tag (not checked here: the benchmark holds no key). Any other version gets one row
//! saying its layout is unknown here, never another version's. Every read is
//! bounds-checked, and the rows cover every byte of the datagram exactly once, in
//! order: a datagram of an unexpected shape gets a row saying where it stops making
//! sense, never a panic.

use std::fmt::Write as _;

/// One annotated field: bytes `start..end` of the electd datagram (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The field's first byte.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// What the field is.
    pub field: String,
    /// What it carries.
    pub value: String,
}

/// The framings, by how they lay out their bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Layout {
    /// Versions 1 and 2.
    Single,
    /// Versions 3 and 4.
    Classic,
    /// Versions 5 and 6.
    Compact,
    /// Versions 7 and 8: compact, a LEAD may carry an ack map.
    CompactAcks,
}

/// The layout of wire version `v` and whether it is keyed; `None`: unknown here.
fn layout_of(v: u8) -> Option<(Layout, bool)> {
    match v {
        1 => Some((Layout::Single, false)),
        2 => Some((Layout::Single, true)),
        3 => Some((Layout::Classic, false)),
        4 => Some((Layout::Classic, true)),
        5 => Some((Layout::Compact, false)),
        6 => Some((Layout::Compact, true)),
        7 => Some((Layout::CompactAcks, false)),
        8 => Some((Layout::CompactAcks, true)),
        _ => None,
    }
}

/// "compact bundle with ack maps" and the like.
fn framing_name(l: Layout) -> &'static str {
    match l {
        Layout::Single => "single message",
        Layout::Classic => "classic bundle",
        Layout::Compact => "compact bundle",
        Layout::CompactAcks => "compact bundle with ack maps",
    }
}

fn keyed_name(keyed: bool) -> &'static str {
    if keyed { "keyed" } else { "unkeyed" }
}

/// "compact bundle with ack maps, version 7, unkeyed" and the like.
fn describe(v: u8) -> String {
    match layout_of(v) {
        Some((l, keyed)) => format!("{}, version {v}, {}", framing_name(l), keyed_name(keyed)),
        None => format!("version {v}: layout unknown to this benchmark"),
    }
}

const LEAD: u8 = 1;
const ELECT: u8 = 2;
const VOTE: u8 = 3;
const ACK: u8 = 4;

fn kind_name(k: u8) -> &'static str {
    match k {
        LEAD => "LEAD",
        ELECT => "ELECT",
        VOTE => "VOTE",
        ACK => "ACK",
        _ => "unknown kind",
    }
}

/// The names of `flags` of a message of kind `kind` (`acks`: the version defines
/// `FLAG_LEAD_ACKS`), "none" when 0.
fn flag_names(kind: u8, flags: u8, acks: bool) -> String {
    let defined: &[(u8, &str)] = match kind {
        LEAD => &[(0x01, "RESIGN"), (0x02, "UNFIT"), (0x04, "ACKS")],
        ELECT => &[(0x01, "INELIGIBLE"), (0x02, "LAST_RESORT")],
        ACK => &[(0x01, "UNFIT")],
        _ => &[],
    };
    let mut names = Vec::new();
    for bit in (0..8).map(|i| 1u8 << i).filter(|b| flags & b != 0) {
        match defined.iter().find(|(b, _)| *b == bit) {
            Some((_, "ACKS")) if !acks => names.push(format!(
                "ACKS ({bit:#04x}, undefined before version 7: refused)"
            )),
            Some((_, name)) => names.push(format!("{name} ({bit:#04x})")),
            None => names.push(format!("undefined ({bit:#04x}: refused)")),
        }
    }
    if names.is_empty() {
        "none".into()
    } else {
        names.join(" + ")
    }
}

/// "servers 1, 2, 3" for a bitmap (bit i of the map: server i + 1).
fn servers(map: &[u8]) -> String {
    let ids: Vec<String> = (0..map.len() * 8)
        .filter(|i| map[i / 8] & (1 << (i % 8)) != 0)
        .map(|i| (i + 1).to_string())
        .collect();
    match ids.len() {
        0 => "no server".into(),
        1 => format!("server {}", ids[0]),
        _ => format!("servers {}", ids.join(", ")),
    }
}

/// Reads fields off `p[..end]` (the bytes before the trailer) one after the other,
/// each bounds-checked, and writes a row for each.
struct Reader<'a> {
    p: &'a [u8],
    at: usize,
    end: usize,
    rows: Vec<Row>,
    /// A field did not fit: the rest of `..end` has its one row, read nothing more.
    broken: bool,
}

impl<'a> Reader<'a> {
    fn push(&mut self, start: usize, end: usize, field: &str, value: String) {
        if start < end {
            self.rows.push(Row {
                start,
                end,
                field: field.into(),
                value,
            });
        }
    }

    /// The rest of the bytes before the trailer as one row, and nothing read after.
    fn rest(&mut self, field: &str, value: String) {
        if !self.broken {
            self.push(self.at, self.end, field, value);
            self.at = self.end;
            self.broken = true;
        }
    }

    /// `field` does not fit before the trailer.
    fn cut(&mut self, field: &str) {
        self.rest("cut short", format!("{field} does not fit: not annotated"));
    }

    /// The next `n` bytes as `field`, its value from `value`.
    fn take(
        &mut self,
        n: usize,
        field: &str,
        value: impl FnOnce(&[u8]) -> String,
    ) -> Option<&'a [u8]> {
        if self.broken {
            return None;
        }
        let p = self.p;
        let Some(b) = p
            .get(self.at..self.at + n)
            .filter(|_| self.at + n <= self.end)
        else {
            self.cut(field);
            return None;
        };
        let v = value(b);
        self.push(self.at, self.at + n, field, v);
        self.at += n;
        Some(b)
    }

    /// A big-endian unsigned integer of `n` bytes, printed in decimal.
    fn be(&mut self, n: usize, field: &str) -> Option<u64> {
        let b = self.take(n, field, |b| be(b).to_string())?;
        Some(be(b))
    }

    /// A big-endian u32 printed in hex (a CRC-32).
    fn hex32(&mut self, field: &str) -> Option<u64> {
        let b = self.take(4, field, |b| format!("{:#010x}", be(b)))?;
        Some(be(b))
    }

    /// An unsigned LEB128 varint of at most ten bytes.
    fn varint(&mut self, field: &str) -> Option<u64> {
        if self.broken {
            return None;
        }
        let stop = self.end.min(self.at + 10);
        let Some(n) = (self.at..stop).position(|i| self.p[i] & 0x80 == 0) else {
            self.cut(field);
            return None;
        };
        let b = &self.p[self.at..self.at + n + 1];
        let v = b.iter().enumerate().fold(0u64, |v, (i, &x)| {
            v | u64::from(x & 0x7f).wrapping_shl(7 * i as u32)
        });
        let minimal = n == 0 || b[n] != 0;
        let value = if minimal {
            v.to_string()
        } else {
            format!("{v} (not minimal: refused)")
        };
        self.push(self.at, self.at + n + 1, field, value);
        self.at += n + 1;
        Some(v)
    }

    /// A LEAD's map (`what`: "alive map" or "ack map"): a length byte, then the bitmap.
    fn map(&mut self, what: &str, prefix: &str) {
        let Some(n) = self.be(1, &format!("LEAD: {what} length")) else {
            return;
        };
        self.take(
            n as usize,
            &format!("LEAD: {what} (bit i: server i + 1)"),
            |b| format!("{prefix}{}", servers(b)),
        );
    }

    /// A body in fixed-width integers (versions 1 to 4); `maps`: a LEAD's alive map
    /// follows (bundles only).
    fn fixed_body(&mut self, kind: u8, maps: bool) {
        match kind {
            LEAD => {
                self.be(8, "LEAD: seq");
                self.be(4, "LEAD: hold_ms (K x HBT)");
                if maps {
                    self.map("alive map", "");
                }
            }
            ELECT => {
                self.be(8, "ELECT: last_term");
                self.be(8, "ELECT: last_seq");
                self.be(1, "ELECT: priority");
                self.be(1, "ELECT: heard");
            }
            VOTE => {
                self.be(2, "VOTE: candidate");
            }
            ACK => {
                self.be(8, "ACK: seq");
            }
            k => self.rest(
                "not annotated",
                format!("kind {k} is unknown: the entry's length is unknown"),
            ),
        }
    }

    /// A compact body in varints (versions 5 to 8); `acks`: the LEAD's ack map follows
    /// its alive map.
    fn varint_body(&mut self, kind: u8, acks: bool) {
        match kind {
            LEAD => {
                self.varint("LEAD: seq (varint)");
                self.varint("LEAD: hold_ms (K x HBT, varint)");
                self.map("alive map", "");
                if acks {
                    self.map("ack map", "asks ");
                }
            }
            ELECT => {
                self.varint("ELECT: last_term (varint)");
                self.varint("ELECT: last_seq (varint)");
                self.be(1, "ELECT: priority");
                self.be(1, "ELECT: heard");
            }
            VOTE => {
                self.be(1, "VOTE: candidate");
            }
            ACK => {
                self.varint("ACK: seq (varint)");
            }
            k => self.rest(
                "not annotated",
                format!("kind {k} is unknown: the entry's length is unknown"),
            ),
        }
    }

    /// The keyed versions' counter, after the header.
    fn counter(&mut self) {
        self.take(8, "sender's counter (keyed)", |b| {
            let c = be(b);
            format!("{c} (boot {}, datagram {})", c >> 32, c & 0xffff_ffff)
        });
    }

    fn single(&mut self, keyed: bool) {
        let Some(kind) = self.take(1, "kind", |b| format!("{} ({})", b[0], kind_name(b[0]))) else {
            return;
        };
        let kind = kind[0];
        self.take(1, "flags", |b| flag_names(kind, b[0], false));
        self.be(1, "aux (a RESIGN's successor, else 0)");
        self.be(2, "sender id");
        self.hex32("cluster fingerprint (CRC-32)");
        self.be(8, "term");
        if keyed {
            self.counter();
        }
        self.fixed_body(kind, false);
        self.rest("not annotated", "bytes after the message".into());
    }

    fn classic(&mut self, keyed: bool) {
        let count = self.be(1, "entry count").unwrap_or(0);
        self.be(1, "bundle flags (0)");
        self.be(1, "reserved (0)");
        self.be(2, "sender id");
        self.hex32("cluster fingerprint (CRC-32)");
        if keyed {
            self.counter();
        }
        for _ in 0..count {
            if self.broken {
                return;
            }
            self.be(1, "entry: group index");
            let Some(kind) = self.take(1, "entry: kind", |b| {
                format!("{} ({})", b[0], kind_name(b[0]))
            }) else {
                return;
            };
            let kind = kind[0];
            self.take(1, "entry: flags", |b| flag_names(kind, b[0], false));
            self.be(1, "entry: aux (a RESIGN's successor, else 0)");
            self.be(8, "entry: term");
            self.fixed_body(kind, true);
        }
        self.after_entries(count);
    }

    fn compact(&mut self, keyed: bool, acks: bool) {
        let count = self.be(1, "entry count").unwrap_or(0);
        self.be(1, "sender id");
        self.hex32("cluster fingerprint (CRC-32)");
        if keyed {
            self.counter();
        }
        for _ in 0..count {
            if self.broken {
                return;
            }
            self.be(1, "entry: group index");
            let Some(kb) = self.take(
                1,
                "entry: kind byte (kind bits 0-3, flags 4-6, aux follows 7)",
                |b| {
                    let (kind, flags) = (b[0] & 0x0f, b[0] >> 4 & 0x07);
                    format!(
                        "{:#04x}: {} ({kind}), flags {}, {}",
                        b[0],
                        kind_name(kind),
                        flag_names(kind, flags, acks),
                        if b[0] & 0x80 != 0 {
                            "aux follows"
                        } else {
                            "no aux"
                        }
                    )
                },
            ) else {
                return;
            };
            let kb = kb[0];
            let (kind, flags) = (kb & 0x0f, kb >> 4 & 0x07);
            if kb & 0x80 != 0 {
                self.be(1, "entry: aux (a RESIGN's successor)");
            }
            self.varint("entry: term (varint)");
            // The ack map follows only where the version defines the flag: a version-5
            // decoder refuses the flag and reads no map.
            self.varint_body(kind, acks && kind == LEAD && flags & 0x04 != 0);
        }
        self.after_entries(count);
    }

    /// Bytes left between the last entry and the trailer: the count does not match.
    fn after_entries(&mut self, count: u64) {
        self.rest(
            "not annotated",
            format!("bytes after the {count} entries the count announces"),
        );
    }
}

/// A big-endian unsigned integer (bytes beyond 8 shift out).
fn be(b: &[u8]) -> u64 {
    b.iter()
        .fold(0u64, |a, &x| a.wrapping_shl(8) | u64::from(x))
}

/// The rows of electd datagram `p` (the UDP payload), covering every byte once, in
/// order.
pub fn rows(p: &[u8]) -> Vec<Row> {
    let version = p.get(2).copied();
    let layout = version.and_then(layout_of);
    let trailer = match layout {
        Some((_, true)) => 16,
        Some((_, false)) => 4,
        None => 0,
    };
    let end = if p.len() >= trailer {
        p.len() - trailer
    } else {
        p.len()
    };
    let mut r = Reader {
        p,
        at: 0,
        end,
        rows: Vec::new(),
        broken: false,
    };
    let magic = r.take(2, "magic", |b| {
        if b == b"EL" {
            "`EL`".into()
        } else {
            format!("{:02x} {:02x}: not `EL`", b[0], b[1])
        }
    });
    if magic != Some(b"EL") {
        // Not electd's: whatever the version byte says, nothing here is known.
        r.end = p.len();
        r.broken = false;
        r.rest("not annotated", "not an electd datagram".into());
        return r.rows;
    }
    let Some(v) = version else {
        return r.rows;
    };
    let Some((l, keyed)) = layout else {
        r.end = p.len();
        r.take(1, "version", |_| v.to_string());
        r.rest(
            "not annotated",
            format!("version {v}: layout unknown to this benchmark"),
        );
        return r.rows;
    };
    r.take(1, "version", |_| {
        format!("{v} ({}, {})", framing_name(l), keyed_name(keyed))
    });
    match l {
        Layout::Single => r.single(keyed),
        Layout::Classic => r.classic(keyed),
        Layout::Compact => r.compact(keyed, false),
        Layout::CompactAcks => r.compact(keyed, true),
    }
    let mut rows = r.rows;
    if p.len() >= trailer && trailer > 0 {
        let (before, t) = p.split_at(end);
        rows.push(if keyed {
            Row {
                start: end,
                end: p.len(),
                field: "HMAC-SHA256 tag of all before (first 16 bytes)".into(),
                value: "not checked: the benchmark holds no key".into(),
            }
        } else {
            let got = be(t);
            let want = u64::from(crc32fast::hash(before));
            Row {
                start: end,
                end: p.len(),
                field: "CRC-32 of all before".into(),
                value: if got == want {
                    format!("{got:#010x} (matches)")
                } else {
                    format!("{got:#010x} (does not match: the bytes before give {want:#010x})")
                },
            }
        });
    }
    rows
}

/// Writes the table of IP packet `pkt` (IPv4 and UDP headers, then an electd datagram)
/// to `out`, headed by `what` (an idle LEAD or ACK).
pub fn wire_layout(out: &mut String, what: &str, pkt: &[u8]) {
    let ihl = usize::from(pkt.first().copied().unwrap_or(0) & 0x0f) * 4;
    let p = pkt.get(ihl + 8..).unwrap_or(&[]);
    let version = p.get(2).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "\nAn idle {what}, captured in the receiver's namespace: {} bytes of IP packet = IP header {ihl} + UDP header 8 + {} bytes of electd datagram ({}):\n",
        pkt.len(),
        p.len(),
        describe(version),
    );
    let _ = writeln!(out, "| offset | bytes | field | value |");
    let _ = writeln!(out, "| --- | --- | --- | --- |");
    for r in rows(p) {
        let hex: Vec<String> = p[r.start..r.end]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let span = if r.end - r.start > 1 {
            format!("{}-{}", r.start, r.end - 1)
        } else {
            r.start.to_string()
        };
        let _ = writeln!(
            out,
            "| {span} | {} | {} | {} |",
            hex.join(" "),
            r.field,
            r.value
        );
    }
}
