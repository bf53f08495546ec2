//! The wire format (SPEC section 3): header, body, trailer. Version 1 ends with a
//! CRC-32; version 2, used when a key is configured (section 10), adds the sender's
//! counter after the term and ends with a truncated HMAC-SHA256 tag instead.
//!
//! Decoding checks the trailer first, then every field, and returns a typed error for
//! anything malformed. Nothing here can panic on bytes from the network: every read is
//! bounds-checked by the length test that precedes it.

use byteorder::{BigEndian, ByteOrder};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// The two magic bytes that open every datagram.
pub const MAGIC: [u8; 2] = *b"EL";
/// The only wire version this build speaks.
pub const VERSION: u8 = 1;
/// Header length: magic, version, kind, flags, reserved, sender, fingerprint, term.
pub const HEADER_LEN: usize = 20;
/// Trailer length: a CRC-32.
pub const TRAILER_LEN: usize = 4;
/// The longest valid datagram (an ELECT); anything longer is refused unread.
pub const MAX_LEN: usize = HEADER_LEN + ELECT_BODY + TRAILER_LEN;
/// The shortest valid datagram (a VOTE).
pub const MIN_LEN: usize = HEADER_LEN + VOTE_BODY + TRAILER_LEN;

const LEAD_BODY: usize = 12;
const ELECT_BODY: usize = 18;
const VOTE_BODY: usize = 2;
const ACK_BODY: usize = 8;

/// LEAD flag: the leader resigns (SPEC section 6).
pub const FLAG_RESIGN: u8 = 0x01;
/// LEAD flag: the leader could not be elected now (unhealthy or drained), so followers
/// know their leader's health (SPEC section 13). Set only when unfit.
pub const FLAG_LEAD_UNFIT: u8 = 0x02;
/// ELECT flag: the claimant may not lead now (witness, unhealthy, drained, or resigned
/// last round).
pub const FLAG_INELIGIBLE: u8 = 0x01;
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

/// A message body, one variant per kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Heartbeat of the leader of the header's term.
    Lead {
        /// Position of this LEAD within the term, from 1.
        seq: u64,
        /// The leader's K*HBT in milliseconds: how long followers keep faith in it.
        hold_ms: u32,
        /// The leader resigns: followers elect at once.
        resign: bool,
        /// With `resign`: the server the leader hands over to (SPEC section 14), or 0.
        /// Carried in the header byte after the flags, which is 0 in every other datagram.
        successor: u16,
        /// The leader could not be elected now (SPEC section 13).
        unfit: bool,
        /// The servers the leader heard acknowledge recently (itself included):
        /// followers acknowledge to the leader only, and learn from this who is alive.
        /// Carried by the bundle format only; empty in a version-1/2 LEAD.
        alive: PeerSet,
    },
    /// A claim in a round; the header's term is the proposed term.
    Elect {
        /// Term of the newest LEAD the claimant has seen.
        last_term: u64,
        /// Sequence number of that LEAD.
        last_seq: u64,
        /// Configured priority of the claimant (higher wins ties).
        priority: u8,
        /// Servers the claimant heard within K*HBT, itself included.
        heard: u8,
        /// The claimant may not lead now.
        ineligible: bool,
    },
    /// A vote for `candidate` in the header's term.
    Vote {
        /// The server voted for.
        candidate: u16,
    },
    /// Acknowledgement of LEAD (header term, `seq`).
    Ack {
        /// Sequence number of the acknowledged LEAD.
        seq: u64,
        /// The follower could not take over now (SPEC section 13).
        unfit: bool,
    },
}

impl Body {
    /// The kind of this body.
    pub fn kind(&self) -> Kind {
        match self {
            Body::Lead { .. } => Kind::Lead,
            Body::Elect { .. } => Kind::Elect,
            Body::Vote { .. } => Kind::Vote,
            Body::Ack { .. } => Kind::Ack,
        }
    }
}

/// A set of server ids 1..=255 (a 256-bit map).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PeerSet([u8; 32]);

impl PeerSet {
    /// No server.
    pub const EMPTY: PeerSet = PeerSet([0; 32]);

    /// Adds server `id` (ids outside 1..=255 are ignored).
    pub fn insert(&mut self, id: u16) {
        if valid_id(id) {
            let i = usize::from(id - 1);
            self.0[i / 8] |= 1 << (i % 8);
        }
    }

    /// True when `id` is in the set.
    pub fn contains(&self, id: u16) -> bool {
        valid_id(id) && {
            let i = usize::from(id - 1);
            self.0[i / 8] & (1 << (i % 8)) != 0
        }
    }

    /// The number of servers in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// True when no server is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (1..=255u16).filter(|&id| self.contains(id))
    }

    /// The bitmap without its trailing zero bytes (what the wire carries).
    fn wire_bytes(&self) -> &[u8] {
        let n = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        &self.0[..n]
    }

    /// The set a wire bitmap of up to 32 bytes describes.
    fn from_wire(bytes: &[u8]) -> PeerSet {
        let mut s = PeerSet::EMPTY;
        s.0[..bytes.len()].copy_from_slice(bytes);
        s
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
        }
    }
}

impl std::error::Error for DecodeError {}

fn valid_id(id: u16) -> bool {
    (1..=255).contains(&id)
}

/// Appends the encoding of `msg` to `out` and returns the number of bytes written.
pub fn encode(msg: &Message, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let kind = msg.body.kind();
    let flags = match msg.body {
        Body::Lead { resign, unfit, .. } => {
            (if resign { FLAG_RESIGN } else { 0 }) | (if unfit { FLAG_LEAD_UNFIT } else { 0 })
        }
        Body::Elect {
            ineligible: true, ..
        } => FLAG_INELIGIBLE,
        Body::Ack { unfit: true, .. } => FLAG_UNFIT,
        _ => 0,
    };
    // The byte after the flags names a resigning leader's successor; 0 elsewhere.
    let successor = match msg.body {
        Body::Lead {
            resign: true,
            successor,
            ..
        } if valid_id(successor) => successor as u8,
        _ => 0,
    };
    let mut buf = [0u8; MAX_LEN];
    buf[0..2].copy_from_slice(&MAGIC);
    buf[2] = VERSION;
    buf[3] = kind as u8;
    buf[4] = flags;
    buf[5] = successor;
    BigEndian::write_u16(&mut buf[6..8], msg.sender);
    BigEndian::write_u32(&mut buf[8..12], msg.fingerprint);
    BigEndian::write_u64(&mut buf[12..20], msg.term);
    let b = &mut buf[HEADER_LEN..];
    match msg.body {
        Body::Lead { seq, hold_ms, .. } => {
            BigEndian::write_u64(&mut b[0..8], seq);
            BigEndian::write_u32(&mut b[8..12], hold_ms);
        }
        Body::Elect {
            last_term,
            last_seq,
            priority,
            heard,
            ..
        } => {
            BigEndian::write_u64(&mut b[0..8], last_term);
            BigEndian::write_u64(&mut b[8..16], last_seq);
            b[16] = priority;
            b[17] = heard;
        }
        Body::Vote { candidate } => BigEndian::write_u16(&mut b[0..2], candidate),
        Body::Ack { seq, .. } => BigEndian::write_u64(&mut b[0..8], seq),
    }
    let body_end = HEADER_LEN + kind.body_len();
    let crc = crc32fast::hash(&buf[..body_end]);
    BigEndian::write_u32(&mut buf[body_end..body_end + TRAILER_LEN], crc);
    out.extend_from_slice(&buf[..body_end + TRAILER_LEN]);
    out.len() - start
}

/// Encodes `msg` into a new vector.
pub fn encode_to_vec(msg: &Message) -> Vec<u8> {
    let mut v = Vec::with_capacity(MAX_LEN);
    encode(msg, &mut v);
    v
}

/// Decodes one unkeyed datagram (version 1), checking its length and trailer before
/// any field.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    let len = bytes.len();
    if len < MIN_LEN {
        return Err(DecodeError::TooShort(len));
    }
    if len > MAX_LEN {
        return Err(DecodeError::TooLong(len));
    }
    let (signed, trailer) = bytes.split_at(len - TRAILER_LEN);
    if crc32fast::hash(signed) != BigEndian::read_u32(trailer) {
        return Err(DecodeError::BadTrailer);
    }
    parse(signed, VERSION, len)
}

/// Parses the fields of a datagram whose trailer has been checked. `signed` is
/// everything before the trailer; the keyed format has an 8-byte counter after the term.
fn parse(signed: &[u8], version: u8, len: usize) -> Result<Message, DecodeError> {
    if signed[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if signed[2] != version {
        return Err(DecodeError::BadVersion(signed[2]));
    }
    let header = if version == VERSION_KEYED {
        KEYED_HEADER_LEN
    } else {
        HEADER_LEN
    };
    let kind = Kind::from_u8(signed[3]).ok_or(DecodeError::BadKind(signed[3]))?;
    if signed.len() != header + kind.body_len() {
        return Err(DecodeError::BadLength { kind, len });
    }
    let flags = signed[4];
    let allowed = match kind {
        Kind::Lead => FLAG_RESIGN | FLAG_LEAD_UNFIT,
        Kind::Elect => FLAG_INELIGIBLE,
        Kind::Ack => FLAG_UNFIT,
        Kind::Vote => 0,
    };
    if flags & !allowed != 0 {
        return Err(DecodeError::BadFlags(flags));
    }
    // Only a RESIGN may name a successor; the byte is 0 in every other datagram.
    let successor = u16::from(signed[5]);
    if successor != 0 && !(kind == Kind::Lead && flags & FLAG_RESIGN != 0) {
        return Err(DecodeError::BadFlags(signed[5]));
    }
    let sender = BigEndian::read_u16(&signed[6..8]);
    if !valid_id(sender) {
        return Err(DecodeError::BadId(sender));
    }
    let fingerprint = BigEndian::read_u32(&signed[8..12]);
    let term = BigEndian::read_u64(&signed[12..20]);
    let b = &signed[header..];
    let body = match kind {
        Kind::Lead => Body::Lead {
            seq: BigEndian::read_u64(&b[0..8]),
            hold_ms: BigEndian::read_u32(&b[8..12]),
            resign: flags & FLAG_RESIGN != 0,
            successor,
            unfit: flags & FLAG_LEAD_UNFIT != 0,
            alive: PeerSet::EMPTY,
        },
        Kind::Elect => Body::Elect {
            last_term: BigEndian::read_u64(&b[0..8]),
            last_seq: BigEndian::read_u64(&b[8..16]),
            priority: b[16],
            heard: b[17],
            ineligible: flags & FLAG_INELIGIBLE != 0,
        },
        Kind::Vote => {
            let candidate = BigEndian::read_u16(&b[0..2]);
            if !valid_id(candidate) {
                return Err(DecodeError::BadId(candidate));
            }
            Body::Vote { candidate }
        }
        Kind::Ack => Body::Ack {
            seq: BigEndian::read_u64(&b[0..8]),
            unfit: flags & FLAG_UNFIT != 0,
        },
    };
    Ok(Message {
        sender,
        fingerprint,
        term,
        body,
    })
}

// ----- the keyed format (SPEC section 10) ---------------------------------------------

/// The keyed wire version: a counter after the term, an HMAC tag instead of the CRC.
pub const VERSION_KEYED: u8 = 2;
/// Keyed header: the version-1 header plus the sender's 8-byte counter.
pub const KEYED_HEADER_LEN: usize = HEADER_LEN + 8;
/// The truncated HMAC-SHA256 tag.
pub const TAG_LEN: usize = 16;
/// The longest keyed datagram.
pub const KEYED_MAX_LEN: usize = KEYED_HEADER_LEN + ELECT_BODY + TAG_LEN;
/// The shortest keyed datagram.
pub const KEYED_MIN_LEN: usize = KEYED_HEADER_LEN + VOTE_BODY + TAG_LEN;

/// A shared secret, ready to compute tags.
#[derive(Clone)]
pub struct Key(Hmac<Sha256>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from secret bytes (callers enforce a minimum length).
    pub fn new(secret: &[u8]) -> Key {
        Key(Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length"))
    }
}

/// Appends the keyed encoding of `msg` with `counter`, tagged with `key`.
pub fn encode_keyed(msg: &Message, counter: u64, key: &Key, out: &mut Vec<u8>) -> usize {
    let mut plain = Vec::with_capacity(MAX_LEN);
    encode(msg, &mut plain);
    let body = &plain[HEADER_LEN..plain.len() - TRAILER_LEN];
    let start = out.len();
    out.extend_from_slice(&plain[..HEADER_LEN]);
    out[start + 2] = VERSION_KEYED;
    out.extend_from_slice(&counter.to_be_bytes());
    out.extend_from_slice(body);
    let mut mac = key.0.clone();
    mac.update(&out[start..]);
    let tag = mac.finalize().into_bytes();
    out.extend_from_slice(&tag[..TAG_LEN]);
    out.len() - start
}

/// Decodes a keyed datagram: length, then the tag under any of `keys` (compared in
/// constant time), then the fields. Returns the message and the sender's counter.
pub fn decode_keyed(bytes: &[u8], keys: &[&Key]) -> Result<(Message, u64), DecodeError> {
    let len = bytes.len();
    if len < KEYED_MIN_LEN {
        return Err(DecodeError::TooShort(len));
    }
    if len > KEYED_MAX_LEN {
        return Err(DecodeError::TooLong(len));
    }
    let (signed, tag) = bytes.split_at(len - TAG_LEN);
    let valid = keys.iter().any(|k| {
        let mut mac = k.0.clone();
        mac.update(signed);
        mac.verify_truncated_left(tag).is_ok()
    });
    if !valid {
        return Err(DecodeError::BadTag);
    }
    let msg = parse(signed, VERSION_KEYED, len)?;
    Ok((
        msg,
        BigEndian::read_u64(&signed[HEADER_LEN..KEYED_HEADER_LEN]),
    ))
}

// ----- the bundle format (issue 12) ---------------------------------------------------

/// The bundle format, unkeyed: many messages (entries) in one datagram, each naming its
/// election group, ending with a CRC-32.
pub const VERSION_BUNDLE: u8 = 3;
/// The bundle format, keyed: the sender's counter after the header, an HMAC tag instead
/// of the CRC (as version 2 does it).
pub const VERSION_BUNDLE_KEYED: u8 = 4;
/// Bundle header: magic, version, count, flags (0), reserved (0), sender, fingerprint.
pub const BUNDLE_HEADER_LEN: usize = 12;
/// Entry header: group, kind, flags, aux (a RESIGN's successor), term.
const ENTRY_HEAD: usize = 12;
/// The longest alive map a LEAD entry carries (255 ids).
const MAX_ALIVE: usize = 32;
/// The most entries in one bundle.
pub const MAX_ENTRIES: usize = 128;
/// The packer fills datagrams up to this many bytes: within the IPv6 minimum MTU
/// (1280) after the IP and UDP headers, so a bundle is never fragmented.
pub const MAX_BUNDLE_LEN: usize = 1200;
/// A datagram longer than this is refused unread.
pub const MAX_DATAGRAM: usize = 8192;

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

/// The bytes `msg` takes as a bundle entry.
pub fn entry_len(msg: &Message) -> usize {
    ENTRY_HEAD
        + match msg.body {
            Body::Lead { alive, .. } => LEAD_BODY + 1 + alive.wire_bytes().len(),
            b => b.kind().body_len(),
        }
}

/// Splits `entries` into runs that each fit one bundle of at most `MAX_BUNDLE_LEN`
/// bytes (and `MAX_ENTRIES` entries), keyed or not; returns the runs' index ranges.
pub fn pack(entries: &[Entry], keyed: bool) -> Vec<std::ops::Range<usize>> {
    let fixed = BUNDLE_HEADER_LEN + if keyed { 8 + TAG_LEN } else { TRAILER_LEN };
    let mut out = Vec::new();
    let (mut start, mut len) = (0, fixed);
    for (i, e) in entries.iter().enumerate() {
        let l = entry_len(&e.msg);
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

/// Appends one bundle holding `entries` (at most `MAX_ENTRIES`, all from `sender` with
/// `fingerprint`); keyed with `(counter, key)` when given. Returns the bytes written.
pub fn encode_bundle(
    sender: u16,
    fingerprint: u32,
    entries: &[Entry],
    keyed: Option<(u64, &Key)>,
    out: &mut Vec<u8>,
) -> usize {
    debug_assert!(!entries.is_empty() && entries.len() <= MAX_ENTRIES);
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.push(if keyed.is_some() {
        VERSION_BUNDLE_KEYED
    } else {
        VERSION_BUNDLE
    });
    out.push(entries.len().min(MAX_ENTRIES) as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&sender.to_be_bytes());
    out.extend_from_slice(&fingerprint.to_be_bytes());
    if let Some((counter, _)) = keyed {
        out.extend_from_slice(&counter.to_be_bytes());
    }
    let mut one = Vec::with_capacity(MAX_LEN);
    for e in entries.iter().take(MAX_ENTRIES) {
        // The version-1 encoding holds every field of the entry in the same order.
        one.clear();
        encode(&e.msg, &mut one);
        out.push(e.group);
        out.extend_from_slice(&one[3..6]);
        out.extend_from_slice(&one[12..one.len() - TRAILER_LEN]);
        if let Body::Lead { alive, .. } = e.msg.body {
            let map = alive.wire_bytes();
            out.push(map.len() as u8);
            out.extend_from_slice(map);
        }
    }
    match keyed {
        Some((_, key)) => {
            let mut mac = key.0.clone();
            mac.update(&out[start..]);
            let tag = mac.finalize().into_bytes();
            out.extend_from_slice(&tag[..TAG_LEN]);
        }
        None => {
            let crc = crc32fast::hash(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
    }
    out.len() - start
}

/// Decodes a datagram of any version: 1 or 3 without `keys`, 2 or 4 with them (a
/// version-1/2 datagram becomes a one-entry bundle for group 0). The length and the
/// trailer are checked before any field; entries for a group at or above `groups` are
/// refused.
pub fn decode_any(
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
) -> Result<Bundle, DecodeError> {
    let version = bytes.get(2).copied().unwrap_or(0);
    match keys {
        None if version != VERSION_BUNDLE => decode(bytes).map(|msg| Bundle {
            sender: msg.sender,
            counter: None,
            entries: vec![Entry { group: 0, msg }],
        }),
        Some(k) if version != VERSION_BUNDLE_KEYED => {
            decode_keyed(bytes, k).map(|(msg, counter)| Bundle {
                sender: msg.sender,
                counter: Some(counter),
                entries: vec![Entry { group: 0, msg }],
            })
        }
        _ => decode_bundle(bytes, keys, groups),
    }
}

fn decode_bundle(
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
) -> Result<Bundle, DecodeError> {
    let len = bytes.len();
    let (head, trailer) = match keys {
        Some(_) => (BUNDLE_HEADER_LEN + 8, TAG_LEN),
        None => (BUNDLE_HEADER_LEN, TRAILER_LEN),
    };
    if len < head + ENTRY_HEAD + VOTE_BODY + trailer {
        return Err(DecodeError::TooShort(len));
    }
    if len > MAX_DATAGRAM {
        return Err(DecodeError::TooLong(len));
    }
    let (signed, tail) = bytes.split_at(len - trailer);
    match keys {
        Some(keys) => {
            let valid = keys.iter().any(|k| {
                let mut mac = k.0.clone();
                mac.update(signed);
                mac.verify_truncated_left(tail).is_ok()
            });
            if !valid {
                return Err(DecodeError::BadTag);
            }
        }
        None => {
            if crc32fast::hash(signed) != BigEndian::read_u32(tail) {
                return Err(DecodeError::BadTrailer);
            }
        }
    }
    if signed[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
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
    let counter = keys.map(|_| BigEndian::read_u64(&signed[12..20]));
    let mut entries = Vec::with_capacity(count);
    let mut at = head;
    let mut one = [0u8; HEADER_LEN + ELECT_BODY];
    one[0..2].copy_from_slice(&MAGIC);
    one[2] = VERSION;
    one[6..12].copy_from_slice(&signed[6..12]);
    for _ in 0..count {
        let e = signed
            .get(at..at + ENTRY_HEAD)
            .ok_or(DecodeError::BadCount(count))?;
        let group = e[0];
        if usize::from(group) >= groups {
            return Err(DecodeError::BadGroup(group));
        }
        let kind = Kind::from_u8(e[1]).ok_or(DecodeError::BadKind(e[1]))?;
        let body_len = kind.body_len();
        let body = signed
            .get(at + ENTRY_HEAD..at + ENTRY_HEAD + body_len)
            .ok_or(DecodeError::BadLength { kind, len })?;
        at += ENTRY_HEAD + body_len;
        // Rebuild the version-1 message: parse() checks every field.
        one[3..6].copy_from_slice(&e[1..4]);
        one[12..20].copy_from_slice(&e[4..12]);
        one[HEADER_LEN..HEADER_LEN + body_len].copy_from_slice(body);
        let mut msg = parse(&one[..HEADER_LEN + body_len], VERSION, len)?;
        if let Body::Lead { alive, .. } = &mut msg.body {
            let n = usize::from(*signed.get(at).ok_or(DecodeError::BadLength { kind, len })?);
            let map = signed
                .get(at + 1..at + 1 + n)
                // Canonical: at most 32 bytes, no trailing zero byte.
                .filter(|m| n <= MAX_ALIVE && m.last() != Some(&0))
                .ok_or(DecodeError::BadLength { kind, len })?;
            *alive = PeerSet::from_wire(map);
            at += 1 + n;
        }
        entries.push(Entry { group, msg });
    }
    if at != signed.len() {
        return Err(DecodeError::BadCount(count));
    }
    Ok(Bundle {
        sender,
        counter,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

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
}
