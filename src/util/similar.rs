//! "Did you mean": edit distance between names and the nearest of a set of candidates.
//! A leaf: it must never import anything else from this crate.

/// Levenshtein distance in characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate nearest `name`, when it is near enough to be a typo of it.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (distance(c, name), c))
        .filter(|(d, c)| *d > 0 && *d <= 2.max(c.chars().count() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name() {
        assert_eq!(distance("apointment", "appointment"), 1);
        assert_eq!(
            nearest("apointment", ["appointment", "client", "status"]),
            Some("appointment")
        );
        assert_eq!(nearest("zzz", ["appointment"]), None);
    }
}
