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
}
