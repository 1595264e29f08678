//! The escape of a sixteen-byte block whose only escapes are `"` and `\\` by two byte
//! shuffles (SSSE3 `pshufb`), for the writer's block loop. It never sees a control byte.
//!
//! Each half of the block (eight bytes) becomes the half's bytes with a `\\` put before each
//! marked one: one shuffle of the half and eight `\\`s, by the control [`SHUFFLES`] holds for
//! the half's mask, whatever the number of escapes. JSON text written as a string (the text
//! block of a structured result) has a quote every few bytes, where the loop of one store per
//! escape spends about sixteen instructions on each. Hand-written because no crate escapes
//! into a caller's buffer this way; checked against `serde_json` for every mask of a block
//! (the tests below).

use std::arch::x86_64::{
    __m128i, _mm_load_si128, _mm_loadu_si128, _mm_set1_epi8, _mm_shuffle_epi8, _mm_storeu_si128,
    _mm_unpackhi_epi64, _mm_unpacklo_epi64,
};

/// Bytes [`escape_block`] may store into: two sixteen-byte stores, the second at most sixteen
/// bytes on.
pub(super) const ROOM: usize = 32;

/// Per mask of a half-block, the shuffle that writes it escaped: output byte `j` is taken
/// from lane `i < 8` (the half's byte `i`) or from lane 8 (a `\\`). Lanes past the output's
/// length take `\\` too and are overwritten by what follows.
#[repr(C, align(16))]
struct Shuffles([[u8; 16]; 256]);

static SHUFFLES: Shuffles = {
    let mut t = [[8u8; 16]; 256];
    let mut mask = 0;
    while mask < 256 {
        let mut j = 0;
        let mut i = 0;
        while i < 8 {
            if mask & (1 << i) != 0 {
                t[mask][j] = 8;
                j += 1;
            }
            t[mask][j] = i as u8;
            j += 1;
            i += 1;
        }
        mask += 1;
    }
    Shuffles(t)
};

/// Per mask of a half-block, the length of the half escaped: eight plus one per escape.
static LENGTHS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut mask = 0;
    while mask < 256 {
        t[mask] = 8 + (mask as u32).count_ones() as u8;
        mask += 1;
    }
    t
};

/// Writes `block` escaped at `dst`, where bit `i` of `mask` (sixteen bits) marks a byte `i`
/// that is `"` or `\\` and no byte is a control; returns the bytes written (16 to 32).
///
/// # Safety
///
/// The CPU has SSSE3, and `dst` is valid for [`ROOM`] bytes of writes.
#[target_feature(enable = "ssse3")]
#[inline]
pub(super) unsafe fn escape_block(block: &[u8; 16], mask: u32, dst: *mut u8) -> usize {
    let low = (mask & 0xff) as usize;
    let high = ((mask >> 8) & 0xff) as usize;
    // SAFETY: the loads read `block`'s sixteen bytes and two rows of `SHUFFLES`, aligned to
    // sixteen by its `repr`; the stores write sixteen bytes at `dst` and at `dst + n`,
    // `n <= 16`, so within the ROOM bytes the caller gives.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let backslashes = _mm_set1_epi8(b'\\' as i8);
        let first = _mm_unpacklo_epi64(v, backslashes);
        let second = _mm_unpackhi_epi64(v, backslashes);
        let shuffles = SHUFFLES.0.as_ptr();
        let c0 = _mm_load_si128(shuffles.add(low).cast::<__m128i>());
        let c1 = _mm_load_si128(shuffles.add(high).cast::<__m128i>());
        _mm_storeu_si128(dst.cast::<__m128i>(), _mm_shuffle_epi8(first, c0));
        let n = usize::from(LENGTHS[low]);
        _mm_storeu_si128(dst.add(n).cast::<__m128i>(), _mm_shuffle_epi8(second, c1));
        n + usize::from(LENGTHS[high])
    }
}

#[cfg(test)]
mod tests {
    use super::super::write::write_str_contents_either;

    /// Every pattern of `"` and `\\` in a block (all 65,536 masks, each marked byte a quote or a
    /// backslash as another mask says), in two blocks and a tail, written by the block shuffles
    /// and by the loop of one store per escape, with room and without: both as serde_json
    /// writes it.
    #[test]
    fn every_mask_of_quotes_and_backslashes_escapes_as_serde_json_does() {
        for mask in 0u32..1 << 16 {
            let quotes = mask.rotate_left(5) ^ 0x5a5a;
            let block: String = (0..16u8)
                .map(|i| match (mask >> i & 1, quotes >> i & 1) {
                    (0, _) => char::from(b'a' + i),
                    (_, 1) => '"',
                    _ => '\\',
                })
                .collect();
            let s = format!("{block}{}é", block.chars().rev().collect::<String>());
            let want = serde_json::to_vec(&s).unwrap_or_default();
            let inside = want.get(1..want.len() - 1).unwrap_or_default();
            for shuffled in [true, false] {
                for spare in [0, 40, 128] {
                    let mut out = Vec::with_capacity(spare);
                    write_str_contents_either(s.as_bytes(), &mut out, shuffled);
                    assert_eq!(out, inside, "{s:?}, shuffled {shuffled}, room {spare}");
                }
            }
        }
    }
}
