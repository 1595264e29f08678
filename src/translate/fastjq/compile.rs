//! Compiles jaq's parsed terms into the subset's expressions (definitions inlined, variables
//! given slots). It never evaluates, and answers `Unsupported` for anything outside the subset.

use super::ast::*;
use crate::json_doc::{self, Doc, Members};
use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::ops::{Cmp, Math};
use jaq_core::path::{Opt, Part};
use serde_json::Number;
use std::borrow::Cow;
use std::rc::Rc;

/// Compile-time scope: definitions, filter parameters and variables, innermost first.
pub(super) enum Scope<'s> {
    Root,
    /// A definition; its body sees `parent` (and itself, when inlined).
    Def {
        def: &'s Def<&'s str, Term<&'s str>>,
        parent: Rc<Scope<'s>>,
    },
    Filter {
        name: &'s str,
        expr: Expr,
        parent: Rc<Scope<'s>>,
    },
    Var {
        name: &'s str,
        slot: usize,
        parent: Rc<Scope<'s>>,
    },
}

pub(super) enum Found<'s> {
    Def(&'s Def<&'s str, Term<&'s str>>, Rc<Scope<'s>>),
    Filter(Expr),
}

impl<'s> Scope<'s> {
    pub(super) fn find_call(self: &Rc<Self>, name: &str, arity: usize) -> Option<Found<'s>> {
        let mut cur = self.clone();
        loop {
            let next = match &*cur {
                Scope::Root => return None,
                Scope::Def { def, parent } => {
                    if def.name == name && def.args.len() == arity {
                        return Some(Found::Def(def, parent.clone()));
                    }
                    parent.clone()
                }
                Scope::Filter {
                    name: n,
                    expr,
                    parent,
                } => {
                    if *n == name && arity == 0 {
                        return Some(Found::Filter(expr.clone()));
                    }
                    parent.clone()
                }
                Scope::Var { parent, .. } => parent.clone(),
            };
            cur = next;
        }
    }

    pub(super) fn find_var(self: &Rc<Self>, name: &str) -> Option<usize> {
        let mut cur = self.clone();
        loop {
            let next = match &*cur {
                Scope::Root => return GLOBALS.iter().position(|g| *g == name),
                Scope::Var { name: n, slot, .. } if *n == name => return Some(*slot),
                Scope::Var { parent, .. }
                | Scope::Def { parent, .. }
                | Scope::Filter { parent, .. } => parent.clone(),
            };
            cur = next;
        }
    }
}

pub(super) struct Compiler {
    pub(super) slots: usize,
    pub(super) uses: [bool; 3],
    pub(super) depth: usize,
    pub(super) nodes: usize,
}

/// Outside the subset: jaq runs this program.
pub(super) struct Unsupported;

pub(super) type C<T> = Result<T, Unsupported>;

pub(super) fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// `l | r`, as [`Expr::SliceNum`] when it is `.[from:to] | tonumber`.
pub(super) fn pipe(l: Expr, r: Expr) -> Expr {
    if let (Expr::Path(root, steps), Expr::Call(Builtin::ToNumber, args)) = (&l, &r)
        && matches!(**root, Expr::Id)
        && args.is_empty()
        && let [Step::Slice(from, to)] = steps.as_slice()
    {
        if let (Some(from), Some(to)) = (literal_bound(from.as_ref()), literal_bound(to.as_ref())) {
            return Expr::SliceNumAt(from.unwrap_or(0), to, b(Expr::Pipe(b(l), b(r))));
        }
        let (from, to) = (from.clone().map(b), to.clone().map(b));
        return Expr::SliceNum(from, to, b(Expr::Pipe(b(l), b(r))));
    }
    Expr::Pipe(b(l), b(r))
}

/// A slice bound known when compiled: `Some(None)` for an absent or `null` bound,
/// `Some(Some(i))` for a non-negative integer literal, `None` for anything else.
pub(super) fn literal_bound(e: Option<&Expr>) -> Option<Option<usize>> {
    match e {
        None | Some(Expr::Lit(Doc::Null)) => Some(None),
        Some(Expr::Lit(Doc::Num(n))) => {
            let i = n.as_i64().filter(|i| *i >= 0)?;
            usize::try_from(i).ok().map(Some)
        }
        Some(_) => None,
    }
}

/// `l op r`; a chain of `+` becomes one [`Expr::Sum`] of its operands, in order.
pub(super) fn math(op: Math, l: Expr, r: Expr) -> Expr {
    match (op, l) {
        (Math::Add, Expr::Math(Math::Add, a, c)) => Expr::Sum(vec![*a, *c, r]),
        (Math::Add, Expr::Sum(mut parts)) if parts.len() < SUM_MAX => {
            parts.push(r);
            Expr::Sum(parts)
        }
        (op, l) => Expr::Math(op, b(l), b(r)),
    }
}

pub(super) fn lit_str(parts: &[StrPart<&str, Term<&str>>]) -> Option<String> {
    let mut s = String::new();
    for p in parts {
        match p {
            StrPart::Str(t) => s.push_str(t),
            StrPart::Char(c) => s.push(*c),
            StrPart::Term(_) => return None,
        }
    }
    Some(s)
}

impl Compiler {
    /// The slot of variable `name`, noting a global the program names.
    pub(super) fn var(&mut self, sc: &Rc<Scope<'_>>, name: &str) -> C<usize> {
        let slot = sc.find_var(name).ok_or(Unsupported)?;
        if let Some(used) = self.uses.get_mut(slot) {
            *used = true;
        }
        Ok(slot)
    }

    pub(super) fn slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    pub(super) fn term<'s>(&mut self, t: &'s Term<&'s str>, sc: &Rc<Scope<'s>>) -> C<Expr> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Unsupported);
        }
        Ok(match t {
            Term::Id => Expr::Id,
            Term::Num(n) => Expr::Lit(number_literal(n).ok_or(Unsupported)?),
            Term::Str(None, parts) => match lit_str(parts) {
                Some(s) => Expr::Lit(Doc::Str(Cow::Owned(s))),
                None => {
                    let mut segs = Vec::with_capacity(parts.len());
                    for p in parts {
                        segs.push(match p {
                            StrPart::Str(t) => Seg::Text((*t).to_string()),
                            StrPart::Char(c) => Seg::Text(c.to_string()),
                            StrPart::Term(t) => Seg::Interp(self.term(t, sc)?),
                        });
                    }
                    Expr::Str(segs)
                }
            },
            Term::Arr(None) => Expr::Lit(Doc::Arr(Vec::new())),
            Term::Arr(Some(t)) => Expr::Arr(Some(b(self.term(t, sc)?))),
            Term::Obj(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    out.push(self.entry(k, v.as_ref(), sc)?);
                }
                // A literal object (a lookup table, say) is built once, here.
                if out
                    .iter()
                    .all(|(k, v)| matches!((k, v), (Key::Static(_), Expr::Lit(_))))
                {
                    let mut m: Members<'static> = Vec::with_capacity(out.len());
                    for (k, v) in out {
                        if let (Key::Static(k), Expr::Lit(v)) = (k, v) {
                            json_doc::insert(&mut m, Cow::Owned(k), v);
                        }
                    }
                    Expr::Lit(Doc::Obj(m))
                } else {
                    let proto = prototype(&mut out);
                    Expr::Obj(out, proto)
                }
            }
            Term::Neg(t) => Expr::Neg(b(self.term(t, sc)?)),
            Term::BinOp(l, op, r) => {
                let left = self.term(l, sc)?;
                match op {
                    BinaryOp::Pipe(None) => pipe(left, self.term(r, sc)?),
                    BinaryOp::Pipe(Some(Pattern::Var(name))) => {
                        let slot = self.slot();
                        let inner = Rc::new(Scope::Var {
                            name,
                            slot,
                            parent: sc.clone(),
                        });
                        Expr::Bind(b(left), slot, b(self.term(r, &inner)?))
                    }
                    BinaryOp::Comma => Expr::Comma(b(left), b(self.term(r, sc)?)),
                    BinaryOp::Alt => Expr::Alt(b(left), b(self.term(r, sc)?)),
                    BinaryOp::And => Expr::And(b(left), b(self.term(r, sc)?)),
                    BinaryOp::Or => Expr::Or(b(left), b(self.term(r, sc)?)),
                    BinaryOp::Math(m) => math(*m, left, self.term(r, sc)?),
                    BinaryOp::Cmp(c) => Expr::Cmp(*c, b(left), b(self.term(r, sc)?)),
                    _ => return Err(Unsupported),
                }
            }
            Term::IfThenElse(branches, other) => {
                let mut out = Vec::with_capacity(branches.len());
                for (cond, then) in branches {
                    out.push((self.term(cond, sc)?, self.term(then, sc)?));
                }
                let other = match other {
                    Some(t) => self.term(t, sc)?,
                    None => Expr::Id,
                };
                Expr::If(out, b(other))
            }
            Term::Def(defs, body) => {
                // Each definition sees the ones before it (and itself, see `inline`).
                let mut scope = sc.clone();
                for def in defs {
                    scope = Rc::new(Scope::Def { def, parent: scope });
                }
                self.term(body, &scope)?
            }
            Term::Call(name, args) => self.call(name, args, sc)?,
            Term::Var(name) => Expr::Var(self.var(sc, name)?),
            Term::Path(root, path) => {
                let root = self.term(root, sc)?;
                let mut steps = Vec::with_capacity(path.0.len());
                for (part, opt) in &path.0 {
                    let step = match part {
                        Part::Index(i) => match i {
                            Term::Str(None, parts) => match lit_str(parts) {
                                Some(key) => Step::Field(key),
                                None => Step::Index(self.term(i, sc)?),
                            },
                            _ => Step::Index(self.term(i, sc)?),
                        },
                        Part::Range(None, None) => Step::Iter,
                        Part::Range(from, to) => Step::Slice(
                            from.as_ref().map(|t| self.term(t, sc)).transpose()?,
                            to.as_ref().map(|t| self.term(t, sc)).transpose()?,
                        ),
                    };
                    steps.push(match opt {
                        Opt::Essential => step,
                        Opt::Optional => Step::Try(Box::new(step)),
                    });
                }
                Expr::Path(b(root), steps)
            }
            _ => return Err(Unsupported),
        })
    }

    pub(super) fn entry<'s>(
        &mut self,
        k: &'s Term<&'s str>,
        v: Option<&'s Term<&'s str>>,
        sc: &Rc<Scope<'s>>,
    ) -> C<(Key, Expr)> {
        Ok(match (k, v) {
            // `{$x}` is `{x: $x}`.
            (Term::Var(name), None) => (
                Key::Static(name.trim_start_matches('$').to_string()),
                Expr::Var(self.var(sc, name)?),
            ),
            (Term::Str(None, parts), value) => {
                let key = lit_str(parts).ok_or(Unsupported)?;
                let value = match value {
                    Some(v) => self.term(v, sc)?,
                    // `{a}` is `{a: .a}`.
                    None => Expr::Path(b(Expr::Id), vec![Step::Field(key.clone())]),
                };
                (Key::Static(key), value)
            }
            (k, Some(v)) => (Key::Dynamic(self.term(k, sc)?), self.term(v, sc)?),
            _ => return Err(Unsupported),
        })
    }

    pub(super) fn call<'s>(
        &mut self,
        name: &'s str,
        args: &'s [Term<&'s str>],
        sc: &Rc<Scope<'s>>,
    ) -> C<Expr> {
        match sc.find_call(name, args.len()) {
            Some(Found::Filter(e)) => return Ok(e),
            Some(Found::Def(def, home)) => return self.inline(def, home, args, sc),
            None => {}
        }
        let mut a = Vec::with_capacity(args.len());
        for t in args {
            a.push(self.term(t, sc)?);
        }
        let one = |mut a: Vec<Expr>| a.pop().ok_or(Unsupported);
        let call = |f: Builtin, a: Vec<Expr>| Ok(Expr::Call(f, a));
        match (name, a.len()) {
            ("empty", 0) => Ok(Expr::Empty),
            ("null", 0) => Ok(Expr::Lit(Doc::Null)),
            ("true", 0) => Ok(Expr::Lit(Doc::Bool(true))),
            ("false", 0) => Ok(Expr::Lit(Doc::Bool(false))),
            ("not", 0) => Ok(Expr::If(
                vec![(Expr::Id, Expr::Lit(Doc::Bool(false)))],
                b(Expr::Lit(Doc::Bool(true))),
            )),
            ("select", 1) => Ok(Expr::If(vec![(one(a)?, Expr::Id)], b(Expr::Empty))),
            ("values", 0) => Ok(Expr::If(
                vec![(
                    Expr::Cmp(Cmp::Ne, b(Expr::Id), b(Expr::Lit(Doc::Null))),
                    Expr::Id,
                )],
                b(Expr::Empty),
            )),
            ("map", 1) => Ok(Expr::Arr(Some(b(Expr::Pipe(
                b(Expr::Path(b(Expr::Id), vec![Step::Iter])),
                b(one(a)?),
            ))))),
            ("first", 0) => Ok(Expr::Path(
                b(Expr::Id),
                vec![Step::Index(Expr::Lit(Doc::from(0i64)))],
            )),
            ("last", 0) => Ok(Expr::Path(
                b(Expr::Id),
                vec![Step::Index(Expr::Lit(Doc::from(-1i64)))],
            )),
            ("length", 0) => call(Builtin::Length, a),
            ("tostring", 0) => call(Builtin::ToString, a),
            ("tonumber", 0) => call(Builtin::ToNumber, a),
            ("type", 0) => call(Builtin::Type, a),
            ("keys", 0) => call(Builtin::Keys, a),
            ("add", 0) => call(Builtin::Add, a),
            ("ascii_downcase", 0) => call(Builtin::AsciiDowncase, a),
            ("ascii_upcase", 0) => call(Builtin::AsciiUpcase, a),
            ("split", 1) => call(Builtin::Split, a),
            ("join", 1) => call(Builtin::Join, a),
            ("startswith", 1) => call(Builtin::StartsWith, a),
            ("endswith", 1) => call(Builtin::EndsWith, a),
            ("ltrimstr", 1) => call(Builtin::LtrimStr, a),
            ("rtrimstr", 1) => call(Builtin::RtrimStr, a),
            ("has", 1) => call(Builtin::Has, a),
            ("to_entries", 0) => call(Builtin::ToEntries, a),
            ("from_entries", 0) => call(Builtin::FromEntries, a),
            ("with_entries", 1) => call(Builtin::WithEntries, a),
            ("error", 0 | 1) => call(Builtin::Error, a),
            _ => Err(Unsupported),
        }
    }

    /// Inlines a user definition: filter parameters become the caller's expressions,
    /// `$x` parameters bind variables (`def f($x): g` is `def f(x): x as $x | g`).
    pub(super) fn inline<'s>(
        &mut self,
        def: &'s Def<&'s str, Term<&'s str>>,
        home: Rc<Scope<'s>>,
        args: &'s [Term<&'s str>],
        sc: &Rc<Scope<'s>>,
    ) -> C<Expr> {
        if self.depth >= MAX_INLINE {
            return Err(Unsupported);
        }
        self.depth += 1;
        // The body sees the definition itself (recursion ends at MAX_INLINE).
        let mut scope = Rc::new(Scope::Def { def, parent: home });
        let mut binds = Vec::new();
        for (param, arg) in def.args.iter().zip(args) {
            let arg = self.term(arg, sc)?;
            if param.starts_with('$') {
                let slot = self.slot();
                binds.push((arg, slot));
                scope = Rc::new(Scope::Var {
                    name: param,
                    slot,
                    parent: scope,
                });
            } else {
                scope = Rc::new(Scope::Filter {
                    name: param,
                    expr: arg,
                    parent: scope,
                });
            }
        }
        let mut body = self.term(&def.body, &scope)?;
        for (arg, slot) in binds.into_iter().rev() {
            body = Expr::Bind(b(arg), slot, b(body));
        }
        self.depth -= 1;
        Ok(body)
    }
}

/// Number literals the way jaq reads them: integers as machine integers, decimals as floats.
pub(super) fn number_literal(n: &str) -> Option<Doc<'static>> {
    if n.bytes().all(|c| c.is_ascii_digit()) {
        return n.parse::<i64>().ok().map(Doc::from);
    }
    let f: f64 = n.parse().ok()?;
    Number::from_f64(f).map(Doc::Num)
}

/// Whether an object construction's keys are all static with none repeated; if so, its
/// entries are sorted by key, an object's own order, so the object is built by pushing each
/// member in turn, without a search. The values may then be computed in any order: each has
/// exactly one output or the run stops, so the order is never seen.
pub(super) fn prototype(entries: &mut [(Key, Expr)]) -> bool {
    if entries.iter().any(|(k, _)| k.name().is_none()) {
        return false;
    }
    // Stable: should keys repeat (no prototype then), the last of them still wins.
    entries.sort_by(|(a, _), (b, _)| a.name().cmp(&b.name()));
    !entries.windows(2).any(|w| w[0].0.name() == w[1].0.name())
}
