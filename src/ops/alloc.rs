//! The process's global allocator: mimalloc, entered where its fast paths are.
//! It must never change the memory a caller gets (size, alignment, contents), only which of
//! mimalloc's entry points serves the request.
//!
//! The `mimalloc` crate sends every request to `mi_malloc_aligned`, even for the alignments
//! every block already has. That costs about twice `mi_malloc`'s fast path, and when the size
//! class has no free block at hand it over-allocates by the alignment instead of taking a new
//! page (about 25 such calls per `tools/call`, for the 16-byte-aligned tables of
//! `serde_json`'s maps). Here, what `mi_malloc` guarantees anyway is asked of `mi_malloc`, as
//! Rust's system allocator does with `malloc`.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// mimalloc, with requests for the alignments its blocks always have sent to the plain calls.
pub struct Allocator;

/// `MI_MAX_ALIGN_SIZE`: mimalloc aligns every block of at least 16 bytes to 16.
const MAX_ALIGN: usize = 16;

/// Every mimalloc block is aligned to a machine word.
const WORD: usize = size_of::<usize>();

/// True when a plain `mi_malloc(size)` block is aligned for `align`.
#[inline(always)]
fn plain(size: usize, align: usize) -> bool {
    align <= WORD || (align <= MAX_ALIGN && align <= size)
}

/// A new block for `layout`: from `plain_call` when its blocks are aligned enough (see
/// [`plain`]), else from `aligned_call`.
///
/// # Safety
/// `plain_call` and `aligned_call` are mimalloc's allocation calls, both zeroing or neither.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller passes mimalloc's calls; sizes and alignments come from a `Layout`.
    unsafe {
        if plain(layout.size(), layout.align()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every call is forwarded to mimalloc, which returns blocks of at least the size asked
// (or null), aligned as `plain` states for the plain calls and to `align` for the aligned ones,
// frees any of its blocks with `mi_free`, and keeps a block's contents (up to the smaller size)
// on reallocation.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation calls have no precondition beyond a valid size.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator; a block kept in place keeps the alignment
        // it was allocated with, and a new one is aligned as for a fresh allocation.
        unsafe {
            if plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills `len` bytes at `p` with a pattern derived from `seed`.
    unsafe fn fill(p: *mut u8, len: usize, seed: usize) {
        for i in 0..len {
            // SAFETY: the caller owns `len` bytes at `p`.
            unsafe { p.add(i).write((i.wrapping_mul(31) ^ seed) as u8) };
        }
    }

    unsafe fn holds(p: *const u8, len: usize, seed: usize) -> bool {
        // SAFETY: the caller owns `len` initialised bytes at `p`.
        (0..len).all(|i| unsafe { p.add(i).read() } == (i.wrapping_mul(31) ^ seed) as u8)
    }

    #[test]
    fn every_block_has_its_alignment_and_keeps_its_contents() {
        let a = Allocator;
        let mut sizes: Vec<usize> = (1..=130).collect();
        sizes.extend([255, 256, 1000, 4095, 4096, 70_000, 1 << 20, 5 << 20]);
        for &size in &sizes {
            for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: non-zero sizes, valid layouts, each block used within its size and
                // freed once with the layout it was (re)allocated with.
                unsafe {
                    let z = a.alloc_zeroed(layout);
                    assert!(!z.is_null());
                    assert_eq!(z as usize % align, 0, "alloc_zeroed {size} / {align}");
                    assert!((0..size).all(|i| z.add(i).read() == 0));
                    a.dealloc(z, layout);

                    for new_size in [size / 2 + 1, size + 1, size * 3 + 17] {
                        let p = a.alloc(layout);
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "alloc {size} / {align}");
                        fill(p, size, size);
                        let q = a.realloc(p, layout, new_size);
                        assert!(!q.is_null());
                        assert_eq!(
                            q as usize % align,
                            0,
                            "realloc {size} -> {new_size} / {align}"
                        );
                        assert!(holds(q, size.min(new_size), size), "{size} -> {new_size}");
                        a.dealloc(q, Layout::from_size_align_unchecked(new_size, align));
                    }
                }
            }
        }
    }

    #[test]
    fn plain_calls_are_used_only_for_alignments_blocks_always_have() {
        assert!(plain(1, 1) && plain(3, 8) && plain(16, 16) && plain(24, 16));
        assert!(!plain(8, 16) && !plain(64, 32) && !plain(4096, 4096));
    }
}
