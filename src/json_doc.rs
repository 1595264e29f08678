//! A JSON value that borrows its text: strings and keys are slices of the document they were
//! read from, objects are key-sorted member lists. It never holds a value serde_json would not.
//!
//! The backend's answer is read into a [`Doc`] ([`crate::json_text::read_borrowed`]) and the
//! native jq evaluator works on [`Doc`]s, so a call allocates only for what it builds: no
//! `String` per key or string of the body, no map node per object, and dropping the body frees
//! one vector per array or object. A [`Doc`] becomes a `serde_json::Value` where one is needed
//! (the answer's tree, jaq), with exactly the value serde_json would have read.
//!
//! Objects hold their members sorted by key (byte order) with unique keys: the order and the
//! "last repeated key wins" answer of `serde_json::Map` (key-ordered, no `preserve_order`).

use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::cmp::Ordering;

/// One JSON value; `'a` is the lifetime of the text (or values) its strings borrow from.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Doc<'a> {
    #[default]
    Null,
    Bool(bool),
    Num(Number),
    Str(Cow<'a, str>),
    Arr(Vec<Doc<'a>>),
    /// Members sorted by key, keys unique (see [`Members`]).
    Obj(Members<'a>),
}

/// An object's members: sorted by key in byte order, each key once.
pub type Members<'a> = Vec<(Cow<'a, str>, Doc<'a>)>;

/// The shared `null` a missing member reads as.
pub static NULL: Doc<'static> = Doc::Null;

/// Objects up to this size are searched member by member (comparing lengths first); larger
/// ones by binary search.
const SCAN_MAX: usize = 8;

/// `m[k]`, the member named `k`.
pub fn member<'m, 'a>(m: &'m [(Cow<'a, str>, Doc<'a>)], k: &str) -> Option<&'m Doc<'a>> {
    if m.len() <= SCAN_MAX {
        m.iter().find(|(key, _)| same_key(key, k)).map(|(_, v)| v)
    } else {
        m.binary_search_by(|(key, _)| short_cmp(key, k))
            .ok()
            .and_then(|i| m.get(i))
            .map(|(_, v)| v)
    }
}

/// The first eight bytes of `s`, big-endian, zero-padded: the key order's first word. Zero is
/// the least byte, so where two prefixes differ their order is the order of the strings
/// (where one string ends inside the eight bytes, it is a prefix of the other up to there).
/// A key shorter than eight bytes is read in two overlapping loads (or three bytes), not
/// byte by byte: most keys of JSON objects are that short.
#[inline]
pub fn key_prefix(s: &str) -> u64 {
    let b = s.as_bytes();
    let n = b.len();
    let be32 = |at: usize| word::<4>(b, at).map_or(0, |w| u64::from(u32::from_be_bytes(w)));
    let byte = |at: usize| b.get(at).map_or(0, |&x| u64::from(x));
    match n {
        0 => 0,
        1..=3 => byte(0) << 56 | byte(n / 2) << (56 - 8 * (n / 2)) | byte(n - 1) << (64 - 8 * n),
        4..=7 => be32(0) << 32 | be32(n - 4) << (64 - 8 * n),
        _ => word::<8>(b, 0).map_or(0, u64::from_be_bytes),
    }
}

/// The `N` bytes of `s` from `at`, if it has them.
#[inline(always)]
fn word<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
    s.get(at..at + N).and_then(|w| <[u8; N]>::try_from(w).ok())
}

/// The byte order of keys `a` and `b`, given their [`key_prefix`]es: the prefixes decide
/// unless they are equal; then two keys of at most eight bytes differ only by trailing zero
/// bytes (the shorter is less) and longer ones are compared whole.
#[inline]
pub fn key_cmp(ap: u64, a: &str, bp: u64, b: &str) -> Ordering {
    match ap.cmp(&bp) {
        Ordering::Equal if a.len() <= 8 && b.len() <= 8 => a.len().cmp(&b.len()),
        Ordering::Equal => a.cmp(b),
        other => other,
    }
}

/// `a == b` for the short keys of JSON objects, compared in place: the slice comparison calls
/// `memcmp`, whose call costs more than the comparison of a key of a few bytes.
#[inline(always)]
pub fn same_key(a: &str, b: &str) -> bool {
    same_bytes(a.as_bytes(), b.as_bytes())
}

/// [`same_key`] for bytes: `a == b`, in place when they are short.
#[inline(always)]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (a.len() > 16 && a == b || same_short(a, b))
}

/// `a == b` for two slices of the same length of at most sixteen bytes, in two overlapping
/// loads of each (eight bytes, or four under eight) rather than byte by byte.
#[inline(always)]
fn same_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n > 16 || b.len() != n {
        return false;
    }
    match n {
        8.. => word::<8>(a, 0) == word::<8>(b, 0) && word::<8>(a, n - 8) == word::<8>(b, n - 8),
        4.. => word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, n - 4) == word::<4>(b, n - 4),
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}

/// `a.cmp(b)` for keys, compared in place when both are short (keys mostly differ in their
/// first bytes; the slice comparison calls `memcmp`, whose call costs more than that). The
/// key found (equal, byte for byte to its end) is told in two loads.
#[inline(always)]
fn short_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() > 16 || b.len() > 16 {
        return a.cmp(b);
    }
    if same_short(a, b) {
        return Ordering::Equal;
    }
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// Sets member `k` of `m` to `v` (replacing an equal key's value), keeping the order; returns
/// the value it replaced.
pub fn insert<'a>(m: &mut Members<'a>, k: Cow<'a, str>, v: Doc<'a>) -> Option<Doc<'a>> {
    // Members are most often added in key order: check the end first.
    let at = match m.last() {
        None => Err(0),
        Some((last, _)) => match last.as_ref().cmp(k.as_ref()) {
            Ordering::Less => Err(m.len()),
            Ordering::Equal => Ok(m.len() - 1),
            Ordering::Greater => m.binary_search_by(|(key, _)| key.as_ref().cmp(k.as_ref())),
        },
    };
    match at {
        Ok(i) => m.get_mut(i).map(|slot| std::mem::replace(&mut slot.1, v)),
        Err(i) => {
            m.insert(i, (k, v));
            None
        }
    }
}

/// Removes member `k` of `m`, returning its value.
pub fn remove<'a>(m: &mut Members<'a>, k: &str) -> Option<Doc<'a>> {
    let i = m.binary_search_by(|(key, _)| key.as_ref().cmp(k)).ok()?;
    Some(m.remove(i).1)
}

/// Drops every `null` member of every object inside `v` (array items stay, `null` ones too:
/// their place in the array means something).
pub fn drop_null_members(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_null_members);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_members),
        _ => {}
    }
}

/// [`drop_null_members`] on a [`Doc`].
pub fn drop_null_members_doc(v: &mut Doc<'_>) {
    match v {
        Doc::Obj(m) => {
            m.retain(|(_, v)| !matches!(v, Doc::Null));
            m.iter_mut().for_each(|(_, v)| drop_null_members_doc(v));
        }
        Doc::Arr(items) => items.iter_mut().for_each(drop_null_members_doc),
        _ => {}
    }
}

/// `str`'s order (bytewise, as a `BTreeMap<String, _>` orders keys), deciding on the first byte
/// without a call to `memcmp` when it differs, as it does for most keys of one object.
#[inline]
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

/// Sorts members read in document order and drops all but the last of each repeated key
/// (serde_json keeps the last value of a repeated key).
pub fn sort_members(m: &mut Members<'_>) {
    if m.windows(2).all(|w| key_order(&w[0].0, &w[1].0).is_lt()) {
        return;
    }
    // Stable: members with one key stay in document order, so the last of them is the last.
    m.sort_by(|a, b| key_order(&a.0, &b.0));
    // Most objects out of key order repeat no key: then they are done, without a second list.
    if m.windows(2).all(|w| w[0].0 != w[1].0) {
        return;
    }
    let mut out: Members<'_> = Vec::with_capacity(m.len());
    for (k, v) in m.drain(..) {
        match out.last_mut() {
            Some(last) if last.0 == k => last.1 = v,
            _ => out.push((k, v)),
        }
    }
    *m = out;
}

impl<'a> Doc<'a> {
    /// The value, its strings borrowed from `v`.
    pub fn from_value(v: &'a Value) -> Doc<'a> {
        match v {
            Value::Null => Doc::Null,
            Value::Bool(b) => Doc::Bool(*b),
            Value::Number(n) => Doc::Num(n.clone()),
            Value::String(s) => Doc::Str(Cow::Borrowed(s)),
            Value::Array(a) => Doc::Arr(a.iter().map(Doc::from_value).collect()),
            // A key-ordered map iterates in key order, keys unique: already sorted.
            Value::Object(m) => Doc::Obj(
                m.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Doc::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// A copy of this value whose strings and keys borrow from it: no text is copied (a
    /// literal of a program, say, handed out once per output without an allocation per string).
    pub fn lend(&'a self) -> Doc<'a> {
        match self {
            Doc::Null => Doc::Null,
            Doc::Bool(b) => Doc::Bool(*b),
            Doc::Num(n) => Doc::Num(n.clone()),
            Doc::Str(s) => Doc::Str(Cow::Borrowed(s)),
            Doc::Arr(a) => Doc::Arr(a.iter().map(Doc::lend).collect()),
            Doc::Obj(m) => Doc::Obj(
                m.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_ref()), v.lend()))
                    .collect(),
            ),
        }
    }

    /// The value, owning all of it (`v`'s strings are moved, not copied).
    pub fn from_owned(v: Value) -> Doc<'static> {
        match v {
            Value::Null => Doc::Null,
            Value::Bool(b) => Doc::Bool(b),
            Value::Number(n) => Doc::Num(n),
            Value::String(s) => Doc::Str(Cow::Owned(s)),
            Value::Array(a) => Doc::Arr(a.into_iter().map(Doc::from_owned).collect()),
            Value::Object(m) => Doc::Obj(
                m.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), Doc::from_owned(v)))
                    .collect(),
            ),
        }
    }

    /// The `serde_json` value, consuming this one: owned strings move, borrowed ones are copied.
    pub fn into_value(self) -> Value {
        match self {
            Doc::Null => Value::Null,
            Doc::Bool(b) => Value::Bool(b),
            Doc::Num(n) => Value::Number(n),
            Doc::Str(s) => Value::String(s.into_owned()),
            Doc::Arr(a) => Value::Array(a.into_iter().map(Doc::into_value).collect()),
            Doc::Obj(m) => Value::Object(into_map(m)),
        }
    }

    /// The `serde_json` value, copied.
    pub fn to_value(&self) -> Value {
        match self {
            Doc::Null => Value::Null,
            Doc::Bool(b) => Value::Bool(*b),
            Doc::Num(n) => Value::Number(n.clone()),
            Doc::Str(s) => Value::String(s.to_string()),
            Doc::Arr(a) => Value::Array(a.iter().map(Doc::to_value).collect()),
            Doc::Obj(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Doc::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Doc::Num(n) => n.as_i64(),
            _ => None,
        }
    }

    /// Member `k` of an object; `None` for a missing member or a value that is no object.
    pub fn get(&self, k: &str) -> Option<&Doc<'a>> {
        match self {
            Doc::Obj(m) => member(m, k),
            _ => None,
        }
    }
}

impl From<i64> for Doc<'_> {
    fn from(i: i64) -> Self {
        Doc::Num(Number::from(i))
    }
}

impl From<usize> for Doc<'_> {
    fn from(u: usize) -> Self {
        Doc::Num(Number::from(u))
    }
}

/// Key-sorted members as a `serde_json` map (`BTreeMap::from_iter`, whose sort of an
/// already sorted list is one linear check).
fn into_map(m: Members<'_>) -> Map<String, Value> {
    m.into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_value()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_go_through_and_back_unchanged() {
        let v = json!({"b": [1, -2, 3.5, "x", null, true], "a": {"z": {}, "y": []}, "": "e"});
        assert_eq!(Doc::from_value(&v).into_value(), v);
        assert_eq!(Doc::from_value(&v).to_value(), v);
        assert_eq!(Doc::from_owned(v.clone()).into_value(), v);
    }

    #[test]
    fn the_key_order_is_strs_order() {
        let keys = [
            "",
            "a",
            "A",
            "ab",
            "abc",
            "b",
            "aa",
            "\u{0}",
            "\u{7f}",
            "é",
            "e",
            "z",
            "e\u{301}",
            "\u{10ffff}",
            "id",
            "title",
            "text",
            "tags",
            "revision",
            "approved",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(key_order(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn objects_keep_key_order_and_the_last_repeated_key() {
        let mut m: Members<'_> = vec![
            ("b".into(), Doc::from(1i64)),
            ("a".into(), Doc::from(2i64)),
            ("b".into(), Doc::from(3i64)),
        ];
        sort_members(&mut m);
        assert_eq!(
            Doc::Obj(m.clone()).into_value(),
            serde_json::from_str::<Value>(r#"{"b":1,"a":2,"b":3}"#).unwrap()
        );
        assert_eq!(insert(&mut m, "c".into(), Doc::Null), None);
        assert_eq!(insert(&mut m, "0".into(), Doc::Null), None);
        assert_eq!(insert(&mut m, "b".into(), Doc::Null), Some(Doc::from(3i64)));
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["0", "a", "b", "c"]);
        assert_eq!(remove(&mut m, "a"), Some(Doc::from(2i64)));
        assert_eq!(remove(&mut m, "a"), None);
    }

    #[test]
    fn members_are_found_in_small_and_large_objects() {
        for n in [0usize, 3, 8, 9, 40] {
            let v = Value::Object((0..n).map(|i| (format!("k{i:02}"), json!(i))).collect());
            let d = Doc::from_value(&v);
            for i in 0..n {
                assert_eq!(d.get(&format!("k{i:02}")), Some(&Doc::from(i)));
            }
            assert_eq!(d.get("k"), None);
            assert_eq!(d.get("zz"), None);
        }
    }

    #[test]
    fn keys_of_every_length_match_only_themselves() {
        // Around the in-place comparison's 16-byte limit, and keys that differ in one byte only.
        for len in 0..=40usize {
            let key: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let members: Members = vec![(Cow::Owned(key.clone()), Doc::Bool(true))];
            assert_eq!(member(&members, &key), Some(&Doc::Bool(true)), "{key}");
            for at in 0..len {
                let mut other = key.clone().into_bytes();
                other[at] = b'Z';
                let other = String::from_utf8(other).unwrap();
                assert_eq!(member(&members, &other), None, "{other}");
            }
            assert_eq!(member(&members, &format!("{key}a")), None);
        }
    }

    #[test]
    fn a_lent_value_equals_its_source_and_borrows_its_text() {
        let v = json!({"s": "text", "n": 1.5, "a": [null, true, "x", {"k": "v"}], "o": {}});
        let owned = Doc::from_owned(v.clone());
        let lent = owned.lend();
        assert_eq!(lent, owned);
        assert_eq!(lent.clone().into_value(), v);
        let Doc::Obj(m) = &lent else {
            panic!("an object lends an object")
        };
        assert!(m.iter().all(|(k, _)| matches!(k, Cow::Borrowed(_))));
        assert!(matches!(
            lent.get("s"),
            Some(Doc::Str(Cow::Borrowed("text")))
        ));
    }

    /// Keys of every length around the eight-byte prefix, over an alphabet with the zero
    /// byte, a high byte and a multi-byte character: the prefix is the first eight bytes
    /// zero-padded (as a byte loop builds it), [`key_cmp`] orders as `str` does, and
    /// [`member`] finds each key among more members than it scans (binary search) and among
    /// few (the scan), and nothing else.
    #[test]
    fn key_prefixes_and_order_agree_with_str() {
        let alphabet = ["\0", "a", "~", "é"];
        let mut tails = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = tails
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            tails.extend(longer);
        }
        tails.sort();
        tails.dedup();
        let keys: Vec<String> = ["", "abcd", "abcdef", "abcdefg\0", "abcdefghijklmno~"]
            .iter()
            .flat_map(|head| tails.iter().map(move |t| format!("{head}{t}")))
            .collect();
        let naive = |s: &str| {
            let mut w = [0u8; 8];
            for (d, x) in w.iter_mut().zip(s.bytes()) {
                *d = x;
            }
            u64::from_be_bytes(w)
        };
        for k in &keys {
            assert_eq!(key_prefix(k), naive(k), "{k:?}");
        }
        for a in &keys {
            for b in keys.iter().step_by(3) {
                let got = key_cmp(key_prefix(a), a, key_prefix(b), b);
                assert_eq!(got, a.as_str().cmp(b.as_str()), "{a:?} {b:?}");
                assert_eq!(short_cmp(a, b), a.as_str().cmp(b.as_str()), "{a:?} {b:?}");
                assert_eq!(same_key(a, b), a == b, "{a:?} {b:?}");
            }
        }
        for size in [3usize, 8, 9, 40] {
            let mut chosen: Vec<&String> = keys.iter().step_by(13).take(size).collect();
            chosen.sort();
            chosen.dedup();
            let members: Members = chosen
                .iter()
                .enumerate()
                .map(|(i, k)| (Cow::Borrowed(k.as_str()), Doc::Num(i.into())))
                .collect();
            for (i, k) in chosen.iter().enumerate() {
                assert_eq!(member(&members, k), Some(&Doc::Num(i.into())), "{k:?}");
            }
            for k in keys.iter().skip(3).step_by(11) {
                if !chosen.contains(&k) {
                    assert_eq!(member(&members, k), None, "{k:?}");
                }
            }
        }
    }
}
