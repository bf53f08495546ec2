//! The CRC-32 of the unkeyed trailer (IEEE 802.3, reflected, polynomial 0xEDB88320:
//! the same value as `crc32fast::hash`), computed with a table of 16 entries for the
//! short datagrams of a cluster at rest.
//!
//! Why not crc32fast for those (issue 25, cost at rest): below 64 bytes it falls back
//! to slicing-by-16, whose 16 KiB of tables a heartbeat's LEAD or ACK (23 and 17
//! bytes with one group) touches at some 30-40 lines, cold after its sleep: a leader
//! spent about 3.6 % of its CPU at rest in the two CRCs of a heartbeat (`perf record`
//! on loopback, BENCHMARKS.md). This table is one cache line, for eight dependent
//! steps a byte. From `CUTOFF` bytes on (bundles of many groups) crc32fast's folding
//! is used, whose cost grows far more slowly with the length; 128 is a round bound
//! well above a one-group heartbeat, not a measured crossover.

/// From this length on, crc32fast computes the CRC.
pub(super) const CUTOFF: usize = 128;

/// The CRC of each 4-bit value (reflected polynomial 0xEDB88320), on one cache line.
#[repr(align(64))]
struct Nibbles([u32; 16]);

static NIBBLES: Nibbles = Nibbles(nibbles());

const fn nibbles() -> [u32; 16] {
    let mut t = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// The CRC-32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    if bytes.len() >= CUTOFF {
        return crc32fast::hash(bytes);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("pclmulqdq") {
        // SAFETY: the CPU has PCLMULQDQ (checked just above; SSE2 is x86-64's base).
        return !unsafe { clmul::words(!0, bytes) };
    }
    !nibbles_of(!0, bytes)
}

/// The CRC register `c` run over `bytes`, a nibble at a time.
fn nibbles_of(mut c: u32, bytes: &[u8]) -> u32 {
    let t = &NIBBLES.0;
    for &b in bytes {
        c ^= u32::from(b);
        c = (c >> 4) ^ t[(c & 15) as usize];
        c = (c >> 4) ^ t[(c & 15) as usize];
    }
    c
}

/// Four bytes a step by carry-less multiplication (issue 25, cost at rest): the
/// register XOR the next 32-bit word is reduced modulo the polynomial with two
/// multiplications (Barrett, the constants of crc32fast's final reduction), no table.
/// A 23-byte LEAD takes five steps and three nibble bytes where the table took 46
/// dependent lookups.
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::*;

    /// The reflected polynomial with its x^32 term, and floor(x^64 / P) reflected.
    const P_X: i64 = 0x1_DB71_0641;
    const U_PRIME: i64 = 0x1_F701_1641;

    /// The CRC register `c` run over `bytes`: whole words first, the rest by nibbles.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn words(mut c: u32, bytes: &[u8]) -> u32 {
        let k = _mm_set_epi64x(U_PRIME, P_X);
        let mut words = bytes.chunks_exact(4);
        for w in &mut words {
            let v = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let x = _mm_cvtsi32_si128(v as i32);
            // floor(v * x^32 / P), its low 32 bits; then times P: v * x^32 mod P
            // lands in bits 32..64.
            let t1 = _mm_clmulepi64_si128(x, k, 0x10);
            let t1 = _mm_cvtsi32_si128(_mm_cvtsi128_si32(t1));
            let t2 = _mm_clmulepi64_si128(t1, k, 0x00);
            c = (_mm_cvtsi128_si64(t2) as u64 >> 32) as u32;
        }
        super::nibbles_of(c, words.remainder())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same value as crc32fast at every length on both sides of the cutoff, for
    /// bytes that set every bit, and the check value of the standard ("123456789").
    #[test]
    fn crc32_is_crc32fast_at_every_length() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let data: Vec<u8> = (0..2 * CUTOFF + 7)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in 0..data.len() {
            for start in [0, 1, 3] {
                let s = &data[start.min(len)..len];
                assert_eq!(
                    crc32(s),
                    crc32fast::hash(s),
                    "length {} from {start}",
                    s.len()
                );
            }
        }
        assert_eq!(crc32(&[0xFF; 40]), crc32fast::hash(&[0xFF; 40]));
        // Both short paths, whichever this CPU takes.
        for len in 0..CUTOFF {
            let s = &data[..len];
            assert_eq!(!nibbles_of(!0, s), crc32fast::hash(s), "nibbles, {len}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("pclmulqdq") {
                // SAFETY: checked just above.
                let c = !unsafe { clmul::words(!0, s) };
                assert_eq!(c, crc32fast::hash(s), "clmul, {len}");
            }
        }
    }
}
