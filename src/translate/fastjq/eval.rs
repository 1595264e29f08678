//! Runs a compiled program on borrowed documents: paths, constructions, conditionals, builtins.
//! It never copies input text it can borrow, and stops with `Stop::Fallback` rather than guess.

use super::ast::*;
use super::value::*;
use crate::json_doc::{self, Doc, Members, member};
use jaq_core::ops::Math;
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

/// Run-time state: the globals (slots `0..GLOBALS.len()`), their strings borrowed from the
/// caller's values (a global the program never names is `null`), and the
/// `as $x` bindings (the slots after them).
pub(super) struct Eval<'g> {
    pub(super) globals: [Doc<'g>; 3],
    pub(super) locals: RefCell<Vec<Rc<Doc<'g>>>>,
}

impl<'a> Eval<'a> {
    /// Calls `f` with the value of variable `slot`.
    pub(super) fn with_var(&self, slot: usize, f: impl FnOnce(&Doc<'a>) -> Res) -> Res {
        match self.globals.get(slot) {
            Some(g) => f(g),
            None => {
                let v = self
                    .locals
                    .borrow()
                    .get(slot - GLOBALS.len())
                    .cloned()
                    .ok_or(Stop::Fallback)?;
                f(&v)
            }
        }
    }

    /// Exactly one output, else jaq decides (Cartesian products, empty operands).
    pub(super) fn one(&self, e: &'a Expr, input: &Doc<'a>) -> Result<Doc<'a>, Stop> {
        // A literal lives as long as the program: its text is lent, not copied.
        if let Expr::Lit(v) = e {
            return Ok(v.lend());
        }
        self.leaf(e, input).map(Cow::into_owned)
    }

    /// [`Eval::val`], with the commonest leaves taken inline: a literal, the input and `.name`
    /// of the input are most of a mapping's nodes, and each would otherwise cost a call.
    #[inline(always)]
    pub(super) fn leaf<'s>(
        &'s self,
        e: &'a Expr,
        input: &'s Doc<'a>,
    ) -> Result<Cow<'s, Doc<'a>>, Stop> {
        match e {
            Expr::Lit(v) => Ok(Cow::Borrowed(v)),
            Expr::Id => Ok(Cow::Borrowed(input)),
            Expr::Path(..) => match input_field(e) {
                Some(k) => field(input, k).map(Cow::Borrowed),
                None => self.val(e, input),
            },
            // `.name | f` (a field handed to a definition): the member is read here and `f`
            // runs on it, as the pipe would.
            Expr::Pipe(l, r) => match input_field(l) {
                Some(k) => self.val(r, field(input, k)?),
                None => self.val(e, input),
            },
            _ => self.val(e, input),
        }
    }

    /// An operand of arithmetic: [`Eval::leaf`], with a sliced number (the digits of a date
    /// in a sum of minutes, say) also read inline.
    #[inline(always)]
    pub(super) fn operand<'s>(
        &'s self,
        e: &'a Expr,
        input: &'s Doc<'a>,
    ) -> Result<Cow<'s, Doc<'a>>, Stop> {
        match self.sliced_number(e, input) {
            Some(n) => n.map(Cow::Owned),
            None => self.leaf(e, input),
        }
    }

    /// `.[from:to] | tonumber` ([`Expr::SliceNumAt`], [`Expr::SliceNum`]) of ASCII text: the
    /// number read from the slice in place. `None` for any other expression or input, which
    /// the general route takes.
    #[inline(always)]
    pub(super) fn sliced_number(
        &self,
        e: &'a Expr,
        input: &Doc<'a>,
    ) -> Option<Result<Doc<'a>, Stop>> {
        let Doc::Str(text) = input else {
            return None;
        };
        match e {
            Expr::SliceNumAt(from, to, _) if text.is_ascii() => Some(sliced_at(*from, *to, text)),
            Expr::SliceNum(from, to, _) if text.is_ascii() => Some((|| {
                let from = from.as_deref().map(|e| self.leaf(e, input)).transpose()?;
                let to = to.as_deref().map(|e| self.leaf(e, input)).transpose()?;
                let (s, e) = span(from.as_deref(), to.as_deref(), text.len())?;
                integer_text(text.get(s..e).unwrap_or_default())
            })()),
            _ => None,
        }
    }

    /// `+`, `-` and `*` of integers (minutes from the digits of two dates, say) computed on
    /// machine integers, without the numbers [`arith`] would make and read back. The operands
    /// taken: integer literals, sliced numbers of ASCII text, integer members of the input,
    /// `.name | f` of them, and such arithmetic. `None` as soon as an operand is anything else
    /// (text, null, a float...): the general route then answers, and gives the same answer
    /// where this one answers, an overflow included (a hand-over to jaq both ways).
    pub(super) fn int(&self, e: &'a Expr, input: &Doc<'a>) -> Option<Result<i64, Stop>> {
        match e {
            Expr::Lit(Doc::Num(n)) => n.as_i64().map(Ok),
            Expr::SliceNumAt(from, to, _) => match input {
                Doc::Str(text) if text.is_ascii() => Some(sliced_int(*from, *to, text)),
                _ => None,
            },
            Expr::Math(op @ (Math::Add | Math::Sub | Math::Mul), l, r) => {
                let l = match self.int(l, input)? {
                    Ok(i) => i,
                    Err(stop) => return Some(Err(stop)),
                };
                let r = match self.int(r, input)? {
                    Ok(i) => i,
                    Err(stop) => return Some(Err(stop)),
                };
                let n = match op {
                    Math::Add => l.checked_add(r),
                    Math::Sub => l.checked_sub(r),
                    _ => l.checked_mul(r),
                };
                Some(n.ok_or(Stop::Fallback))
            }
            Expr::Path(..) => match field(input, input_field(e)?) {
                Ok(Doc::Num(n)) => n.as_i64().map(Ok),
                Ok(_) => None,
                Err(stop) => Some(Err(stop)),
            },
            Expr::Pipe(l, r) => match field(input, input_field(l)?) {
                Ok(v) => self.int(r, v),
                Err(stop) => Some(Err(stop)),
            },
            _ => None,
        }
    }

    /// Exactly one output, like [`Eval::one`], computed directly (no output callbacks) for
    /// the expressions whose structure gives one output, and borrowed when it is the input, a
    /// literal, a global or a `.name` path into one of them. Every other expression, and every
    /// case this cannot settle, goes through [`Eval::one_each`]: the answers are the same.
    pub(super) fn val<'s>(
        &'s self,
        e: &'a Expr,
        input: &'s Doc<'a>,
    ) -> Result<Cow<'s, Doc<'a>>, Stop> {
        Ok(match e {
            Expr::Id => Cow::Borrowed(input),
            Expr::Lit(v) => Cow::Borrowed(v),
            // A global, read in place; locals are taken by the general route.
            Expr::Var(slot) => match self.globals.get(*slot) {
                Some(g) => Cow::Borrowed(g),
                None => Cow::Owned(self.one_each(e, input)?),
            },
            Expr::Path(root, steps) => {
                let base = match **root {
                    Expr::Id => Some(input),
                    Expr::Var(slot) => self.globals.get(slot),
                    _ => None,
                };
                match base {
                    Some(b) => self.path_val(b, steps, input)?,
                    None => Cow::Owned(self.one_each(e, input)?),
                }
            }
            Expr::Math(op, l, r) => Cow::Owned(match self.int(e, input) {
                Some(i) => Doc::from(i?),
                None => arith(*op, self.operand(l, input)?, self.operand(r, input)?)?,
            }),
            Expr::Str(segs) => {
                let mut s = String::new();
                for seg in segs {
                    match seg {
                        Seg::Text(t) => s.push_str(t),
                        Seg::Interp(e) => push_text(&mut s, &*self.leaf(e, input)?)?,
                    }
                }
                Cow::Owned(Doc::Str(Cow::Owned(s)))
            }
            Expr::Obj(entries, sorted) => Cow::Owned(self.object(entries, *sorted, input)?),
            Expr::Cmp(op, l, r) => Cow::Owned(Doc::Bool(compare(
                *op,
                &*self.leaf(l, input)?,
                &*self.leaf(r, input)?,
            )?)),
            Expr::And(l, r) => Cow::Owned(Doc::Bool(
                truthy(&*self.leaf(l, input)?) && truthy(&*self.leaf(r, input)?),
            )),
            Expr::Or(l, r) => Cow::Owned(Doc::Bool(
                truthy(&*self.leaf(l, input)?) || truthy(&*self.leaf(r, input)?),
            )),
            Expr::If(branches, other) => {
                for (cond, then) in branches {
                    if self.holds(cond, input)? {
                        return self.leaf(then, input);
                    }
                }
                self.leaf(other, input)?
            }
            Expr::Call(f, args) => Cow::Owned(self.builtin1(*f, args, input)?),
            Expr::Sum(parts) => Cow::Owned(self.sum(parts, input)?),
            // `.[a:b] | tonumber` on ASCII text (the digits of a date, say) reads the number
            // from the slice in place: the same answer without a string made for it.
            Expr::SliceNum(.., pipe) | Expr::SliceNumAt(.., pipe) => {
                match self.sliced_number(e, input) {
                    Some(n) => Cow::Owned(n?),
                    None => self.val(pipe, input)?,
                }
            }
            // One left output feeds the right side once; its outputs are the pipe's.
            Expr::Pipe(l, r) if single(l) => match self.leaf(l, input)? {
                Cow::Borrowed(x) => self.leaf(r, x)?,
                Cow::Owned(x) => Cow::Owned(self.leaf(r, &x)?.into_owned()),
            },
            _ => Cow::Owned(self.one_each(e, input)?),
        })
    }

    /// jq's `a + b + c ...`: added left to right as [`arith`] does, except that when every
    /// operand is text the sum is written once into a string of its final size (`tostring`
    /// of the input is written straight into it).
    pub(super) fn sum<'s>(
        &'s self,
        parts: &'a [Expr],
        input: &'s Doc<'a>,
    ) -> Result<Doc<'a>, Stop> {
        if parts.len() > SUM_MAX {
            return Err(Stop::Fallback);
        }
        // `None`: `tostring` of the input, written in place when every part is text.
        let mut got: [Option<Cow<'s, Doc<'a>>>; SUM_MAX] = Default::default();
        let mut text = true;
        let mut len = 0;
        for (slot, e) in got.iter_mut().zip(parts) {
            if matches!(e, Expr::Call(Builtin::ToString, a) if a.is_empty()) {
                len += match input {
                    Doc::Str(s) => s.len(),
                    _ => 20,
                };
                continue;
            }
            let v = self.leaf(e, input)?;
            match &*v {
                Doc::Str(s) => len += s.len(),
                _ => text = false,
            }
            *slot = Some(v);
        }
        let got = &mut got[..parts.len()];
        if text {
            let mut s = String::with_capacity(len);
            for slot in got.iter() {
                match slot.as_deref() {
                    Some(Doc::Str(t)) => s.push_str(t),
                    Some(_) => return Err(Stop::Fallback),
                    None => push_text(&mut s, input)?,
                }
            }
            return Ok(Doc::Str(Cow::Owned(s)));
        }
        let mut acc: Option<Cow<'s, Doc<'a>>> = None;
        for slot in got.iter_mut() {
            let next = match slot.take() {
                Some(v) => v,
                None => {
                    let mut s = String::new();
                    push_text(&mut s, input)?;
                    Cow::Owned(Doc::Str(Cow::Owned(s)))
                }
            };
            acc = Some(match acc {
                None => next,
                Some(a) => Cow::Owned(arith(Math::Add, a, next)?),
            });
        }
        acc.map(Cow::into_owned).ok_or(Stop::Fallback)
    }

    /// The path `steps` from `base`: `.name` and slice steps are taken here, read in place up
    /// to the first slice; from the first other step on, the general evaluator takes the rest.
    /// Same answers as [`Eval::step`] without `?`.
    pub(super) fn path_val<'s>(
        &'s self,
        base: &'s Doc<'a>,
        steps: &'a [Step],
        input: &'s Doc<'a>,
    ) -> Result<Cow<'s, Doc<'a>>, Stop> {
        let mut cur = Cow::Borrowed(base);
        for (i, step) in steps.iter().enumerate() {
            cur = match (step, cur) {
                (Step::Field(k), Cow::Borrowed(v)) => Cow::Borrowed(field(v, k)?),
                (Step::Field(k), Cow::Owned(v)) => Cow::Owned(field(&v, k)?.clone()),
                (Step::Slice(from, to), cur) => {
                    match self.slice(&cur, from.as_ref(), to.as_ref(), input)? {
                        Some(v) => Cow::Owned(v),
                        None => return Err(Stop::Fallback),
                    }
                }
                (_, cur) => {
                    let rest = &steps[i..];
                    return exactly_one(|out| {
                        self.steps(&cur, rest, input, &mut |v| out(v.clone()))
                    })
                    .map(Cow::Owned);
                }
            };
        }
        Ok(cur)
    }

    /// An object construction: keys and values each with exactly one output. With a
    /// [`prototype`], the members are pushed in key order, each key borrowed from the program.
    pub(super) fn object(
        &self,
        entries: &'a [(Key, Expr)],
        sorted: bool,
        input: &Doc<'a>,
    ) -> Result<Doc<'a>, Stop> {
        let mut m: Members<'a> = Vec::with_capacity(entries.len());
        if sorted {
            for (k, v) in entries {
                let Key::Static(k) = k else {
                    return Err(Stop::Fallback);
                };
                m.push((Cow::Borrowed(k.as_str()), self.one(v, input)?));
            }
            return Ok(Doc::Obj(m));
        }
        for (k, v) in entries {
            let key = match k {
                Key::Static(s) => Cow::Borrowed(s.as_str()),
                Key::Dynamic(e) => match self.one(e, input)? {
                    Doc::Str(s) => s,
                    _ => return Err(Stop::Fallback),
                },
            };
            json_doc::insert(&mut m, key, self.one(v, input)?);
        }
        Ok(Doc::Obj(m))
    }

    /// Exactly one output, collected from the general evaluator.
    pub(super) fn one_each(&self, e: &'a Expr, input: &Doc<'a>) -> Result<Doc<'a>, Stop> {
        exactly_one(|out| self.each(e, input, out))
    }

    /// Outputs by reference where the expression is a path into the input or a variable.
    pub(super) fn each_ref(&self, e: &'a Expr, input: &Doc<'a>, out: OutRef<'_, 'a>) -> Res {
        match e {
            Expr::Id => out(input),
            Expr::Lit(v) => out(v),
            Expr::Var(slot) => self.with_var(*slot, |v| out(v)),
            Expr::Path(root, steps) if matches!(**root, Expr::Id | Expr::Var(_)) => match &**root {
                Expr::Var(slot) => self.with_var(*slot, |v| self.steps(v, steps, input, out)),
                _ => self.steps(input, steps, input, out),
            },
            Expr::Pipe(l, r) => self.each_ref(l, input, &mut |v| self.each_ref(r, v, out)),
            Expr::Empty => Ok(()),
            // `select(c)` is `if c then . else empty end`: the input passes by reference.
            Expr::If(branches, other) => {
                for (cond, then) in branches {
                    if self.holds(cond, input)? {
                        return self.each_ref(then, input, out);
                    }
                }
                self.each_ref(other, input, out)
            }
            _ => self.each(e, input, &mut |v| out(&v)),
        }
    }

    pub(super) fn steps(
        &self,
        cur: &Doc<'a>,
        steps: &'a [Step],
        orig: &Doc<'a>,
        out: OutRef<'_, 'a>,
    ) -> Res {
        let Some((step, rest)) = steps.split_first() else {
            return out(cur);
        };
        match step {
            Step::Try(inner) => self.step(cur, inner, true, rest, orig, out),
            step => self.step(cur, step, false, rest, orig, out),
        }
    }

    /// One path step; `opt` (`?`) turns jaq's certain access errors into no output. Errors of
    /// the steps after it, and cases jaq might accept, still hand over to jaq.
    pub(super) fn step(
        &self,
        cur: &Doc<'a>,
        step: &'a Step,
        opt: bool,
        rest: &'a [Step],
        orig: &Doc<'a>,
        out: OutRef<'_, 'a>,
    ) -> Res {
        let miss = || if opt { Ok(()) } else { Err(Stop::Fallback) };
        match step {
            Step::Try(inner) => self.step(cur, inner, true, rest, orig, out),
            Step::Field(k) => match cur {
                Doc::Obj(m) => self.steps(member(m, k).unwrap_or(&NULL), rest, orig, out),
                Doc::Null => self.steps(&NULL, rest, orig, out),
                _ => miss(),
            },
            Step::Iter => match cur {
                Doc::Arr(a) => {
                    for x in a {
                        self.steps(x, rest, orig, out)?;
                    }
                    Ok(())
                }
                Doc::Obj(m) => {
                    order_free(m)?;
                    for (_, x) in m {
                        self.steps(x, rest, orig, out)?;
                    }
                    Ok(())
                }
                _ => miss(),
            },
            Step::Index(i) => {
                let i = self.leaf(i, orig)?;
                match (cur, &*i) {
                    (Doc::Null, _) => self.steps(&NULL, rest, orig, out),
                    (Doc::Obj(m), Doc::Str(k)) => {
                        self.steps(member(m, k).unwrap_or(&NULL), rest, orig, out)
                    }
                    // jaq looks any other key up in an object, and finds nothing.
                    (Doc::Obj(_), _) => self.steps(&NULL, rest, orig, out),
                    (Doc::Arr(a), Doc::Num(_)) => {
                        let at = position(&i, a.len())?;
                        self.steps(at.map_or(&NULL, |p| &a[p]), rest, orig, out)
                    }
                    // Certain errors in jaq: scalars have no members, arrays no names.
                    (Doc::Bool(_) | Doc::Num(_), _)
                    | (Doc::Str(_), Doc::Null | Doc::Bool(_) | Doc::Num(_))
                    | (Doc::Str(_), Doc::Str(_) | Doc::Arr(_))
                    | (Doc::Arr(_), Doc::Null | Doc::Bool(_) | Doc::Str(_)) => miss(),
                    _ => Err(Stop::Fallback),
                }
            }
            Step::Slice(from, to) => match self.slice(cur, from.as_ref(), to.as_ref(), orig)? {
                Some(sliced) => self.steps(&sliced, rest, orig, out),
                None => miss(),
            },
        }
    }

    /// `cur[from:to]`; `None` when `cur` cannot be sliced (an error in jaq).
    pub(super) fn slice(
        &self,
        cur: &Doc<'a>,
        from: Option<&'a Expr>,
        to: Option<&'a Expr>,
        orig: &Doc<'a>,
    ) -> Result<Option<Doc<'a>>, Stop> {
        let from = from.map(|e| self.leaf(e, orig)).transpose()?;
        let to = to.map(|e| self.leaf(e, orig)).transpose()?;
        let (from, to) = (from.as_deref(), to.as_deref());
        Ok(Some(match cur {
            Doc::Arr(a) => {
                let (s, e) = span(from, to, a.len())?;
                Doc::Arr(a.get(s..e).unwrap_or_default().to_vec())
            }
            // ASCII text: characters are bytes, so the slice is a byte range.
            Doc::Str(text) if text.is_ascii() => {
                let (s, e) = span(from, to, text.len())?;
                Doc::Str(Cow::Owned(text.get(s..e).unwrap_or_default().to_owned()))
            }
            Doc::Str(text) => {
                let (s, e) = span(from, to, text.chars().count())?;
                Doc::Str(text.chars().skip(s).take(e - s).collect())
            }
            Doc::Null | Doc::Bool(_) | Doc::Num(_) | Doc::Obj(_) => {
                return Ok(None);
            }
        }))
    }

    pub(super) fn each(&self, e: &'a Expr, input: &Doc<'a>, out: Out<'_, 'a>) -> Res {
        match e {
            Expr::Id => out(input.clone()),
            Expr::Empty => Ok(()),
            Expr::Lit(v) => out(v.lend()),
            Expr::Var(_) | Expr::Path(..) => self.each_path(e, input, out),
            Expr::Str(_)
            | Expr::Obj(..)
            | Expr::Math(..)
            | Expr::Sum(_)
            | Expr::SliceNum(..)
            | Expr::SliceNumAt(..)
            | Expr::Cmp(..)
            | Expr::And(..)
            | Expr::Or(..) => out(self.leaf(e, input)?.into_owned()),
            Expr::Arr(None) => out(Doc::Arr(Vec::new())),
            Expr::Arr(Some(inner)) => {
                let mut items = Vec::new();
                self.each(inner, input, &mut |v| {
                    items.push(v);
                    Ok(())
                })?;
                out(Doc::Arr(items))
            }
            Expr::Neg(inner) => {
                let n = match num(&*self.leaf(inner, input)?)? {
                    N::I(i) => N::I(i.checked_neg().ok_or(Stop::Fallback)?),
                    N::F(f) => N::F(-f),
                };
                out(from_n(n)?)
            }
            Expr::Pipe(l, r) => {
                if is_ref_path(l) {
                    self.each_ref(l, input, &mut |v| self.each(r, v, out))
                } else {
                    self.each(l, input, &mut |v| self.each(r, &v, out))
                }
            }
            Expr::Bind(l, slot, r) => {
                // Bindings live after the globals.
                let local = slot.checked_sub(GLOBALS.len()).ok_or(Stop::Fallback)?;
                self.each(l, input, &mut |v| {
                    let prev = {
                        let mut locals = self.locals.borrow_mut();
                        let cell = locals.get_mut(local).ok_or(Stop::Fallback)?;
                        std::mem::replace(cell, Rc::new(v))
                    };
                    let r = self.each(r, input, out);
                    if let Some(cell) = self.locals.borrow_mut().get_mut(local) {
                        *cell = prev;
                    }
                    r
                })
            }
            Expr::Comma(l, r) => {
                self.each(l, input, out)?;
                self.each(r, input, out)
            }
            Expr::Alt(l, r) => {
                let mut any = false;
                self.each(l, input, &mut |v| {
                    if truthy(&v) {
                        any = true;
                        out(v)
                    } else {
                        Ok(())
                    }
                })?;
                if any {
                    Ok(())
                } else {
                    self.each(r, input, out)
                }
            }
            Expr::If(branches, other) => {
                for (cond, then) in branches {
                    if self.holds(cond, input)? {
                        return self.each(then, input, out);
                    }
                }
                self.each(other, input, out)
            }
            Expr::Call(f, args) => self.builtin(*f, args, input, out),
        }
    }

    /// The truth of an `if` condition (exactly one output, else jaq decides).
    /// A comparison is decided in place, without the boolean value it would make.
    pub(super) fn holds(&self, cond: &'a Expr, input: &Doc<'a>) -> Result<bool, Stop> {
        if let Expr::Cmp(op, l, r) = cond {
            return compare(*op, &*self.leaf(l, input)?, &*self.leaf(r, input)?);
        }
        Ok(truthy(&*self.leaf(cond, input)?))
    }

    pub(super) fn each_path(&self, e: &'a Expr, input: &Doc<'a>, out: Out<'_, 'a>) -> Res {
        if is_ref_path(e) {
            return self.each_ref(e, input, &mut |v| out(v.clone()));
        }
        match e {
            Expr::Path(root, steps) => self.each(root, input, &mut |v| {
                self.steps(&v, steps, input, &mut |x| out(x.clone()))
            }),
            _ => Err(Stop::Fallback),
        }
    }

    pub(super) fn builtin(
        &self,
        f: Builtin,
        args: &'a [Expr],
        input: &Doc<'a>,
        out: Out<'_, 'a>,
    ) -> Res {
        out(self.builtin1(f, args, input)?)
    }

    /// A builtin's one output (every modelled builtin has exactly one, or stops).
    pub(super) fn builtin1(
        &self,
        f: Builtin,
        args: &'a [Expr],
        input: &Doc<'a>,
    ) -> Result<Doc<'a>, Stop> {
        let arg = |i: usize| -> Result<Doc<'a>, Stop> {
            self.one(args.get(i).ok_or(Stop::Fallback)?, input)
        };
        let text = |v: &Doc<'a>| -> Result<Cow<'a, str>, Stop> {
            match v {
                Doc::Str(s) => Ok(s.clone()),
                _ => Err(Stop::Fallback),
            }
        };
        let v = match f {
            Builtin::Length => match input {
                Doc::Null => Doc::from(0i64),
                Doc::Str(s) => Doc::from(s.chars().count()),
                Doc::Arr(a) => Doc::from(a.len()),
                Doc::Obj(m) => Doc::from(m.len()),
                Doc::Num(_) => match num(input)? {
                    N::I(i) => Doc::from(i.checked_abs().ok_or(Stop::Fallback)?),
                    N::F(f) => from_n(N::F(f.abs()))?,
                },
                Doc::Bool(_) => return Err(Stop::Fallback),
            },
            Builtin::ToString => match input {
                Doc::Str(s) => Doc::Str(s.clone()),
                _ => {
                    let mut s = String::new();
                    push_text(&mut s, input)?;
                    Doc::Str(Cow::Owned(s))
                }
            },
            Builtin::ToNumber => match input {
                Doc::Num(_) => input.clone(),
                Doc::Str(s) => integer_text(s)?,
                _ => return Err(Stop::Fallback),
            },
            Builtin::Type => Doc::Str(Cow::Borrowed(match input {
                Doc::Null => "null",
                Doc::Bool(_) => "boolean",
                Doc::Num(_) => "number",
                Doc::Str(_) => "string",
                Doc::Arr(_) => "array",
                Doc::Obj(_) => "object",
            })),
            Builtin::Keys => match input {
                // Members are in key order already (byte order, as `keys` sorts).
                Doc::Obj(m) => Doc::Arr(m.iter().map(|(k, _)| Doc::Str(k.clone())).collect()),
                Doc::Arr(a) => Doc::Arr((0..a.len()).map(Doc::from).collect()),
                _ => return Err(Stop::Fallback),
            },
            Builtin::Add => {
                let items: Vec<Doc<'a>> = match input {
                    Doc::Arr(a) => a.clone(),
                    Doc::Obj(m) => {
                        order_free(m)?;
                        m.iter().map(|(_, v)| v.clone()).collect()
                    }
                    _ => return Err(Stop::Fallback),
                };
                let mut acc = Doc::Null;
                for x in items {
                    acc = arith(Math::Add, Cow::Owned(acc), Cow::Owned(x))?;
                }
                acc
            }
            Builtin::AsciiDowncase => Doc::Str(Cow::Owned(text(input)?.to_ascii_lowercase())),
            Builtin::AsciiUpcase => Doc::Str(Cow::Owned(text(input)?.to_ascii_uppercase())),
            Builtin::Split => {
                let (s, sep) = (text(input)?, text(&arg(0)?)?);
                if sep.is_empty() {
                    return Err(Stop::Fallback);
                }
                if s.is_empty() {
                    Doc::Arr(Vec::new())
                } else {
                    Doc::Arr(
                        s.split(sep.as_ref())
                            .map(|p| Doc::Str(Cow::Owned(p.to_string())))
                            .collect(),
                    )
                }
            }
            Builtin::Join => {
                let sep = text(&arg(0)?)?;
                let Doc::Arr(items) = input else {
                    return Err(Stop::Fallback);
                };
                let mut s = String::new();
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        s.push_str(&sep);
                    }
                    push_text(&mut s, x)?;
                }
                Doc::Str(Cow::Owned(s))
            }
            Builtin::StartsWith => Doc::Bool(text(input)?.starts_with(text(&arg(0)?)?.as_ref())),
            Builtin::EndsWith => Doc::Bool(text(input)?.ends_with(text(&arg(0)?)?.as_ref())),
            Builtin::LtrimStr | Builtin::RtrimStr => {
                let fix = arg(0)?;
                match (input, &fix) {
                    (Doc::Str(s), Doc::Str(p)) => {
                        let cut = if f == Builtin::LtrimStr {
                            s.strip_prefix(p.as_ref())
                        } else {
                            s.strip_suffix(p.as_ref())
                        };
                        Doc::Str(Cow::Owned(cut.unwrap_or(s).to_string()))
                    }
                    _ => return Err(Stop::Fallback),
                }
            }
            Builtin::Has => match (input, &arg(0)?) {
                (Doc::Obj(m), Doc::Str(k)) => Doc::Bool(member(m, k).is_some()),
                (Doc::Arr(a), i @ Doc::Num(_)) => {
                    let i = i.as_i64().filter(|i| *i >= 0).ok_or(Stop::Fallback)?;
                    Doc::Bool((i as u64) < a.len() as u64)
                }
                _ => return Err(Stop::Fallback),
            },
            Builtin::ToEntries => match input {
                Doc::Obj(m) if order_free(m).is_ok() => {
                    Doc::Arr(m.iter().map(|(k, v)| entry_of(k, v)).collect())
                }
                _ => return Err(Stop::Fallback),
            },
            Builtin::FromEntries => {
                let Doc::Arr(items) = input else {
                    return Err(Stop::Fallback);
                };
                let mut m: Members<'a> = Vec::with_capacity(items.len());
                for item in items {
                    let Doc::Obj(e) = item else {
                        return Err(Stop::Fallback);
                    };
                    let Some(Doc::Str(k)) = member(e, "key") else {
                        return Err(Stop::Fallback);
                    };
                    let value = member(e, "value").cloned().unwrap_or(Doc::Null);
                    json_doc::insert(&mut m, k.clone(), value);
                }
                Doc::Obj(m)
            }
            Builtin::WithEntries => {
                let (Doc::Obj(m), Some(f)) = (input, args.first()) else {
                    return Err(Stop::Fallback);
                };
                let mut built: Members<'a> = Vec::new();
                for (k, v) in m {
                    self.each(f, &entry_of(k, v), &mut |r| {
                        let Doc::Obj(mut r) = r else {
                            return Err(Stop::Fallback);
                        };
                        let Some(Doc::Str(key)) = json_doc::remove(&mut r, "key") else {
                            return Err(Stop::Fallback);
                        };
                        let value = json_doc::remove(&mut r, "value").unwrap_or(Doc::Null);
                        // Two entries with one key: which wins depends on the order jaq
                        // iterates in (insertion order), which a key-ordered map has lost.
                        match json_doc::insert(&mut built, key, value) {
                            None => Ok(()),
                            Some(_) => Err(Stop::Fallback),
                        }
                    })?;
                }
                Doc::Obj(built)
            }
            Builtin::Error => return Err(Stop::Fallback),
        };
        Ok(v)
    }
}
