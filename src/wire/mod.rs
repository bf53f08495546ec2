//! The wire format (SPEC sections 3 and 10): one body codec under three framings, with
//! one trailer check.
//!
//! - `body`: each message kind's flags and body, encoded and decoded by one function
//!   pair that every framing uses (a LEAD's alive map rides in bundles only), its
//!   integers fixed-width or varints as the framing says.
//! - `frame`: the first two framings. A single message (version 1, or 2 when keyed) has
//!   a 20-byte header holding the kind, flags, sender, fingerprint and term; a bundle
//!   (version 3, or 4 when keyed) has a 12-byte header and many entries, each naming
//!   its election group, kind, flags and term. Keyed versions add the sender's counter
//!   after the header.
//! - `compact`: the compact bundle (version 5, or 6 when keyed): the same entries as
//!   version 3/4 without the bytes that are always zero, with a 9-byte header and
//!   varint terms, sequence numbers and hold (`varint`). A host sends it to a peer once
//!   it has heard that peer speak it (src/host/peers.rs): older builds drop it.
//!   Versions 7 and 8 are the same compact bundle whose LEAD may also carry an ack map
//!   (the followers it asks to acknowledge it, `FLAG_LEAD_ACKS`); a host sends them to
//!   a peer once it has heard that peer speak them.
//! - `trailer`: the CRC-32 (unkeyed) or truncated HMAC-SHA256 tag (keyed) that ends
//!   every datagram, sealed by one function and verified by one function, before any
//!   field is read.
//!
//! Decoding checks the length and the trailer first, then every field, and returns a
//! typed error for anything malformed. Nothing here can panic on bytes from the
//! network: every read is bounds-checked by the length test that precedes it.

mod body;
mod compact;
mod crc;
mod frame;
mod trailer;
mod varint;

pub use body::{Body, PeerSet};
pub use trailer::Key;

use std::fmt;

/// The two magic bytes that open every datagram.
pub const MAGIC: [u8; 2] = *b"EL";
/// The single-message wire version, unkeyed.
pub const VERSION: u8 = 1;
/// Header length of a single message: magic, version, kind, flags, aux (a RESIGN's
/// successor), sender, fingerprint, term.
pub const HEADER_LEN: usize = 20;
/// Trailer length of an unkeyed datagram: a CRC-32.
pub const TRAILER_LEN: usize = 4;
/// The longest valid version-1 datagram (an ELECT); anything longer is refused unread.
pub const MAX_LEN: usize = HEADER_LEN + ELECT_BODY + TRAILER_LEN;
/// The shortest valid version-1 datagram (a VOTE).
pub const MIN_LEN: usize = HEADER_LEN + VOTE_BODY + TRAILER_LEN;

/// The keyed single-message version: a counter after the term, an HMAC tag instead of
/// the CRC.
pub const VERSION_KEYED: u8 = 2;
/// Keyed header: the version-1 header plus the sender's 8-byte counter.
pub const KEYED_HEADER_LEN: usize = HEADER_LEN + COUNTER_LEN;
/// The truncated HMAC-SHA256 tag.
pub const TAG_LEN: usize = 16;
/// The longest keyed single-message datagram.
pub const KEYED_MAX_LEN: usize = KEYED_HEADER_LEN + ELECT_BODY + TAG_LEN;
/// The shortest keyed single-message datagram.
pub const KEYED_MIN_LEN: usize = KEYED_HEADER_LEN + VOTE_BODY + TAG_LEN;

/// The bundle format, unkeyed: many messages (entries) in one datagram, each naming its
/// election group, ending with a CRC-32.
pub const VERSION_BUNDLE: u8 = 3;
/// The bundle format, keyed: the sender's counter after the header, an HMAC tag instead
/// of the CRC (as version 2 does it).
pub const VERSION_BUNDLE_KEYED: u8 = 4;
/// Bundle header: magic, version, count, flags (0), reserved (0), sender, fingerprint.
pub const BUNDLE_HEADER_LEN: usize = 12;
/// The compact bundle, unkeyed: the version-3 entries in fewer bytes (varint terms,
/// sequence numbers and hold; no always-zero bytes), ending with a CRC-32.
pub const VERSION_COMPACT: u8 = 5;
/// The compact bundle, keyed: the sender's counter after the header, an HMAC tag
/// instead of the CRC.
pub const VERSION_COMPACT_KEYED: u8 = 6;
/// Compact bundle header: magic, version, count, sender u8, fingerprint.
pub const COMPACT_HEADER_LEN: usize = 9;
/// The compact bundle with ack maps, unkeyed: version 5 whose LEADs may carry the set of
/// followers asked to acknowledge them (`FLAG_LEAD_ACKS`).
pub const VERSION_ACKS: u8 = 7;
/// The compact bundle with ack maps, keyed: version 6 whose LEADs may carry it.
pub const VERSION_ACKS_KEYED: u8 = 8;
/// The most entries in one bundle.
pub const MAX_ENTRIES: usize = 128;
/// The packer fills datagrams up to this many bytes: within the IPv6 minimum MTU
/// (1280) after the IP and UDP headers, so a bundle is never fragmented.
pub const MAX_BUNDLE_LEN: usize = 1200;
/// A datagram longer than this is refused unread.
pub const MAX_DATAGRAM: usize = 8192;

/// The sender's counter in the keyed versions.
const COUNTER_LEN: usize = 8;
/// Entry header: group, kind, flags, aux (a RESIGN's successor), term.
const ENTRY_HEAD: usize = 12;
/// The longest alive map a LEAD entry carries (255 ids).
const MAX_ALIVE: usize = 32;

const LEAD_BODY: usize = 12;
const ELECT_BODY: usize = 18;
const VOTE_BODY: usize = 2;
const ACK_BODY: usize = 8;

/// LEAD flag: the leader resigns (SPEC section 6).
pub const FLAG_RESIGN: u8 = 0x01;
/// LEAD flag: the leader could not be elected now (unhealthy or drained), so followers
/// know their leader's health (SPEC section 13). Set only when unfit.
pub const FLAG_LEAD_UNFIT: u8 = 0x02;
/// LEAD flag, versions 7 and 8 only: an ack map follows the alive map (the followers
/// this LEAD asks to acknowledge it, not empty). Set exactly when `acks` is not empty,
/// never with `FLAG_RESIGN`; every older version refuses it (`BadFlags`).
pub const FLAG_LEAD_ACKS: u8 = 0x04;
/// ELECT flag: the claimant may not lead now (witness, unhealthy, drained, or resigned
/// last round).
pub const FLAG_INELIGIBLE: u8 = 0x01;
/// ELECT flag, only beside INELIGIBLE: the claimant is unhealthy (not drained, not
/// stopping, not a witness, its checks have had time to rise) and may be elected as a
/// last resort, when a round has no eligible claimant and no live leader (SPEC section
/// 13). Set only then, so every other claim stays what older builds accept; an older
/// build drops a claim carrying it (unknown flag), which can only delay a last-resort
/// election in a cluster mid-upgrade, never make two leaders.
pub const FLAG_LAST_RESORT: u8 = 0x02;
/// ACK flag: the follower could not take over now (witness, unhealthy or drained), so a
/// leader that must hand over does not count on it (SPEC section 13). Set only when
/// unfit, so a follower's ACKs stay what older builds accept whenever it is fit.
pub const FLAG_UNFIT: u8 = 0x01;

/// The four message kinds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Leader heartbeat.
    Lead = 1,
    /// Election claim, opening or joining a round.
    Elect = 2,
    /// A vote for one candidate in one term.
    Vote = 3,
    /// Acknowledgement of a LEAD, sent to all.
    Ack = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Lead),
            2 => Some(Kind::Elect),
            3 => Some(Kind::Vote),
            4 => Some(Kind::Ack),
            _ => None,
        }
    }

    /// The length of this kind's fixed body (a bundled LEAD's alive map follows it).
    fn body_len(self) -> usize {
        match self {
            Kind::Lead => LEAD_BODY,
            Kind::Elect => ELECT_BODY,
            Kind::Vote => VOTE_BODY,
            Kind::Ack => ACK_BODY,
        }
    }

    /// The lower-case name used in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lead => "lead",
            Kind::Elect => "elect",
            Kind::Vote => "vote",
            Kind::Ack => "ack",
        }
    }
}

/// One decoded datagram.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The sending server's id, 1..=255.
    pub sender: u16,
    /// CRC-32 of the sender's canonical cluster definition.
    pub fingerprint: u32,
    /// The header term (meaning depends on the kind, SPEC section 3).
    pub term: u64,
    /// Kind-specific fields.
    pub body: Body,
}

/// One message of a bundle, with the election group it is for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The group's index in the configuration (0: the first, or `default`).
    pub group: u8,
    /// The message (its sender and fingerprint are the bundle's).
    pub msg: Message,
}

/// A decoded datagram of any version: its entries and, when keyed, the sender's counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// The sending server's id.
    pub sender: u16,
    /// The sender's counter (keyed versions only).
    pub counter: Option<u64>,
    /// The messages, in the order sent.
    pub entries: Vec<Entry>,
}

/// Who sent a datagram decoded into a caller's entries ([`decode_any_into`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The sending server's id.
    pub sender: u16,
    /// The sender's counter (keyed versions only).
    pub counter: Option<u64>,
}

/// The three bundle framings a host may send in, in order: each reads everything the
/// one before it carries, and a build that speaks one speaks those before it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Framing {
    /// Version 3 (4 keyed): what every build since bundles were introduced reads.
    Bundle,
    /// Version 5 (6 keyed): the compact bundle, read only by builds that speak it.
    Compact,
    /// Version 7 (8 keyed): the compact bundle whose LEADs may carry an ack map, read
    /// only by builds that speak it.
    CompactAcks,
}

impl Framing {
    /// Every framing, lowest first.
    pub const ALL: [Framing; 3] = [Framing::Bundle, Framing::Compact, Framing::CompactAcks];

    /// The highest framing this build speaks.
    pub const TOP: Framing = Framing::CompactAcks;

    /// The framing a datagram that decoded was sent in: `Compact` for versions 5 and 6,
    /// `CompactAcks` for 7 and 8, `Bundle` for every other (a version-1/2 single
    /// message counts as the old kind).
    pub fn of(bytes: &[u8]) -> Framing {
        match bytes.get(2) {
            Some(&VERSION_COMPACT | &VERSION_COMPACT_KEYED) => Framing::Compact,
            Some(&VERSION_ACKS | &VERSION_ACKS_KEYED) => Framing::CompactAcks,
            _ => Framing::Bundle,
        }
    }

    /// 0 for `Bundle`, 1 for `Compact`, 2 for `CompactAcks`: an index into
    /// per-framing counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// "classic", "compact" or "compact_acks", the metrics label.
    pub fn name(self) -> &'static str {
        match self {
            Framing::Bundle => "classic",
            Framing::Compact => "compact",
            Framing::CompactAcks => "compact_acks",
        }
    }
}

/// Why a datagram was refused. Every variant is a drop reason counted by the daemon.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the shortest valid datagram.
    TooShort(usize),
    /// Longer than the longest valid datagram.
    TooLong(usize),
    /// The CRC-32 trailer does not match.
    BadTrailer,
    /// The first two bytes are not `EL`.
    BadMagic,
    /// A wire version this build does not speak.
    BadVersion(u8),
    /// A kind byte outside 1..=4.
    BadKind(u8),
    /// The length does not match the kind.
    BadLength {
        /// The kind named in the header.
        kind: Kind,
        /// The datagram's length.
        len: usize,
    },
    /// Flag bits that the kind does not define, or a non-zero reserved byte.
    BadFlags(u8),
    /// A server id outside 1..=255 in the sender or candidate field.
    BadId(u16),
    /// The HMAC tag matches no configured key (forged, or another key).
    BadTag,
    /// A bundle whose entry count is 0 or above `MAX_ENTRIES`, or whose entries do not
    /// fill it exactly.
    BadCount(usize),
    /// A bundle entry for a group this server does not run.
    BadGroup(u8),
    /// A compact bundle's varint that is not minimal, or whose value is too large for
    /// its field.
    BadVarint,
    /// A LEAD flagged with an ack map (versions 7 and 8) whose map is empty, longer
    /// than 32 bytes, or ends in a zero byte (not canonical); the map's length byte.
    BadAcks(usize),
}

impl DecodeError {
    /// A short stable name, used as the metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::TooShort(_) => "too_short",
            DecodeError::TooLong(_) => "too_long",
            DecodeError::BadTrailer => "bad_trailer",
            DecodeError::BadMagic => "bad_magic",
            DecodeError::BadVersion(_) => "bad_version",
            DecodeError::BadKind(_) => "bad_kind",
            DecodeError::BadLength { .. } => "bad_length",
            DecodeError::BadFlags(_) => "bad_flags",
            DecodeError::BadId(_) => "bad_id",
            DecodeError::BadTag => "bad_tag",
            DecodeError::BadCount(_) => "bad_count",
            DecodeError::BadGroup(_) => "bad_group",
            DecodeError::BadVarint => "bad_varint",
            DecodeError::BadAcks(_) => "bad_acks",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooShort(n) => write!(f, "datagram of {n} bytes is too short"),
            DecodeError::TooLong(n) => write!(f, "datagram of {n} bytes is too long"),
            DecodeError::BadTrailer => write!(f, "checksum mismatch"),
            DecodeError::BadMagic => write!(f, "wrong magic"),
            DecodeError::BadVersion(v) => write!(f, "unknown wire version {v}"),
            DecodeError::BadKind(k) => write!(f, "unknown message kind {k}"),
            DecodeError::BadLength { kind, len } => {
                write!(f, "{} of {len} bytes has the wrong length", kind.name())
            }
            DecodeError::BadFlags(b) => write!(f, "undefined flag or reserved bits {b:#04x}"),
            DecodeError::BadId(id) => write!(f, "server id {id} outside 1..=255"),
            DecodeError::BadTag => write!(f, "authentication tag matches no key"),
            DecodeError::BadCount(n) => {
                write!(f, "bundle of {n} entries that do not fill it exactly")
            }
            DecodeError::BadGroup(g) => write!(f, "entry for unknown election group {g}"),
            DecodeError::BadVarint => write!(f, "varint not minimal or out of range"),
            DecodeError::BadAcks(n) => {
                write!(
                    f,
                    "ack map of {n} bytes is empty, too long or not canonical"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

fn valid_id(id: u16) -> bool {
    (1..=255).contains(&id)
}

// ----- the public codec: each call is one framing and one trailer -------------------

/// Appends the version-1 encoding of `msg` to `out` and returns the number of bytes
/// written.
pub fn encode(msg: &Message, out: &mut Vec<u8>) -> usize {
    frame::encode_single(msg, None, out)
}

/// Encodes `msg` (version 1) into a new vector.
pub fn encode_to_vec(msg: &Message) -> Vec<u8> {
    let mut v = Vec::with_capacity(MAX_LEN);
    encode(msg, &mut v);
    v
}

/// Decodes one unkeyed datagram (version 1), checking its length and trailer before
/// any field.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    frame::decode_single(bytes, None).map(|(msg, _)| msg)
}

/// Appends the keyed encoding (version 2) of `msg` with `counter`, tagged with `key`;
/// returns the number of bytes written.
pub fn encode_keyed(msg: &Message, counter: u64, key: &Key, out: &mut Vec<u8>) -> usize {
    frame::encode_single(msg, Some((counter, key)), out)
}

/// Decodes a keyed datagram (version 2): length, then the tag under any of `keys`
/// (compared in constant time), then the fields. Returns the message and the sender's
/// counter.
pub fn decode_keyed(bytes: &[u8], keys: &[&Key]) -> Result<(Message, u64), DecodeError> {
    // The keyed framing always carries a counter.
    let (msg, counter) = frame::decode_single(bytes, Some(keys))?;
    Ok((msg, counter.unwrap_or_default()))
}

/// The bytes `msg` takes as a bundle entry (version 3/4).
pub fn entry_len(msg: &Message) -> usize {
    entry_len_in(Framing::Bundle, msg)
}

/// The bytes `msg` takes as an entry of `framing`.
pub fn entry_len_in(framing: Framing, msg: &Message) -> usize {
    match framing {
        Framing::Bundle => ENTRY_HEAD + body::len(&msg.body, body::Maps::Alive, body::Ints::Fixed),
        Framing::Compact | Framing::CompactAcks => compact::entry_len(framing, msg),
    }
}

/// Splits `entries` into runs that each fit one version-3/4 bundle of at most
/// `MAX_BUNDLE_LEN` bytes (and `MAX_ENTRIES` entries), keyed or not; returns the runs'
/// index ranges.
pub fn pack(entries: &[Entry], keyed: bool) -> Vec<std::ops::Range<usize>> {
    pack_in(Framing::Bundle, entries, keyed)
}

/// Splits `entries` into runs that each fit one bundle of `framing` of at most
/// `MAX_BUNDLE_LEN` bytes (and `MAX_ENTRIES` entries), keyed or not; returns the runs'
/// index ranges.
pub fn pack_in(framing: Framing, entries: &[Entry], keyed: bool) -> Vec<std::ops::Range<usize>> {
    runs(framing, entries, keyed).collect()
}

/// The runs of [`pack_in`], one at a time (no allocation: the host's flush).
pub fn runs(
    framing: Framing,
    entries: &[Entry],
    keyed: bool,
) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let fixed = frame::Format {
        bundle: Some(framing),
        keyed,
    }
    .overhead();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= entries.len() {
            return None;
        }
        if start + 1 == entries.len() {
            // One entry left: a run of its own whatever its length (the first entry of
            // a run is always taken), without computing it. An idle heartbeat's
            // datagram is one entry (issue 25).
            start += 1;
            return Some(start - 1..start);
        }
        let mut len = fixed;
        let mut end = start;
        for (i, e) in entries.iter().enumerate().skip(start) {
            let l = entry_len_in(framing, &e.msg);
            if i > start && (len + l > MAX_BUNDLE_LEN || i - start == MAX_ENTRIES) {
                break;
            }
            len += l;
            end = i + 1;
        }
        let run = start..end;
        start = end;
        Some(run)
    })
}

/// The bytes one bundle of `framing` holding `entries` takes, keyed or not.
pub fn bundle_len(framing: Framing, entries: &[Entry], keyed: bool) -> usize {
    let fixed = frame::Format {
        bundle: Some(framing),
        keyed,
    }
    .overhead();
    fixed
        + entries
            .iter()
            .map(|e| entry_len_in(framing, &e.msg))
            .sum::<usize>()
}

pub use frame::encode_bundle;

/// Appends one bundle of `framing` holding `entries` (at most `MAX_ENTRIES`, all from
/// `sender` with `fingerprint`), keyed with `(counter, key)` when given; returns the
/// bytes written. `Framing::Bundle` is [`encode_bundle`].
pub fn encode_in(
    framing: Framing,
    sender: u16,
    fingerprint: u32,
    entries: &[Entry],
    keyed: Option<(u64, &Key)>,
    out: &mut Vec<u8>,
) -> usize {
    match framing {
        Framing::Bundle => frame::encode_bundle(sender, fingerprint, entries, keyed, out),
        Framing::Compact | Framing::CompactAcks => {
            compact::encode(framing, sender, fingerprint, entries, keyed, out)
        }
    }
}

/// Decodes a datagram of any version: 1, 3, 5 or 7 without `keys`, 2, 4, 6 or 8 with
/// them (a version-1/2 datagram becomes a one-entry bundle for group 0). The length and the
/// trailer are checked before any field; entries for a group at or above `groups` are
/// refused.
pub fn decode_any(
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
) -> Result<Bundle, DecodeError> {
    let mut entries = Vec::new();
    let Origin { sender, counter } = decode_any_into(bytes, keys, groups, &mut entries)?;
    Ok(Bundle {
        sender,
        counter,
        entries,
    })
}

/// [`decode_any`] into `entries` (cleared first; on an error it may hold some of the
/// datagram's entries, to be ignored): the host's datagram path reuses one vector.
pub fn decode_any_into(
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
    entries: &mut Vec<Entry>,
) -> Result<Origin, DecodeError> {
    decode_upto_into(Framing::TOP, bytes, keys, groups, entries)
}

/// [`decode_any_into`] as a build that speaks no framing above `top` decodes: a
/// datagram of a higher version is read as an unknown version, exactly as such a build
/// reads it (as a single message, so refused `BadVersion`, or `TooLong` when longer
/// than one). For tests that emulate older builds (`Host::cap_wire`).
pub fn decode_upto_into(
    top: Framing,
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
    entries: &mut Vec<Entry>,
) -> Result<Origin, DecodeError> {
    match frame::Format::of(bytes, keys.is_some(), top).bundle {
        Some(Framing::Bundle) => return frame::decode_bundle(bytes, keys, groups, entries),
        Some(f @ (Framing::Compact | Framing::CompactAcks)) => {
            return compact::decode(f, bytes, keys, groups, entries);
        }
        None => {}
    }
    let (msg, counter) = frame::decode_single(bytes, keys)?;
    entries.clear();
    entries.push(Entry { group: 0, msg });
    Ok(Origin {
        sender: msg.sender,
        counter,
    })
}

#[cfg(test)]
mod tests;
