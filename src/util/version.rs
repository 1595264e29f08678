//! Recognises protocol version strings (`YYYY-MM-DD` dates).
//! A leaf: it must never import from the rest of the crate.

/// True for a `YYYY-MM-DD` version string.
pub fn is_date_version(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}
