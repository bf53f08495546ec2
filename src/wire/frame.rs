//! The framings: a single message (version 1, keyed 2), a bundle of entries (version
//! 3, keyed 4) and the compact bundle (version 5, keyed 6, or with ack maps version 7,
//! keyed 8, in `compact.rs`).
//! Each writes its header, then [`body`] for every message, then the [`trailer`]; each
//! reads only what [`trailer::open`] has checked.
//!
//! - single: magic, version, kind, flags, aux, sender u16, fingerprint u32, term u64;
//!   then the body.
//! - bundle: magic, version, count, 0, 0, sender u16, fingerprint u32; then per entry
//!   group, kind, flags, aux, term u64 and the body (a LEAD's with its alive map).
//!
//! A keyed version puts the sender's counter (u64) right after the header.

use super::body::{self, Head, Ints, Maps};
use super::trailer::{self, Key};
use super::{
    BUNDLE_HEADER_LEN, COMPACT_HEADER_LEN, COUNTER_LEN, DecodeError, ELECT_BODY, ENTRY_HEAD, Entry,
    Framing, HEADER_LEN, Kind, MAGIC, MAX_DATAGRAM, MAX_ENTRIES, Message, Origin, VERSION,
    VERSION_ACKS, VERSION_ACKS_KEYED, VERSION_BUNDLE, VERSION_BUNDLE_KEYED, VERSION_COMPACT,
    VERSION_COMPACT_KEYED, VERSION_KEYED, VOTE_BODY, entry_len, valid_id,
};
use byteorder::{BigEndian, ByteOrder};

/// One of the eight wire versions: a single message or one of the three bundle
/// framings, unkeyed or keyed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Format {
    /// Single (`None`), or one of the two bundle framings.
    pub bundle: Option<Framing>,
    /// Keyed: a counter after the header and a tag instead of the CRC.
    pub keyed: bool,
}

impl Format {
    /// The format a receiver that speaks the framings up to `top` reads `bytes` in:
    /// keyed when it has keys, a bundle framing when the version byte names one of
    /// that keyed-ness. Anything else is read as a single message, whose checks refuse
    /// a wrong version once the trailer has passed.
    pub fn of(bytes: &[u8], keyed: bool, top: Framing) -> Format {
        let bundle = Framing::ALL.into_iter().filter(|&f| f <= top).find(|&f| {
            let format = Format {
                bundle: Some(f),
                keyed,
            };
            bytes.get(2) == Some(&format.version())
        });
        Format { bundle, keyed }
    }

    /// The version byte.
    pub fn version(self) -> u8 {
        match (self.bundle, self.keyed) {
            (None, false) => VERSION,
            (None, true) => VERSION_KEYED,
            (Some(Framing::Bundle), false) => VERSION_BUNDLE,
            (Some(Framing::Bundle), true) => VERSION_BUNDLE_KEYED,
            (Some(Framing::Compact), false) => VERSION_COMPACT,
            (Some(Framing::Compact), true) => VERSION_COMPACT_KEYED,
            (Some(Framing::CompactAcks), false) => VERSION_ACKS,
            (Some(Framing::CompactAcks), true) => VERSION_ACKS_KEYED,
        }
    }

    /// The header's length, the counter of a keyed version included.
    pub fn header_len(self) -> usize {
        let base = match self.bundle {
            None => HEADER_LEN,
            Some(Framing::Bundle) => BUNDLE_HEADER_LEN,
            Some(Framing::Compact | Framing::CompactAcks) => COMPACT_HEADER_LEN,
        };
        base + if self.keyed { COUNTER_LEN } else { 0 }
    }

    /// The trailer's length.
    pub fn trailer_len(self) -> usize {
        trailer::len(self.keyed)
    }

    /// The bytes a datagram takes besides its messages: header and trailer.
    pub fn overhead(self) -> usize {
        self.header_len() + self.trailer_len()
    }

    /// The shortest datagram: one VOTE (in a compact entry: group, kind, a one-byte
    /// term and a one-byte candidate).
    pub fn min_len(self) -> usize {
        self.overhead()
            + match self.bundle {
                None => VOTE_BODY,
                Some(Framing::Bundle) => ENTRY_HEAD + VOTE_BODY,
                Some(Framing::Compact | Framing::CompactAcks) => 4,
            }
    }

    /// The longest datagram: one ELECT, or any bundle up to `MAX_DATAGRAM`.
    pub fn max_len(self) -> usize {
        if self.bundle.is_some() {
            MAX_DATAGRAM
        } else {
            self.overhead() + ELECT_BODY
        }
    }

    /// The sender's counter of a keyed datagram whose header `signed` opens.
    pub fn counter(self, signed: &[u8]) -> Option<u64> {
        let end = self.header_len();
        self.keyed
            .then(|| BigEndian::read_u64(&signed[end - COUNTER_LEN..end]))
    }
}

/// Appends the header fields every framing opens with: magic, version, then `bytes`.
fn put_start(out: &mut Vec<u8>, format: Format, bytes: [u8; 3]) {
    out.extend_from_slice(&MAGIC);
    out.push(format.version());
    out.extend_from_slice(&bytes);
}

/// Appends `msg` as a single message (version 1, or 2 with `(counter, key)`); returns
/// the bytes written.
pub(super) fn encode_single(msg: &Message, keyed: Option<(u64, &Key)>, out: &mut Vec<u8>) -> usize {
    let format = Format {
        bundle: None,
        keyed: keyed.is_some(),
    };
    let start = out.len();
    out.reserve(format.overhead() + body::len(&msg.body, Maps::None, Ints::Fixed));
    put_start(out, format, body::head(&msg.body, Maps::None));
    out.extend_from_slice(&msg.sender.to_be_bytes());
    out.extend_from_slice(&msg.fingerprint.to_be_bytes());
    out.extend_from_slice(&msg.term.to_be_bytes());
    if let Some((counter, _)) = keyed {
        out.extend_from_slice(&counter.to_be_bytes());
    }
    body::write(&msg.body, Maps::None, Ints::Fixed, out);
    trailer::seal(out, start, keyed.map(|(_, k)| k));
    out.len() - start
}

/// The trailer checked first (CRC or tag), then the magic and this framing's version:
/// the prologue every decode shares. Returns the signed bytes.
pub(super) fn open_framed<'a>(
    bytes: &'a [u8],
    format: Format,
    keys: Option<&[&Key]>,
) -> Result<&'a [u8], DecodeError> {
    let signed = trailer::open(bytes, format, keys)?;
    if signed[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if signed[2] != format.version() {
        return Err(DecodeError::BadVersion(signed[2]));
    }
    Ok(signed)
}

/// Decodes a single message, keyed when `keys` are given: length and trailer, then
/// magic, version, kind, length, and the message's own checks. Returns the message and,
/// keyed, the sender's counter.
pub(super) fn decode_single(
    bytes: &[u8],
    keys: Option<&[&Key]>,
) -> Result<(Message, Option<u64>), DecodeError> {
    let format = Format {
        bundle: None,
        keyed: keys.is_some(),
    };
    let len = bytes.len();
    let signed = open_framed(bytes, format, keys)?;
    let kind = Kind::from_u8(signed[3]).ok_or(DecodeError::BadKind(signed[3]))?;
    let header = format.header_len();
    if signed.len() != header + kind.body_len() {
        return Err(DecodeError::BadLength { kind, len });
    }
    let head = Head {
        sender: BigEndian::read_u16(&signed[6..8]),
        fingerprint: BigEndian::read_u32(&signed[8..12]),
        term: BigEndian::read_u64(&signed[12..20]),
        kind,
        flags: signed[4],
        aux: signed[5],
    };
    let (msg, _) = body::read(head, &signed[header..], Maps::None, Ints::Fixed, len)?;
    Ok((msg, format.counter(signed)))
}

/// Appends one bundle holding `entries` (at most `MAX_ENTRIES`, all from `sender` with
/// `fingerprint`); keyed (version 4) with `(counter, key)` when given, else version 3.
/// Returns the bytes written.
pub fn encode_bundle(
    sender: u16,
    fingerprint: u32,
    entries: &[Entry],
    keyed: Option<(u64, &Key)>,
    out: &mut Vec<u8>,
) -> usize {
    debug_assert!(!entries.is_empty() && entries.len() <= MAX_ENTRIES);
    let entries = &entries[..entries.len().min(MAX_ENTRIES)];
    let format = Format {
        bundle: Some(Framing::Bundle),
        keyed: keyed.is_some(),
    };
    let start = out.len();
    let len: usize = entries.iter().map(|e| entry_len(&e.msg)).sum();
    out.reserve(format.overhead() + len);
    put_start(out, format, [entries.len() as u8, 0, 0]);
    out.extend_from_slice(&sender.to_be_bytes());
    out.extend_from_slice(&fingerprint.to_be_bytes());
    if let Some((counter, _)) = keyed {
        out.extend_from_slice(&counter.to_be_bytes());
    }
    for e in entries {
        out.push(e.group);
        out.extend_from_slice(&body::head(&e.msg.body, Maps::Alive));
        out.extend_from_slice(&e.msg.term.to_be_bytes());
        body::write(&e.msg.body, Maps::Alive, Ints::Fixed, out);
    }
    trailer::seal(out, start, keyed.map(|(_, k)| k));
    out.len() - start
}

/// Decodes a bundle, keyed when `keys` are given: length and trailer, then magic,
/// version, count, the zero bytes and the sender; then each entry (its group below
/// `groups`, its kind, and the message's own checks); then that the entries fill it.
pub(super) fn decode_bundle(
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
    entries: &mut Vec<Entry>,
) -> Result<Origin, DecodeError> {
    let format = Format {
        bundle: Some(Framing::Bundle),
        keyed: keys.is_some(),
    };
    let len = bytes.len();
    let signed = open_framed(bytes, format, keys)?;
    let count = usize::from(signed[3]);
    if count == 0 || count > MAX_ENTRIES {
        return Err(DecodeError::BadCount(count));
    }
    if signed[4] != 0 || signed[5] != 0 {
        return Err(DecodeError::BadFlags(signed[4] | signed[5]));
    }
    let sender = BigEndian::read_u16(&signed[6..8]);
    if !valid_id(sender) {
        return Err(DecodeError::BadId(sender));
    }
    let fingerprint = BigEndian::read_u32(&signed[8..12]);
    entries.clear();
    entries.reserve(count);
    let mut at = format.header_len();
    for _ in 0..count {
        let e = signed
            .get(at..at + ENTRY_HEAD)
            .ok_or(DecodeError::BadCount(count))?;
        let group = e[0];
        if usize::from(group) >= groups {
            return Err(DecodeError::BadGroup(group));
        }
        let kind = Kind::from_u8(e[1]).ok_or(DecodeError::BadKind(e[1]))?;
        let head = Head {
            sender,
            fingerprint,
            term: BigEndian::read_u64(&e[4..12]),
            kind,
            flags: e[2],
            aux: e[3],
        };
        let (msg, used) = body::read(
            head,
            &signed[at + ENTRY_HEAD..],
            Maps::Alive,
            Ints::Fixed,
            len,
        )?;
        at += ENTRY_HEAD + used;
        entries.push(Entry { group, msg });
    }
    if at != signed.len() {
        return Err(DecodeError::BadCount(count));
    }
    Ok(Origin {
        sender,
        counter: format.counter(signed),
    })
}
