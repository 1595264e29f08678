//! The executable's pages `portico serve` keeps resident: once startup (or a reload) is done,
//! its code and constants are unmapped, and what the requests use is mapped back as they use it.
//! It never unmaps a page that may hold anything but the file's bytes (data, a private copy).
//!
//! Startup runs code that nothing runs again: argument parsing, YAML, OpenRPC and JSON Schema
//! compilation, the jq compiler. The kernel maps code a fault and its neighbours at a time
//! (fault-around, 64 KiB), so a release build's resident set holds about 16 MiB of its 23 MiB
//! of code once started, most of it never used again, counted in the resident set and in the
//! pod's memory. `MADV_DONTNEED` on the executable's read-only mappings (code, constants) takes
//! them out of the process; the pages stay in the page cache, so what the requests use is
//! mapped back by minor faults (no disk read) as they first use it, and what is left unmapped
//! is the kernel's to reclaim under memory pressure. Only a private, not writable, file-backed
//! mapping of the running executable with no anonymous page is released (relocated constants
//! are copies, anonymous, and keep their whole mapping): its bytes are the file's, so unmapping
//! them loses nothing.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `portico serve` (unless told to keep its code): releases happen only in a process
/// that asked for them, never in one that links the library for another use (a test).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Lets [`release_code`] run in this process from now on.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Unmaps the executable's code and constants, when [`enable`]d: the bytes that were
/// resident, 0 when nothing was released (not enabled, not Linux, no such mapping).
pub fn release_code() -> usize {
    if !ENABLED.load(Ordering::Relaxed) {
        return 0;
    }
    let (Ok(exe), Ok(smaps)) = (
        std::env::current_exe(),
        std::fs::read_to_string("/proc/self/smaps"),
    ) else {
        return 0;
    };
    let Some(exe) = exe.to_str() else {
        return 0;
    };
    code_mappings(&smaps, exe)
        .into_iter()
        .map(|m| if unmap(&m) { m.rss } else { 0 })
        .sum()
}

/// A mapping [`release_code`] may release.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    /// Resident bytes before the release.
    rss: usize,
}

/// The mappings of `smaps` (the text of `/proc/self/smaps`) that are private and not
/// writable, backed by the file `exe`, and hold no anonymous page.
fn code_mappings(smaps: &str, exe: &str) -> Vec<Mapping> {
    // Each private, not writable mapping of `exe`: its range, then its Rss and Anonymous as
    // its field lines give them.
    let mut read: Vec<(usize, usize, Option<usize>, Option<usize>)> = Vec::new();
    let mut of_exe = false;
    for line in smaps.lines() {
        if let Some(h) = header(line) {
            of_exe = read_only(h.perms) && h.path == exe;
            if of_exe {
                read.push((h.start, h.end, None, None));
            }
        } else if let (true, Some(last)) = (of_exe, read.last_mut()) {
            if let Some(v) = line.strip_prefix("Rss:") {
                last.2 = kib(v);
            } else if let Some(v) = line.strip_prefix("Anonymous:") {
                last.3 = kib(v);
            }
        }
    }
    read.into_iter()
        .filter_map(|(start, end, rss, anonymous)| match (rss, anonymous) {
            (Some(rss), Some(0)) => Some(Mapping { start, end, rss }),
            _ => None,
        })
        .collect()
}

/// A mapping's first line in smaps: `start-end perms offset dev inode path`.
struct Header<'a> {
    start: usize,
    end: usize,
    perms: &'a str,
    path: &'a str,
}

/// The header of a mapping, `None` for the lines of its fields (`Rss:   12 kB`).
fn header(line: &str) -> Option<Header<'_>> {
    let mut fields = line.splitn(6, ' ');
    let (range, perms) = (fields.next()?, fields.next()?);
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    // offset, device, inode: present on every mapping line, absent on the field lines.
    for _ in 0..3 {
        fields.next()?;
    }
    let path = fields.next().unwrap_or_default().trim_start();
    (start < end && perms.len() == 4).then_some(Header {
        start,
        end,
        perms,
        path,
    })
}

/// `r-xp` or `r--p`: readable, not writable, private.
fn read_only(perms: &str) -> bool {
    matches!(perms, "r-xp" | "r--p")
}

/// A `  123 kB` value of smaps, in bytes.
fn kib(v: &str) -> Option<usize> {
    let n: usize = v.trim().strip_suffix("kB")?.trim().parse().ok()?;
    n.checked_mul(1024)
}

#[cfg(target_os = "linux")]
fn unmap(m: &Mapping) -> bool {
    // SAFETY: the range is one whole mapping of the running executable, page-aligned as the
    // kernel listed it, private and not writable, with no anonymous page: every page holds
    // the file's bytes and nothing can write them, so a page read after MADV_DONTNEED is the
    // same bytes, read from the same file. References into it (constants) read those bytes.
    let r = unsafe {
        libc::madvise(
            m.start as *mut libc::c_void,
            m.end - m.start,
            libc::MADV_DONTNEED,
        )
    };
    r == 0
}

#[cfg(not(target_os = "linux"))]
fn unmap(_: &Mapping) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d1e0000000-55d1e0580000 r--p 00000000 fe:00 5357572                    /opt/bin/portico
Size:               5632 kB
Rss:                2464 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
55d1e0580000-55d1e1c6a000 r-xp 00580000 fe:00 5357572                    /opt/bin/portico
Size:              23464 kB
Rss:               15892 kB
Private_Clean:     15892 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
55d1e1c6a000-55d1e1ce9000 r--p 01c69000 fe:00 5357572                    /opt/bin/portico
Rss:                 508 kB
Anonymous:           508 kB
55d1e1ce9000-55d1e1cf1000 rw-p 01ce8000 fe:00 5357572                    /opt/bin/portico
Rss:                  32 kB
Anonymous:             0 kB
7f0d4d5cb000-7f0d4d721000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 980 kB
Anonymous:             0 kB
7f0d4d800000-7f0d4d900000 r-xp 00000000 fe:00 5357572                    /opt/bin/portico
Rss:                  12 kB
Anonymous:             4 kB
477d4c00000-477d5da0000 rw-p 00000000 00:00 0 
Rss:                9676 kB
Anonymous:          9676 kB
";

    #[test]
    fn only_clean_read_only_pages_of_the_executable_are_released() {
        assert_eq!(
            code_mappings(SMAPS, "/opt/bin/portico"),
            vec![
                Mapping {
                    start: 0x55d1_e000_0000,
                    end: 0x55d1_e058_0000,
                    rss: 2464 * 1024,
                },
                Mapping {
                    start: 0x55d1_e058_0000,
                    end: 0x55d1_e1c6_a000,
                    rss: 15892 * 1024,
                }
            ],
            "relocated constants, writable data, another file's code, code with a private \
             copy and anonymous memory stay"
        );
        assert!(code_mappings(SMAPS, "/opt/bin/other").is_empty());
    }

    #[test]
    fn a_mapping_without_its_anonymous_count_is_kept() {
        let text = "55d1e0580000-55d1e1c6a000 r-xp 00580000 fe:00 5357572 /opt/bin/portico\n\
                    Rss:   100 kB\n";
        assert!(code_mappings(text, "/opt/bin/portico").is_empty());
    }

    #[test]
    fn a_path_with_spaces_is_read_whole() {
        let text =
            "1000-3000 r-xp 00000000 fe:00 1 /opt/my bin/portico\nRss: 8 kB\nAnonymous: 0 kB\n";
        assert_eq!(
            code_mappings(text, "/opt/my bin/portico"),
            vec![Mapping {
                start: 0x1000,
                end: 0x3000,
                rss: 8192,
            }]
        );
        assert!(code_mappings(text, "/opt/my").is_empty());
    }

    #[test]
    fn nothing_is_released_unless_enabled() {
        // The test binary never enables it: its code stays mapped.
        assert_eq!(release_code(), 0);
    }
}
