//! The scan for the first byte a JSON string must escape (`"`, `\\`, controls), eight or
//! sixteen bytes at a time: shared by the writer and the reader. It never reads past its slice.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each of the eight bytes of `w` (little-endian) that is `"`, `\` or below
/// 0x20. The lowest set bit is exact: the borrow of a subtraction can mark a later byte only
/// after an earlier one already matched.
#[inline]
fn escape_mask(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let control = w.wrapping_sub(0x20 * ONES) & !w & HIGHS;
    control | zero(w ^ (b'"' as u64 * ONES)) | zero(w ^ (b'\\' as u64 * ONES))
}

/// The first of sixteen bytes that needs an escape, if any: `"`, `\\` or below 0x20, found
/// by SSE2 byte compares, the same bytes [`escape_mask`] marks.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn first_in_block(b: [u8; 16]) -> Option<usize> {
    let mask = block_mask(b);
    (mask != 0).then(|| mask.trailing_zeros() as usize)
}

/// Bit `i` set for each byte `i` of sixteen that needs an escape: `"`, `\\` or below 0x20,
/// found by SSE2 byte compares, the same bytes [`escape_mask`] marks.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
pub(super) fn block_mask(b: [u8; 16]) -> u32 {
    block_masks(b).0
}

/// [`block_mask`] and, apart, the bits of the bytes below 0x20 (whose escapes are six bytes
/// long), found by SSE2 byte compares.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
pub(super) fn block_masks(b: [u8; 16]) -> (u32, u32) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
        _mm_set1_epi8,
    };
    let v = u128::from_le_bytes(b);
    // SAFETY: these intrinsics need SSE2, which this build targets (the `cfg` above; every
    // x86-64 CPU has it); they compute on registers and read no memory.
    let (all, controls) = unsafe {
        let v = _mm_set_epi64x((v >> 64) as i64, v as i64);
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `b <= 0x1f`: the larger of `b` and 0x1f is 0x1f.
        let ceiling = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, ceiling), ceiling);
        (
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)),
            _mm_movemask_epi8(control),
        )
    };
    // movemask sets the low sixteen bits only.
    (all as u32, controls as u32)
}

/// [`block_mask`] where the machine has no sixteen-byte compares: the table, byte by byte
/// ([`escape_mask`] is exact only at its lowest mark, so it cannot give every position).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
pub(super) fn block_mask(b: [u8; 16]) -> u32 {
    block_masks(b).0
}

/// [`block_masks`] where the machine has no sixteen-byte compares, byte by byte.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
pub(super) fn block_masks(b: [u8; 16]) -> (u32, u32) {
    b.iter()
        .enumerate()
        .fold((0u32, 0u32), |(all, controls), (i, &x)| {
            (
                all | (u32::from(ESCAPE[x as usize] != 0) << i),
                controls | (u32::from(x < 0x20) << i),
            )
        })
}

/// The first byte that needs an escape in `w`, if any.
#[inline]
fn first_in_word(w: [u8; 8]) -> Option<usize> {
    let mask = escape_mask(u64::from_le_bytes(w));
    (mask != 0).then(|| (mask.trailing_zeros() / 8) as usize)
}

/// The escape serde_json writes for a byte: 0 for none, `u` for `\u00XX`, else the letter.
pub(super) static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Where the first byte that needs an escape is. Text of sixteen bytes or more is read sixteen
/// at a time where the machine compares sixteen at once ([`first_in_block`]), shorter text
/// eight at a time ([`first_in_word`]), text shorter than a word byte by byte. The last few
/// bytes are read as the text's last block (or word), overlapping bytes already checked: they
/// need no escape, so any found is past them. Inlined: most strings are short, and a call
/// costs as much as reading one.
#[inline(always)]
pub(super) fn first_escape(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len();
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if n >= 16 {
        let mut at = 0;
        while let Some(block) = bytes.get(at..at + 16) {
            if let Some(i) = <[u8; 16]>::try_from(block).ok().and_then(first_in_block) {
                return Some(at + i);
            }
            at += 16;
            // A run past its first [`SHORT`] bytes is a long one (a description, a document's
            // body): the rest out of line, thirty-two bytes at a time where the CPU can.
            if at == SHORT {
                return first_escape_long(bytes, at);
            }
        }
        if at == n {
            return None;
        }
        let last = <[u8; 16]>::try_from(bytes.get(n - 16..)?).ok()?;
        return first_in_block(last).map(|i| n - 16 + i);
    }
    if n < 8 {
        return bytes.iter().position(|&b| ESCAPE[b as usize] != 0);
    }
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        if let Ok(w) = <[u8; 8]>::try_from(word)
            && let Some(i) = first_in_word(w)
        {
            return Some(at + i);
        }
        at += 8;
    }
    if words.remainder().is_empty() {
        return None;
    }
    let last = <[u8; 8]>::try_from(bytes.get(n - 8..)?).ok()?;
    first_in_word(last).map(|i| n - 8 + i)
}

/// The first byte from `at` on that needs an escape, in a text whose bytes before `at` need
/// none: the long scan where there is one.
pub(super) fn next_escape(bytes: &[u8], at: usize) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if bytes.len() >= 16 {
        return first_escape_long(bytes, at);
    }
    first_escape(bytes.get(at..)?).map(|i| at + i)
}

/// Bytes of a run [`first_escape`] scans inline; [`first_escape_long`] scans the rest. Most
/// strings end within them; a call costs about what two blocks do.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
const SHORT: usize = 64;

/// [`first_escape`] of `bytes` from `at` on (a text of at least sixteen bytes, the bytes
/// before `at` needing no escape): thirty-two bytes at a time with AVX2 where the CPU has it
/// (asked once and cached by `std`; the build itself targets every x86-64), sixteen
/// otherwise. Out of line: only long texts come here.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(never)]
fn first_escape_long(bytes: &[u8], at: usize) -> Option<usize> {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (asked above), all `first_escape_avx2` needs.
        return unsafe { first_escape_avx2(bytes, at) };
    }
    first_escape_sse2(bytes, at)
}

/// The AVX2 loop of [`first_escape_long`]: the same bytes [`block_masks`] marks, found by
/// 32-byte compares.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn first_escape_avx2(bytes: &[u8], mut at: usize) -> Option<usize> {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    // Unsigned `b <= 0x1f`: the larger of `b` and 0x1f is 0x1f.
    let ceiling = _mm256_set1_epi8(0x1f);
    while let Some(block) = bytes.get(at..at + 32) {
        // SAFETY: `block` is 32 readable bytes; the load takes any alignment.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().cast::<__m256i>()) };
        let marked = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, backslash)),
            _mm256_cmpeq_epi8(_mm256_max_epu8(v, ceiling), ceiling),
        );
        // One bit per byte, all 32 of them.
        let mask = _mm256_movemask_epi8(marked) as u32;
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 32;
    }
    first_escape_sse2(bytes, at)
}

/// [`first_escape_long`] without AVX2, and the AVX2 loop's last bytes: whole sixteen-byte
/// blocks from `at` on, then the text's last sixteen bytes read as a block, overlapping bytes
/// already found to need no escape (any mark found is past them). The text is at least
/// sixteen bytes long.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub(super) fn first_escape_sse2(bytes: &[u8], mut at: usize) -> Option<usize> {
    let n = bytes.len();
    while at + 16 < n {
        let block = <[u8; 16]>::try_from(bytes.get(at..at + 16)?).ok()?;
        if let Some(i) = first_in_block(block) {
            return Some(at + i);
        }
        at += 16;
    }
    if at >= n {
        return None;
    }
    let last = <[u8; 16]>::try_from(bytes.get(n.checked_sub(16)?..)?).ok()?;
    first_in_block(last).map(|i| n - 16 + i)
}
