//! The trailer that ends every datagram: a CRC-32 of everything before it (versions 1
//! and 3), or, when a key is configured (SPEC section 10), an HMAC-SHA256 tag truncated
//! to `TAG_LEN` bytes (versions 2 and 4). [`seal`] appends it; [`open`] checks the
//! length and the trailer before a framing reads any field.

use super::frame::Format;
use super::{DecodeError, TAG_LEN, TRAILER_LEN};
use byteorder::{BigEndian, ByteOrder};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

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

    /// True when `tag` is this key's tag of `signed` (compared in constant time).
    fn verifies(&self, signed: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.0.clone();
        mac.update(signed);
        mac.verify_truncated_left(tag).is_ok()
    }
}

/// The trailer's length: a CRC-32 unkeyed, a tag keyed.
pub(super) fn len(keyed: bool) -> usize {
    if keyed { TAG_LEN } else { TRAILER_LEN }
}

/// Appends the trailer of the datagram that starts at `out[start]`: the tag under
/// `key`, or without one the CRC-32.
pub(super) fn seal(out: &mut Vec<u8>, start: usize, key: Option<&Key>) {
    match key {
        Some(key) => {
            let mut mac = key.0.clone();
            mac.update(&out[start..]);
            let tag = mac.finalize().into_bytes();
            out.extend_from_slice(&tag[..TAG_LEN]);
        }
        None => {
            let crc = super::crc::crc32(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
    }
}

/// Checks a datagram of `format` (its keyed-ness is `keys.is_some()`): its length
/// within the format's bounds, then its trailer, the tag under any of `keys` or the
/// CRC-32. Returns the bytes the trailer covers, for the framing to parse.
pub(super) fn open<'b>(
    bytes: &'b [u8],
    format: Format,
    keys: Option<&[&Key]>,
) -> Result<&'b [u8], DecodeError> {
    debug_assert_eq!(format.keyed, keys.is_some());
    let len = bytes.len();
    if len < format.min_len() {
        return Err(DecodeError::TooShort(len));
    }
    if len > format.max_len() {
        return Err(DecodeError::TooLong(len));
    }
    let (signed, trailer) = bytes.split_at(len - format.trailer_len());
    match keys {
        Some(keys) if keys.iter().any(|k| k.verifies(signed, trailer)) => Ok(signed),
        Some(_) => Err(DecodeError::BadTag),
        None if super::crc::crc32(signed) == BigEndian::read_u32(trailer) => Ok(signed),
        None => Err(DecodeError::BadTrailer),
    }
}
