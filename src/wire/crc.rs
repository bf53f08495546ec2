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
    let t = &NIBBLES.0;
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        c = (c >> 4) ^ t[(c & 15) as usize];
        c = (c >> 4) ^ t[(c & 15) as usize];
    }
    !c
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
    }
}
