//! The body codec: each message kind's flags, aux byte and body, encoded by [`head`] and
//! [`write`] and decoded by [`read`], whichever framing carries them. A single message
//! keeps kind, flags and aux in its header; a bundle keeps them in each entry's head;
//! the bytes are the same.

use super::{
    DecodeError, FLAG_INELIGIBLE, FLAG_LAST_RESORT, FLAG_LEAD_ACKS, FLAG_LEAD_UNFIT, FLAG_RESIGN,
    FLAG_UNFIT, Kind, MAX_ALIVE, Message, valid_id, varint,
};
use byteorder::{BigEndian, ByteOrder};

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
        /// The followers this LEAD asks to acknowledge it (issue 25, sparse
        /// acknowledgements); empty: every follower acknowledges, as in every framing
        /// that cannot carry the set. Carried by versions 7 and 8 only (the ack map):
        /// every other version writes it as empty, and reads it as empty; a RESIGN
        /// never carries it (written as empty in every version).
        acks: PeerSet,
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
        /// With `ineligible`: the claimant is unhealthy only, and may be elected as a
        /// last resort (SPEC section 13).
        last_resort: bool,
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

    /// True when no server is in the set. One comparison of the whole map (four
    /// words), not a byte loop with an exit per byte: a leader asks this several
    /// times a heartbeat (issue 25).
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 32]
    }

    /// The ids in the set, ascending. Walks the set bits only: a follower runs this
    /// for every LEAD's alive map, and testing all 255 ids one by one was a third of
    /// an idle follower's instructions (issue 25, callgrind).
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        // By 64-bit words (little-endian: bit k of the word is id 64w + k + 1), so
        // an empty quarter of the map costs one test, not eight.
        let mut word = 0;
        let mut rest = self.word(0);
        std::iter::from_fn(move || {
            loop {
                if rest != 0 {
                    let bit = rest.trailing_zeros() as u16;
                    rest &= rest - 1;
                    return Some(word as u16 * 64 + bit + 1);
                }
                if word == 3 {
                    return None;
                }
                word += 1;
                rest = self.word(word);
            }
        })
    }

    /// Ids 64w + 1 ..= 64w + 64, bit k for id 64w + k + 1.
    fn word(&self, w: usize) -> u64 {
        debug_assert!(w < 4);
        // Masked: the compiler sees the slice in bounds and drops the check.
        let w = w & 3;
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[w * 8..w * 8 + 8]);
        u64::from_le_bytes(b)
    }

    /// The bitmap without its trailing zero bytes (what the wire carries).
    pub(super) fn wire_bytes(&self) -> &[u8] {
        // The highest set bit, by words: a LEAD asks this twice (length, then bytes).
        let n = (0..4).rev().find_map(|w| {
            let word = self.word(w);
            (word != 0).then(|| w * 8 + (63 - word.leading_zeros() as usize) / 8 + 1)
        });
        &self.0[..n.unwrap_or(0)]
    }

    /// The set a wire bitmap of up to 32 bytes describes.
    fn from_wire(bytes: &[u8]) -> PeerSet {
        let mut s = PeerSet::EMPTY;
        s.0[..bytes.len()].copy_from_slice(bytes);
        s
    }
}

/// Which of a LEAD's maps a framing carries after its body.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Maps {
    /// Neither (the single message, versions 1 and 2).
    None,
    /// The alive map (versions 3 to 6).
    Alive,
    /// The alive map, then the ack map when the LEAD's `FLAG_LEAD_ACKS` says so
    /// (versions 7 and 8).
    Acks,
}

/// The ack map `body` carries in a framing of `maps`: a LEAD's non-empty `acks` in
/// versions 7 and 8 (never a RESIGN's); `None` everywhere else (the flag is clear).
fn ack_map(body: &Body, maps: Maps) -> Option<&PeerSet> {
    match body {
        Body::Lead {
            resign: false,
            acks,
            ..
        } if maps == Maps::Acks && !acks.is_empty() => Some(acks),
        _ => None,
    }
}

/// The three bytes every framing carries beside a body: kind, flags, and aux (a
/// resigning leader's successor; 0 in every other message). `maps`: what the framing
/// carries after the body (the ack flag is set only where the ack map follows).
pub(super) fn head(body: &Body, maps: Maps) -> [u8; 3] {
    let acks = ack_map(body, maps).is_some();
    let (flags, aux) = match *body {
        Body::Lead {
            resign,
            successor,
            unfit,
            ..
        } => (
            (if resign { FLAG_RESIGN } else { 0 })
                | (if unfit { FLAG_LEAD_UNFIT } else { 0 })
                | (if acks { FLAG_LEAD_ACKS } else { 0 }),
            if resign && valid_id(successor) {
                successor as u8
            } else {
                0
            },
        ),
        Body::Elect {
            ineligible,
            last_resort,
            ..
        } => (
            (if ineligible { FLAG_INELIGIBLE } else { 0 })
                | (if ineligible && last_resort {
                    FLAG_LAST_RESORT
                } else {
                    0
                }),
            0,
        ),
        Body::Vote { .. } => (0, 0),
        Body::Ack { unfit, .. } => (if unfit { FLAG_UNFIT } else { 0 }, 0),
    };
    [body.kind() as u8, flags, aux]
}

/// How a framing writes a body's integers: fixed-width big-endian (versions 1 to 4), or
/// the compact bundle's unsigned LEB128 varints with one-byte server ids (versions 5
/// and 6). Which fields a body has, and their order, are the same either way.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Ints {
    /// u64 in 8 bytes, u32 in 4, a server id in 2, big-endian.
    Fixed,
    /// u64 and u32 as minimal LEB128, a server id in 1 byte.
    Varint,
}

/// The bytes [`write`] appends for `body`: the kind's body, and as `maps` says a
/// LEAD's alive map and ack map (each a length byte and the bitmap without trailing
/// zero bytes).
pub(super) fn len(body: &Body, maps: Maps, ints: Ints) -> usize {
    let fixed = match ints {
        Ints::Fixed => body.kind().body_len(),
        Ints::Varint => match *body {
            Body::Lead { seq, hold_ms, .. } => varint::len(seq) + varint::len(u64::from(hold_ms)),
            Body::Elect {
                last_term,
                last_seq,
                ..
            } => varint::len(last_term) + varint::len(last_seq) + 2,
            Body::Vote { .. } => 1,
            Body::Ack { seq, .. } => varint::len(seq),
        },
    };
    fixed
        + match body {
            Body::Lead { alive: map, .. } if maps != Maps::None => 1 + map.wire_bytes().len(),
            _ => 0,
        }
        + ack_map(body, maps).map_or(0, |m| 1 + m.wire_bytes().len())
}

/// Appends `v` as `ints` says a u64 is written.
fn put_u64(out: &mut Vec<u8>, v: u64, ints: Ints) {
    match ints {
        Ints::Fixed => out.extend_from_slice(&v.to_be_bytes()),
        Ints::Varint => varint::put(out, v),
    }
}

/// Appends the body of `body` (the fields [`head`] does not carry); as `maps` says, a
/// LEAD's alive map follows (the bundle framings carry it, the single one does not),
/// then its ack map (versions 7 and 8, when `acks` is not empty).
pub(super) fn write(body: &Body, maps: Maps, ints: Ints, out: &mut Vec<u8>) {
    match *body {
        Body::Lead {
            seq,
            hold_ms,
            alive: map,
            ..
        } => {
            put_u64(out, seq, ints);
            match ints {
                Ints::Fixed => out.extend_from_slice(&hold_ms.to_be_bytes()),
                Ints::Varint => varint::put(out, u64::from(hold_ms)),
            }
            if maps != Maps::None {
                let map = map.wire_bytes();
                out.push(map.len() as u8);
                out.extend_from_slice(map);
            }
            if let Some(acks) = ack_map(body, maps) {
                let acks = acks.wire_bytes();
                out.push(acks.len() as u8);
                out.extend_from_slice(acks);
            }
        }
        Body::Elect {
            last_term,
            last_seq,
            priority,
            heard,
            ..
        } => {
            put_u64(out, last_term, ints);
            put_u64(out, last_seq, ints);
            out.extend_from_slice(&[priority, heard]);
        }
        Body::Vote { candidate } => match ints {
            Ints::Fixed => out.extend_from_slice(&candidate.to_be_bytes()),
            // Only ids 1..=255 are valid, and a VOTE for another is never sent.
            Ints::Varint => out.push(candidate as u8),
        },
        Body::Ack { seq, .. } => put_u64(out, seq, ints),
    }
}

/// The per-message fields a framing has read around a body (the sender and
/// fingerprint are the datagram's, the rest the message's own).
pub(super) struct Head {
    /// The sender id, not yet checked.
    pub sender: u16,
    /// The cluster fingerprint.
    pub fingerprint: u32,
    /// The message's term.
    pub term: u64,
    /// The kind, already known.
    pub kind: Kind,
    /// The flags byte, not yet checked.
    pub flags: u8,
    /// The aux byte (a RESIGN's successor), not yet checked.
    pub aux: u8,
}

/// A reader of a body's integers, each read bounds-checked: a short body is
/// `BadLength`, a malformed varint `BadVarint`.
struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
    ints: Ints,
    short: DecodeError,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let b = self.bytes.get(self.at..self.at + n).ok_or(self.short)?;
        self.at += n;
        Ok(b)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        match self.ints {
            Ints::Fixed => self.take(8).map(BigEndian::read_u64),
            Ints::Varint => {
                let (v, n) = varint::read(&self.bytes[self.at.min(self.bytes.len())..])
                    .map_err(|e| e.unwrap_or(self.short))?;
                self.at += n;
                Ok(v)
            }
        }
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        match self.ints {
            Ints::Fixed => self.take(4).map(BigEndian::read_u32),
            Ints::Varint => u32::try_from(self.u64()?).map_err(|_| DecodeError::BadVarint),
        }
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.take(1).map(|b| b[0])
    }

    fn id(&mut self) -> Result<u16, DecodeError> {
        match self.ints {
            Ints::Fixed => self.take(2).map(BigEndian::read_u16),
            Ints::Varint => self.u8().map(u16::from),
        }
    }
}

/// A body's fields as read, before any of them is checked.
enum Raw {
    Lead(u64, u32),
    Elect(u64, u64, u8, u8),
    Vote(u16),
    Ack(u64),
}

/// Decodes the message of `head` whose body opens `bytes`: the body's presence (its
/// integers read as `ints` says), the flags, the aux byte, the sender, the body's
/// fields, and as `maps` says a LEAD's alive map (canonical: at most 32 bytes, no
/// trailing zero byte) and its ack map when flagged (canonical and not empty), in that
/// order. Returns the message and the bytes of `bytes` it took. `len` is the
/// datagram's length, for errors.
pub(super) fn read(
    head: Head,
    bytes: &[u8],
    maps: Maps,
    ints: Ints,
    len: usize,
) -> Result<(Message, usize), DecodeError> {
    let Head {
        sender,
        fingerprint,
        term,
        kind,
        flags,
        aux,
    } = head;
    let bad_length = DecodeError::BadLength { kind, len };
    let mut c = Cursor {
        bytes,
        at: 0,
        ints,
        short: bad_length,
    };
    let raw = match kind {
        Kind::Lead => Raw::Lead(c.u64()?, c.u32()?),
        Kind::Elect => Raw::Elect(c.u64()?, c.u64()?, c.u8()?, c.u8()?),
        Kind::Vote => Raw::Vote(c.id()?),
        Kind::Ack => Raw::Ack(c.u64()?),
    };
    let allowed = match kind {
        // The ack flag exists in versions 7 and 8 only: older builds refuse it.
        Kind::Lead if maps == Maps::Acks => FLAG_RESIGN | FLAG_LEAD_UNFIT | FLAG_LEAD_ACKS,
        Kind::Lead => FLAG_RESIGN | FLAG_LEAD_UNFIT,
        Kind::Elect => FLAG_INELIGIBLE | FLAG_LAST_RESORT,
        Kind::Ack => FLAG_UNFIT,
        Kind::Vote => 0,
    };
    // LAST_RESORT qualifies INELIGIBLE and means nothing without it.
    let lone_last_resort =
        kind == Kind::Elect && flags & FLAG_LAST_RESORT != 0 && flags & FLAG_INELIGIBLE == 0;
    // A RESIGN asks no one to acknowledge it: it is never sent with an ack map.
    let resign_acks = kind == Kind::Lead && flags & FLAG_RESIGN != 0 && flags & FLAG_LEAD_ACKS != 0;
    if flags & !allowed != 0 || lone_last_resort || resign_acks {
        return Err(DecodeError::BadFlags(flags));
    }
    // Only a RESIGN may name a successor; the byte is 0 in every other message.
    if aux != 0 && !(kind == Kind::Lead && flags & FLAG_RESIGN != 0) {
        return Err(DecodeError::BadFlags(aux));
    }
    if !valid_id(sender) {
        return Err(DecodeError::BadId(sender));
    }
    let mut used = c.at;
    let body = match raw {
        Raw::Lead(seq, hold_ms) => Body::Lead {
            seq,
            hold_ms,
            resign: flags & FLAG_RESIGN != 0,
            successor: u16::from(aux),
            unfit: flags & FLAG_LEAD_UNFIT != 0,
            alive: if maps != Maps::None {
                let n = usize::from(*bytes.get(used).ok_or(bad_length)?);
                let map = bytes
                    .get(used + 1..used + 1 + n)
                    .filter(|m| n <= MAX_ALIVE && m.last() != Some(&0))
                    .ok_or(bad_length)?;
                used += 1 + n;
                PeerSet::from_wire(map)
            } else {
                PeerSet::EMPTY
            },
            acks: if flags & FLAG_LEAD_ACKS != 0 {
                // Flagged, so versions 7/8: a length of 1..=32 and that many bytes,
                // the last not zero (the flag is set only for a non-empty set).
                let n = usize::from(*bytes.get(used).ok_or(bad_length)?);
                if n == 0 || n > MAX_ALIVE {
                    return Err(DecodeError::BadAcks(n));
                }
                let map = bytes.get(used + 1..used + 1 + n).ok_or(bad_length)?;
                if map.last() == Some(&0) {
                    return Err(DecodeError::BadAcks(n));
                }
                used += 1 + n;
                PeerSet::from_wire(map)
            } else {
                PeerSet::EMPTY
            },
        },
        Raw::Elect(last_term, last_seq, priority, heard) => Body::Elect {
            last_term,
            last_seq,
            priority,
            heard,
            ineligible: flags & FLAG_INELIGIBLE != 0,
            last_resort: flags & FLAG_LAST_RESORT != 0,
        },
        Raw::Vote(candidate) => {
            if !valid_id(candidate) {
                return Err(DecodeError::BadId(candidate));
            }
            Body::Vote { candidate }
        }
        Raw::Ack(seq) => Body::Ack {
            seq,
            unfit: flags & FLAG_UNFIT != 0,
        },
    };
    let msg = Message {
        sender,
        fingerprint,
        term,
        body,
    };
    Ok((msg, used))
}
