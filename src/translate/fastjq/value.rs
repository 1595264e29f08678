//! jq's value semantics for the native evaluator: truthiness, numbers, arithmetic, ordering,
//! equality, text and slices, exactly as jaq computes them or `Stop::Fallback`. No evaluation here.

use super::ast::*;
use crate::json_doc::{self, Doc, member};
use jaq_core::ops::{Cmp, Math};
use serde_json::Number;
use std::borrow::Cow;
use std::cmp::Ordering;

pub(super) static NULL: Doc<'static> = Doc::Null;

pub(super) fn truthy(v: &Doc<'_>) -> bool {
    !matches!(v, Doc::Null | Doc::Bool(false))
}

#[derive(Clone, Copy)]
pub(super) enum N {
    I(i64),
    F(f64),
}

pub(super) fn num(v: &Doc<'_>) -> Result<N, Stop> {
    match v {
        Doc::Num(n) => match n.as_i64() {
            Some(i) => Ok(N::I(i)),
            None if n.is_f64() => n.as_f64().map(N::F).ok_or(Stop::Fallback),
            None => Err(Stop::Fallback),
        },
        _ => Err(Stop::Fallback),
    }
}

pub(super) fn from_n<'a>(n: N) -> Result<Doc<'a>, Stop> {
    match n {
        N::I(i) => Ok(Doc::from(i)),
        N::F(f) => Number::from_f64(f).map(Doc::Num).ok_or(Stop::Fallback),
    }
}

pub(super) fn as_f(n: N) -> f64 {
    match n {
        N::I(i) => i as f64,
        N::F(f) => f,
    }
}

/// jq's `+`, `-` and `*` for the operand types modelled exactly. The operands are borrowed
/// where they are read only: a string sum is built once, at its final size, from borrowed text.
pub(super) fn arith<'a>(
    op: Math,
    l: Cow<'_, Doc<'a>>,
    r: Cow<'_, Doc<'a>>,
) -> Result<Doc<'a>, Stop> {
    match (op, &*l, &*r) {
        // A number neither i64 nor f64 (an integer past i64::MAX) is left to jaq, which turns
        // it into a float when it adds it (found by the `transform` fuzz target).
        (Math::Add, Doc::Null, n @ Doc::Num(_)) | (Math::Add, n @ Doc::Num(_), Doc::Null) => {
            num(n)?;
            Ok(n.clone())
        }
        (Math::Add, Doc::Null, _) => Ok(r.into_owned()),
        (Math::Add, _, Doc::Null) => Ok(l.into_owned()),
        (Math::Add, Doc::Str(_), Doc::Str(b)) => {
            let with_room = |a: &str| {
                let mut s = String::with_capacity(a.len() + b.len());
                s.push_str(a);
                s
            };
            let mut a = match l {
                Cow::Owned(Doc::Str(Cow::Owned(a))) => a,
                Cow::Owned(Doc::Str(a)) => with_room(&a),
                Cow::Borrowed(Doc::Str(a)) => with_room(a),
                _ => return Err(Stop::Fallback),
            };
            a.push_str(b);
            Ok(Doc::Str(Cow::Owned(a)))
        }
        (Math::Add, Doc::Arr(_), Doc::Arr(_)) => match (l.into_owned(), r.into_owned()) {
            (Doc::Arr(mut a), Doc::Arr(b)) => {
                a.extend(b);
                Ok(Doc::Arr(a))
            }
            _ => Err(Stop::Fallback),
        },
        (Math::Add, Doc::Obj(_), Doc::Obj(_)) => match (l.into_owned(), r.into_owned()) {
            (Doc::Obj(mut a), Doc::Obj(b)) => {
                for (k, v) in b {
                    json_doc::insert(&mut a, k, v);
                }
                Ok(Doc::Obj(a))
            }
            _ => Err(Stop::Fallback),
        },
        (op @ (Math::Add | Math::Sub | Math::Mul), x @ Doc::Num(_), y @ Doc::Num(_)) => {
            let (x, y) = (num(x)?, num(y)?);
            let n = match (x, y) {
                (N::I(a), N::I(b)) => N::I(
                    match op {
                        Math::Add => a.checked_add(b),
                        Math::Sub => a.checked_sub(b),
                        _ => a.checked_mul(b),
                    }
                    .ok_or(Stop::Fallback)?,
                ),
                _ => {
                    let (a, b) = (as_f(x), as_f(y));
                    N::F(match op {
                        Math::Add => a + b,
                        Math::Sub => a - b,
                        _ => a * b,
                    })
                }
            };
            from_n(n)
        }
        _ => Err(Stop::Fallback),
    }
}

pub(super) fn rank(v: &Doc<'_>) -> u8 {
    match v {
        Doc::Null => 0,
        Doc::Bool(_) => 1,
        Doc::Num(_) => 2,
        Doc::Str(_) => 3,
        Doc::Arr(_) => 4,
        Doc::Obj(_) => 5,
    }
}

pub(super) fn num_cmp(a: &Doc<'_>, b: &Doc<'_>) -> Result<Ordering, Stop> {
    match (num(a)?, num(b)?) {
        (N::I(x), N::I(y)) => Ok(x.cmp(&y)),
        (x, y) => as_f(x).partial_cmp(&as_f(y)).ok_or(Stop::Fallback),
    }
}

/// jq's total order, for the cases modelled exactly (objects are left to jaq).
pub(super) fn order(a: &Doc<'_>, b: &Doc<'_>) -> Result<Ordering, Stop> {
    match (a, b) {
        (Doc::Null, Doc::Null) => Ok(Ordering::Equal),
        (Doc::Bool(x), Doc::Bool(y)) => Ok(x.cmp(y)),
        (Doc::Num(_), Doc::Num(_)) => num_cmp(a, b),
        (Doc::Str(x), Doc::Str(y)) => Ok(x.as_bytes().cmp(y.as_bytes())),
        (Doc::Arr(x), Doc::Arr(y)) => {
            for (p, q) in x.iter().zip(y) {
                match order(p, q)? {
                    Ordering::Equal => {}
                    o => return Ok(o),
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        (Doc::Obj(_), Doc::Obj(_)) => Err(Stop::Fallback),
        _ => Ok(rank(a).cmp(&rank(b))),
    }
}

pub(super) fn equal(a: &Doc<'_>, b: &Doc<'_>) -> Result<bool, Stop> {
    Ok(match (a, b) {
        (Doc::Num(_), Doc::Num(_)) => num_cmp(a, b)? == Ordering::Equal,
        (Doc::Arr(x), Doc::Arr(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y) {
                if !equal(p, q)? {
                    return Ok(false);
                }
            }
            true
        }
        (Doc::Obj(x), Doc::Obj(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (k, p) in x {
                match member(y, k) {
                    Some(q) if equal(p, q)? => {}
                    _ => return Ok(false),
                }
            }
            true
        }
        _ => a == b,
    })
}

pub(super) fn compare(op: Cmp, a: &Doc<'_>, b: &Doc<'_>) -> Result<bool, Stop> {
    Ok(match op {
        Cmp::Eq => equal(a, b)?,
        Cmp::Ne => !equal(a, b)?,
        Cmp::Lt => order(a, b)? == Ordering::Less,
        Cmp::Le => order(a, b)? != Ordering::Greater,
        Cmp::Gt => order(a, b)? == Ordering::Greater,
        Cmp::Ge => order(a, b)? != Ordering::Less,
    })
}

/// Objects are kept in key order, where jq (and jaq) keep insertion order: a constructed
/// `{b: 1, a: 2}` lists `b` first in jaq and `a` first here. Every object portico reads
/// arrives in key order, so jaq, which receives the same values, sees the same order; only an
/// object built by the program can differ. Iterating an object of two or more members in an
/// order-sensitive way (`.[]`, `to_entries`, `add`) is therefore left to jaq, whatever the
/// object's origin (`with_entries` is not order-sensitive: see [`Builtin::WithEntries`]).
pub(super) fn order_free(m: &[(Cow<'_, str>, Doc<'_>)]) -> Res {
    if m.len() > 1 {
        Err(Stop::Fallback)
    } else {
        Ok(())
    }
}

/// Appends what `tostring` (and string interpolation) gives for `v`, for the values whose
/// text is unambiguous.
pub(super) fn push_text(s: &mut String, v: &Doc<'_>) -> Res {
    match v {
        Doc::Str(t) => s.push_str(t),
        Doc::Null => s.push_str("null"),
        Doc::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        Doc::Num(n) => {
            let i = n.as_i64().ok_or(Stop::Fallback)?;
            s.push_str(itoa::Buffer::new().format(i));
        }
        _ => return Err(Stop::Fallback),
    }
    Ok(())
}

/// `.k` of `cur`, read in place. Same answers as [`Eval::step`] without `?`: `null` has every
/// member (null), any other non-object is an error, for jaq.
pub(super) fn field<'v, 'a>(cur: &'v Doc<'a>, k: &str) -> Result<&'v Doc<'a>, Stop> {
    match cur {
        Doc::Obj(m) => Ok(member(m, k).unwrap_or(&NULL)),
        Doc::Null => Ok(&NULL),
        _ => Err(Stop::Fallback),
    }
}

/// The `{key, value}` object `to_entries` makes of one member.
pub(super) fn entry_of<'a>(k: &Cow<'a, str>, v: &Doc<'a>) -> Doc<'a> {
    // In key order: "key" < "value".
    Doc::Obj(vec![
        (Cow::Borrowed("key"), Doc::Str(k.clone())),
        (Cow::Borrowed("value"), v.clone()),
    ])
}

/// The one output `run` gives to its output callback; more or none, and jaq decides.
pub(super) fn exactly_one<'a>(run: impl FnOnce(Out<'_, 'a>) -> Res) -> Result<Doc<'a>, Stop> {
    let mut got: Option<Doc<'a>> = None;
    run(&mut |v| {
        if got.is_some() {
            return Err(Stop::Fallback);
        }
        got = Some(v);
        Ok(())
    })?;
    got.ok_or(Stop::Fallback)
}

/// `.[from:to] | tonumber` of ASCII `text` with literal bounds: [`span`]'s range (bounds past
/// the end are the end, an end before the start is empty), read by [`integer_text`].
pub(super) fn sliced_at<'a>(from: usize, to: Option<usize>, text: &str) -> Result<Doc<'a>, Stop> {
    sliced_int(from, to, text).map(Doc::from)
}

/// [`sliced_at`]'s number as a machine integer.
pub(super) fn sliced_int(from: usize, to: Option<usize>, text: &str) -> Result<i64, Stop> {
    let len = text.len();
    let s = from.min(len);
    let e = to.map_or(len, |t| t.min(len)).max(s);
    integer_of(text.get(s..e).unwrap_or_default())
}

/// An index that jq reads as a position: a non-negative or negative machine integer.
pub(super) fn position(i: &Doc<'_>, len: usize) -> Result<Option<usize>, Stop> {
    let i = i.as_i64().ok_or(Stop::Fallback)?;
    let len = i64::try_from(len).map_err(|_| Stop::Fallback)?;
    let at = if i < 0 { len + i } else { i };
    Ok((0..len).contains(&at).then_some(at as usize))
}

/// The range `.[from:to]` takes of `len` items: missing bounds are the ends, and an end before
/// the start is the start (an empty slice).
pub(super) fn span(
    from: Option<&Doc<'_>>,
    to: Option<&Doc<'_>>,
    len: usize,
) -> Result<(usize, usize), Stop> {
    let s = bound(from, len)?.unwrap_or(0);
    let e = bound(to, len)?.unwrap_or(len);
    Ok((s, e.max(s)))
}

pub(super) fn bound(v: Option<&Doc<'_>>, len: usize) -> Result<Option<usize>, Stop> {
    match v {
        None | Some(Doc::Null) => Ok(None),
        Some(v) => {
            let i = v.as_i64().ok_or(Stop::Fallback)?;
            // Negative bounds count from the end; left to jaq.
            let i = usize::try_from(i).map_err(|_| Stop::Fallback)?;
            Ok(Some(i.min(len)))
        }
    }
}

/// `tonumber` of text: `-?[0-9]+` of at most 18 digits (leading zeros included when positive,
/// as jaq reads them; not a negative zero, nor a negative with a leading zero, which jaq reads
/// as 0), the strings whose `tonumber` is a machine integer unambiguously, is read here in one
/// pass (18 digits cannot overflow); anything else by jaq.
pub(super) fn integer_text<'a>(s: &str) -> Result<Doc<'a>, Stop> {
    integer_of(s).map(Doc::from)
}

/// [`integer_text`]'s number as a machine integer.
pub(super) fn integer_of(s: &str) -> Result<i64, Stop> {
    let (neg, digits) = match s.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if digits.is_empty() || digits.len() > 18 || (neg && digits.first() == Some(&b'0')) {
        return Err(Stop::Fallback);
    }
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(Stop::Fallback);
        }
        n = n * 10 + i64::from(c - b'0');
    }
    Ok(if neg { -n } else { n })
}
