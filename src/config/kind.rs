//! Tells the two kinds of mapping file apart: business mappings (forward path) and facade
//! mappings (reverse path, a top-level `facade:` key). A leaf: it must never parse further.

use std::path::Path;

/// Is this YAML text a facade mapping (a top-level `facade:` key)?
pub fn is_facade_text(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("facade:"))
}

/// Is the file at `path` a facade mapping? (Unreadable files are left to the caller.)
pub fn is_facade_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| is_facade_text(&t))
}
