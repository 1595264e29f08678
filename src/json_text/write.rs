//! Writes `serde_json::Value`s and [`Doc`]s as JSON text, byte for byte what
//! `serde_json::to_vec` writes. It never reads JSON text.

use super::scan::{ESCAPE, block_masks, first_escape, next_escape};
use crate::json_doc::Doc;
use serde_json::{Map, Value};

/// The JSON text of `value`.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    out
}

/// The JSON text of `value`, as a `String`.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out);
    // Only valid UTF-8 is written: the strings' own bytes and ASCII around them.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the JSON text of `value` to `out`.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            let mut first = true;
            for item in items {
                if !first {
                    out.push(b',');
                }
                first = false;
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(map, out),
    }
}

/// Appends the JSON text of the object `map` to `out`.
pub fn write_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    write_object(map.iter(), |_, v, out| write(v, out), out);
}

/// Appends an object of `members` (in the order given), each value written by `value`, which
/// is given the member's key too.
pub fn write_object<'m, K: AsRef<str> + 'm, V: 'm>(
    members: impl Iterator<Item = (&'m K, &'m V)>,
    mut value: impl FnMut(&K, &V, &mut Vec<u8>),
    out: &mut Vec<u8>,
) {
    out.push(b'{');
    for (i, (key, item)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(key.as_ref(), out);
        out.push(b':');
        value(key, item, out);
    }
    out.push(b'}');
}

/// Appends the JSON text of `doc` to `out`: the text [`write`] gives for its value (members
/// are already in key order, each key once).
pub fn write_doc(doc: &Doc<'_>, out: &mut Vec<u8>) {
    match doc {
        Doc::Null => out.extend_from_slice(b"null"),
        Doc::Bool(true) => out.extend_from_slice(b"true"),
        Doc::Bool(false) => out.extend_from_slice(b"false"),
        Doc::Num(n) => write_number(n, out),
        Doc::Str(s) => write_str(s, out),
        Doc::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_doc(item, out);
            }
            out.push(b']');
        }
        Doc::Obj(members) => write_object(
            members.iter().map(|(k, v)| (k, v)),
            |_, v, out| write_doc(v, out),
            out,
        ),
    }
}

fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    } else {
        // Floats: serde_json's own shortest round-trip form (a `Number` is always finite).
        let _ = serde_json::to_writer(&mut *out, n);
    }
}

/// Appends `s` as a JSON string.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    write_str_bytes(s.as_bytes(), out);
}

/// Appends UTF-8 text as a JSON string: [`write_str`] for text already known to be UTF-8,
/// such as JSON text this module wrote, so that it is not checked again. Bytes from 0x80 up
/// are copied as they are, so text that is not UTF-8 gives a string that is not either.
pub fn write_str_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    // Room for the text, its quotes, and the escapes of JSON text (about one byte in eight).
    out.reserve(bytes.len() + bytes.len() / 8 + 2);
    out.push(b'"');
    write_str_contents(bytes, out);
    out.push(b'"');
}

/// Appends UTF-8 text escaped as the inside of a JSON string, without its quotes: a string
/// written in pieces (text formatted as it is written) is its quotes around these.
pub fn write_str_contents(bytes: &[u8], out: &mut Vec<u8>) {
    let done = escape_blocks(bytes, out, true);
    write_rest(bytes.get(done..).unwrap_or_default(), out);
}

/// [`write_str_contents`] with the blocks of quotes and backslashes shuffled (where the CPU
/// has SSSE3) or not, for the tests to compare both ways.
#[cfg(test)]
pub(super) fn write_str_contents_either(bytes: &[u8], out: &mut Vec<u8>, shuffled: bool) {
    let done = escape_blocks(bytes, out, shuffled);
    write_rest(bytes.get(done..).unwrap_or_default(), out);
}

/// The text [`escape_blocks`] left, escaped run by run.
fn write_rest(mut rest: &[u8], out: &mut Vec<u8>) {
    // Each escape-free run is copied whole; most strings are one run.
    while let Some(at) = first_escape(rest) {
        out.extend_from_slice(&rest[..at]);
        push_escape(rest[at], out);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// Writes `bytes` escaped sixteen bytes at a time, up to the last whole block or to the first
/// block `out` has no room for; returns how many bytes of `bytes` are written. Text where
/// escapes are dense (JSON text as a string, every key and string value quoted) is written
/// into the spare capacity, checked once per block: each run before an escape as a fixed
/// sixteen-byte store from the block, each escape as a fixed eight-byte store from
/// [`ESCAPED`], the surplus of both overwritten by what follows. No length check, call or
/// rescan per escape. Escape-free blocks (most of a long text with few
/// escapes) are only scanned, and copied as one run before the next block with an escape.
///
/// Hand-written rather than taken from a crate: `serde_json` escapes byte by byte through
/// its formatter, and the SIMD JSON crates escape only inside their own serializers. Tested
/// against `serde_json` (`json_text::tests`: escapes at every offset of every block, runs of
/// every length, six-byte escapes only).
///
/// Where the CPU has SSSE3, a block whose escapes are all `"` or `\\` is written by two
/// shuffles instead ([`super::shuffle`]), whatever the number of escapes.
/// `shuffle: false` keeps to the per-escape stores (for the tests).
#[inline]
fn escape_blocks(bytes: &[u8], out: &mut Vec<u8>, shuffle: bool) -> usize {
    if bytes.len() < 16 {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    if shuffle && std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3 (asked above), all `escape_blocks_ssse3` needs.
        return unsafe { escape_blocks_ssse3(bytes, out) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = shuffle;
    escape_blocks_with::<false>(bytes, out)
}

/// [`escape_blocks`] with the blocks of quotes and backslashes shuffled.
///
/// # Safety
///
/// The CPU has SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn escape_blocks_ssse3(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    escape_blocks_with::<true>(bytes, out)
}

/// The block loop of [`escape_blocks`]; `SHUFFLED` only where the CPU has SSSE3 (see
/// [`escape_blocks_ssse3`]). Always inlined, so that its callers' target features apply.
#[inline(always)]
fn escape_blocks_with<const SHUFFLED: bool>(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    let mut at = 0;
    // `bytes[..done]` is written; the escape-free blocks after it are copied in one run when
    // a block with an escape (or the end) is met.
    let mut done = 0;
    // Escape-free blocks in a row: past a few, the run (a long text inside the JSON) is
    // found to its end by the long scan.
    let mut clean = 0;
    while let Some(block) = bytes.get(at..).and_then(<[u8]>::first_chunk::<16>) {
        let (mut mask, controls) = block_masks(*block);
        if mask == 0 {
            at += 16;
            clean += 1;
            if clean == 4 {
                clean = 0;
                match next_escape(bytes, at) {
                    // The next block starts at the escape.
                    Some(next) => at = next,
                    None => {
                        at = bytes.len();
                        break;
                    }
                }
            }
            continue;
        }
        clean = 0;
        if done < at {
            out.extend_from_slice(bytes.get(done..at).unwrap_or_default());
            done = at;
        }
        #[cfg(target_arch = "x86_64")]
        if SHUFFLED && controls == 0 {
            if out.capacity() - out.len() < super::shuffle::ROOM {
                break;
            }
            let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
            // SAFETY: `SHUFFLED` is true only within `escape_blocks_ssse3`, whose caller
            // found SSSE3; the spare capacity holds `shuffle::ROOM` bytes (checked above),
            // and the `w` bytes the call returns are written there.
            unsafe {
                let w = super::shuffle::escape_block(block, mask, dst);
                out.set_len(out.len() + w);
            }
            at += 16;
            done = at;
            continue;
        }
        let room = if controls == 0 { ROOM } else { ROOM_CONTROLS };
        // Without that room left, the rest is the caller's, written as it needs: reserving
        // the worst case here would double a buffer sized for the text it holds (a response
        // sized from the body it copies), for a block that may need two bytes more.
        if out.capacity() - out.len() < room {
            break;
        }
        // The block, then zeros: the run from any of its bytes on is a sixteen-byte window.
        let mut window = [0u8; 32];
        window[..16].copy_from_slice(block);
        let src = window.as_ptr();
        let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        // `w`: bytes written into the spare capacity; `from`: the block's bytes written.
        let mut w = 0;
        let mut from = 0;
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            // `mask` has sixteen bits: `i < 16` (the mask spares the bounds check).
            let escape = &ESCAPED[usize::from(block[i & 15])];
            debug_assert!(from <= i && i < 16 && w + 16 <= room);
            // SAFETY: `from <= i < 16`, so the sixteen bytes read from `src + from` are within
            // `window`'s 32. `w` is the block's bytes written plus, per escape written, its
            // length minus one (5 for a control byte, else 1), and there are no more escapes
            // than bytes: before the run `w <= 6 * 15 = 90` (`2 * 15 = 30` without control
            // bytes) and the run is sixteen bytes; before the escape `w <= 6 * i` (`2 * i`)
            // and it is eight: within `room` (`ROOM_CONTROLS`, `ROOM`), which the spare
            // capacity holds (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(src.add(from), dst.add(w), 16);
                w += i - from;
                std::ptr::copy_nonoverlapping(escape.as_ptr(), dst.add(w), 8);
            }
            w += usize::from(escape[7]);
            from = i + 1;
            mask &= mask - 1;
        }
        debug_assert!(from <= 16 && w + 16 <= room);
        // SAFETY: `from <= 16`: the read is within `window`; `w <= 6 * 16 = 96` (`2 * 16 = 32`
        // without control bytes), so the sixteen bytes stored end within `room`.
        unsafe { std::ptr::copy_nonoverlapping(src.add(from), dst.add(w), 16) };
        w += 16 - from;
        // SAFETY: `dst[..w]` is written: each store covers from `w` on and `w` moves by at
        // most what the store wrote (a run's length, an escape's), and `w <= room`, within the
        // spare capacity checked above, so `out.len() + w` bytes of `out` are initialised.
        unsafe { out.set_len(out.len() + w) };
        at += 16;
        done = at;
    }
    // Escape-free blocks to the end (or to the block left to the caller): found so already,
    // not scanned again by the caller.
    if done < at {
        out.extend_from_slice(bytes.get(done..at).unwrap_or_default());
        done = at;
    }
    done
}

/// Room a block without control bytes writes into: before a store, `w` is the bytes of the
/// block read so far plus one per escape, at most 32, and a store writes sixteen.
/// `escape_blocks` writes within it without a check per store.
const ROOM: usize = 48;

/// Room a block with control bytes writes into: five more bytes per escape (`\u00XX`).
const ROOM_CONTROLS: usize = 112;

/// The escape of each byte, padded to eight bytes, its length in the last: the `\X` or
/// `\u00XX` of [`ESCAPE`] (serde_json's), and zeros for the bytes that need none.
static ESCAPED: [[u8; 8]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match ESCAPE[b] {
            0 => [0; 8],
            b'u' => [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 0xf], 0, 6],
            letter => [b'\\', letter, 0, 0, 0, 0, 0, 2],
        };
        b += 1;
    }
    t
};

/// Appends the escape of one byte that needs one.
#[inline(always)]
fn push_escape(b: u8, out: &mut Vec<u8>) {
    let escape = &ESCAPED[b as usize];
    out.extend_from_slice(escape.get(..usize::from(escape[7])).unwrap_or_default());
}
