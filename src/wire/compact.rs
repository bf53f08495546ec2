//! The compact bundle (version 5, keyed 6): the same entries as the version-3/4 bundle
//! in fewer bytes, for idle heartbeats above all (issue 25). What is left out is only
//! what never carries information: the bundle's flags and reserved bytes (always 0),
//! the sender's high byte (ids are 1..=255), the aux byte unless a flag says it is
//! there, and the leading zero bytes of terms, sequence numbers and the hold (minimal
//! unsigned LEB128, `varint.rs`). Every message is still whole in every datagram: a
//! receiver never needs an earlier datagram to read one (SPEC 5: the hold is a safety
//! input of a follower's faith, so it is sent every time, never inferred).
//!
//! - header: magic `EL`, version 5 (6 keyed), count, sender u8, fingerprint u32; keyed,
//!   the sender's counter u64 after it.
//! - entry: group, kind byte (kind in bits 0-3, the kind's flags in bits 4-6, bit 7: an
//!   aux byte follows), the aux byte when bit 7 is set (never 0), term varint; then the
//!   body: LEAD seq varint, hold_ms varint (at most `u32::MAX`), alive map (length byte
//!   and bitmap, as in version 3); ELECT last_term varint, last_seq varint, priority u8,
//!   heard u8; VOTE candidate u8; ACK seq varint.
//! - trailer: CRC-32 (or keyed the 16-byte HMAC tag) of everything before it.
//!
//! Versions 7 and 8 (`Framing::CompactAcks`) are the same bundle but for one LEAD flag,
//! `FLAG_LEAD_ACKS` (bit 6 of the kind byte): set exactly when the LEAD asks some
//! followers (not all) to acknowledge it, and then an ack map (length byte 1..=32 and
//! bitmap, laid out as the alive map, no trailing zero byte) follows the alive map.
//! Versions 5 and 6 refuse the flag (`BadFlags`), as builds before it do.

use super::body::{self, Head, Ints, Maps};
use super::frame::{Format, open_framed};
use super::trailer::{self, Key};
use super::{
    DecodeError, Entry, Framing, Kind, MAGIC, MAX_BUNDLE_LEN, MAX_ENTRIES, Message, Origin,
    valid_id, varint,
};

/// Kind byte: the kind's bits.
const KIND_MASK: u8 = 0x0F;
/// Kind byte: where the kind's flags start.
const FLAGS_SHIFT: u8 = 4;
/// Kind byte: the flags' bits once shifted down (flags above them cannot be written).
const FLAGS_MASK: u8 = 0x07;
/// Kind byte: an aux byte (a RESIGN's successor) follows.
const HAS_AUX: u8 = 0x80;

/// The maps a LEAD of `framing` (`Compact` or `CompactAcks`) carries.
fn maps(framing: Framing) -> Maps {
    match framing {
        Framing::CompactAcks => Maps::Acks,
        _ => Maps::Alive,
    }
}

/// The bytes `msg` takes as a compact entry of `framing`.
pub(super) fn entry_len(framing: Framing, msg: &Message) -> usize {
    let maps = maps(framing);
    let [_, _, aux] = body::head(&msg.body, maps);
    2 + usize::from(aux != 0) + varint::len(msg.term) + body::len(&msg.body, maps, Ints::Varint)
}

/// The kind byte and aux byte of `msg` (aux `None` when 0, so not sent).
fn kind_byte(msg: &Message, maps: Maps) -> (u8, Option<u8>) {
    let [kind, flags, aux] = body::head(&msg.body, maps);
    debug_assert!(flags <= FLAGS_MASK);
    let aux = (aux != 0).then_some(aux);
    let b = kind | (flags & FLAGS_MASK) << FLAGS_SHIFT | if aux.is_some() { HAS_AUX } else { 0 };
    (b, aux)
}

/// Appends one compact bundle of `framing` holding `entries` (at most `MAX_ENTRIES`, all
/// from `sender` with `fingerprint`); keyed (version 6 or 8) with `(counter, key)`, else
/// version 5 or 7. Returns the bytes written.
pub(super) fn encode(
    framing: Framing,
    sender: u16,
    fingerprint: u32,
    entries: &[Entry],
    keyed: Option<(u64, &Key)>,
    out: &mut Vec<u8>,
) -> usize {
    debug_assert!(!entries.is_empty() && entries.len() <= MAX_ENTRIES);
    debug_assert!(valid_id(sender));
    let entries = &entries[..entries.len().min(MAX_ENTRIES)];
    let format = Format {
        bundle: Some(framing),
        keyed: keyed.is_some(),
    };
    let maps = maps(framing);
    let start = out.len();
    // A bound, not the exact length: a bundle the packer made fits MAX_BUNDLE_LEN (or
    // is one entry, far shorter), and the host's buffers already hold that much, so
    // this is no work there. Summing every entry's length here was a second pass over
    // the entries (the packer made the first) at each LEAD (issue 25).
    out.reserve(MAX_BUNDLE_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[format.version(), entries.len() as u8, sender as u8]);
    out.extend_from_slice(&fingerprint.to_be_bytes());
    if let Some((counter, _)) = keyed {
        out.extend_from_slice(&counter.to_be_bytes());
    }
    for e in entries {
        let (kind, aux) = kind_byte(&e.msg, maps);
        out.push(e.group);
        out.push(kind);
        out.extend(aux);
        varint::put(out, e.msg.term);
        body::write(&e.msg.body, maps, Ints::Varint, out);
    }
    trailer::seal(out, start, keyed.map(|(_, k)| k));
    out.len() - start
}

/// Decodes a compact bundle of `framing`, keyed when `keys` are given: length and trailer, then
/// magic, version, count and sender; then each entry (its group below `groups`, its
/// kind, a present aux byte not 0, a minimal term, and the message's own checks); then
/// that the entries fill it exactly.
pub(super) fn decode(
    framing: Framing,
    bytes: &[u8],
    keys: Option<&[&Key]>,
    groups: usize,
    entries: &mut Vec<Entry>,
) -> Result<Origin, DecodeError> {
    let format = Format {
        bundle: Some(framing),
        keyed: keys.is_some(),
    };
    let maps = maps(framing);
    let len = bytes.len();
    let signed = open_framed(bytes, format, keys)?;
    let count = usize::from(signed[3]);
    if count == 0 || count > MAX_ENTRIES {
        return Err(DecodeError::BadCount(count));
    }
    let sender = u16::from(signed[4]);
    if !valid_id(sender) {
        return Err(DecodeError::BadId(sender));
    }
    let fingerprint = u32::from_be_bytes([signed[5], signed[6], signed[7], signed[8]]);
    entries.clear();
    entries.reserve(count);
    let mut at = format.header_len();
    for _ in 0..count {
        let e = signed.get(at..at + 2).ok_or(DecodeError::BadCount(count))?;
        let group = e[0];
        if usize::from(group) >= groups {
            return Err(DecodeError::BadGroup(group));
        }
        let kind = Kind::from_u8(e[1] & KIND_MASK).ok_or(DecodeError::BadKind(e[1] & KIND_MASK))?;
        let bad_length = DecodeError::BadLength { kind, len };
        at += 2;
        let aux = if e[1] & HAS_AUX != 0 {
            let aux = *signed.get(at).ok_or(bad_length)?;
            if aux == 0 {
                // Not canonical: an aux of 0 is never sent.
                return Err(DecodeError::BadFlags(e[1]));
            }
            at += 1;
            aux
        } else {
            0
        };
        let (term, used) = varint::read(&signed[at..]).map_err(|e| e.unwrap_or(bad_length))?;
        at += used;
        let head = Head {
            sender,
            fingerprint,
            term,
            kind,
            flags: e[1] >> FLAGS_SHIFT & FLAGS_MASK,
            aux,
        };
        let (msg, used) = body::read(head, &signed[at..], maps, Ints::Varint, len)?;
        at += used;
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
