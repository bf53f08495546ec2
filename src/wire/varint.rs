//! Unsigned LEB128 varints, as the compact bundle (versions 5 and 6) writes its terms,
//! sequence numbers and hold: seven bits a byte, least significant first, the high bit
//! set on every byte but the last. Only the minimal encoding of a value up to `u64::MAX`
//! is accepted, so every value has exactly one encoding (decode(encode(b)) == b and
//! encode(decode(x)) == x).

use super::DecodeError;

/// The longest encoding: a u64 takes at most ten bytes (9 x 7 + 1 bits).
pub(super) const MAX_LEN: usize = 10;

/// The bytes `v` takes.
pub(super) fn len(v: u64) -> usize {
    // 1 for 0..=127, then one more per 7 significant bits.
    let bits = 64 - v.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

/// Appends the minimal encoding of `v`.
pub(super) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint that opens `bytes`: its value and length. `Err(None)` when `bytes`
/// end inside it (the caller names the short field); `Err(Some(BadVarint))` for an
/// encoding that is not minimal (a last byte of 0 after another) or whose value
/// exceeds `u64::MAX` (more than ten bytes, or a tenth byte above 1).
pub(super) fn read(bytes: &[u8]) -> Result<(u64, usize), Option<DecodeError>> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_LEN) {
        if i == MAX_LEN - 1 && b > 1 {
            return Err(Some(DecodeError::BadVarint));
        }
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(Some(DecodeError::BadVarint));
            }
            return Ok((v, i + 1));
        }
    }
    if bytes.len() >= MAX_LEN {
        // Ten bytes read, the tenth with its high bit set: an eleventh would follow.
        return Err(Some(DecodeError::BadVarint));
    }
    Err(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put(&mut b, v);
        b
    }

    #[test]
    fn values_round_trip_with_their_length() {
        let mut vs = vec![0, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX)];
        vs.extend((0..64).map(|s| 1u64 << s));
        vs.extend((1..64).map(|s| (1u64 << s) - 1));
        vs.push(u64::MAX);
        for v in vs {
            let b = enc(v);
            assert_eq!(b.len(), len(v), "{v}");
            assert_eq!(read(&b), Ok((v, b.len())), "{v}");
            let mut more = b.clone();
            more.push(0x55);
            assert_eq!(read(&more), Ok((v, b.len())), "{v} then more");
            for cut in 0..b.len() {
                assert_eq!(read(&b[..cut]), Err(None), "{v} cut at {cut}");
            }
        }
        assert_eq!(enc(300), [0xAC, 0x02]);
        assert_eq!(enc(u64::MAX).len(), 10);
    }

    #[test]
    fn overlong_and_too_large_are_refused() {
        let bad = Err(Some(DecodeError::BadVarint));
        // Non-minimal: a trailing zero group.
        assert_eq!(read(&[0x80, 0x00]), bad);
        assert_eq!(read(&[0x81, 0x80, 0x00]), bad);
        assert_eq!(read(&[0xFF, 0x00]), bad);
        // Above u64::MAX: a tenth byte beyond 1, or an eleventh byte.
        let mut over = vec![0xFF; 9];
        over.push(0x02);
        assert_eq!(read(&over), bad);
        let mut eleven = vec![0xFF; 10];
        eleven.push(0x01);
        assert_eq!(read(&eleven), bad);
        let mut max = vec![0xFF; 9];
        max.push(0x01);
        assert_eq!(read(&max), Ok((u64::MAX, 10)));
        // The shortest form of 0 is one byte.
        assert_eq!(read(&[0x00]), Ok((0, 1)));
    }

    /// Every input of up to three bytes: never a panic, and what is accepted re-encodes
    /// to the bytes read.
    #[test]
    fn every_short_input_is_canonical_or_refused() {
        for n in 0..=0xFF_FFFFu32 {
            let b = n.to_le_bytes();
            for l in 1..=3 {
                if let Ok((v, used)) = read(&b[..l]) {
                    assert_eq!(enc(v), &b[..used]);
                }
            }
        }
    }
}
