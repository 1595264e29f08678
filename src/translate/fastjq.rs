//! The native evaluator for the jq subset mappings use, run on borrowed `json_doc::Doc`s.
//! It never guesses: programs outside the subset, and runs it cannot finish exactly, go to jaq.
//!
//! A backend body read in place (`json_text::read_borrowed`) is evaluated without a copy:
//! strings taken from it stay slices of it until the answer becomes a `serde_json` value, once,
//! at the end; a built object's keys borrow from the program.
//!
//! The subset: paths (with `?`), object and array construction, literals, `if`, `select`, `//`,
//! arithmetic, string helpers, non-recursive `def`s. A run that meets anything not modelled
//! exactly (any error, a multi-output operand, an odd number) stops with [`Stop::Fallback`] so
//! the caller runs jaq, the reference, instead.

use crate::json_doc::{self, Doc, Members, member};
use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::ops::{Cmp, Math};
use jaq_core::path::{Opt, Part};
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::rc::Rc;

/// Why a native run did not produce its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Something outside the exactly-modelled subset happened: run jaq instead.
    Fallback,
    /// The first output was taken; evaluation stops early (jaq is lazy the same way).
    Done,
}

type Res = Result<(), Stop>;

/// Global variables, in slot order (the same names the jaq side binds).
const GLOBALS: [&str; 3] = ["$args", "$status", "$meta"];

/// Deepest chain of inlined `def` calls; deeper means recursion, which jaq handles.
const MAX_INLINE: usize = 12;

/// Most expression nodes one program may inline to (definitions used many times multiply).
const MAX_NODES: usize = 20_000;

#[derive(Debug, Clone)]
enum Expr {
    Id,
    Empty,
    Lit(Doc<'static>),
    Str(Vec<Seg>),
    Arr(Option<Box<Expr>>),
    /// The entries, and whether every key is static and distinct with the entries sorted by
    /// key ([`prototype`]): the object is then built in order, without a search.
    Obj(Vec<(Key, Expr)>, bool),
    Neg(Box<Expr>),
    Pipe(Box<Expr>, Box<Expr>),
    Bind(Box<Expr>, usize, Box<Expr>),
    Comma(Box<Expr>, Box<Expr>),
    Alt(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Math(Math, Box<Expr>, Box<Expr>),
    /// `a + b + c ...` (three or more operands, left to right): jq adds left to right, and
    /// when every operand is text the sum is built once at its final size.
    Sum(Vec<Expr>),
    /// `.[from:to] | tonumber`, recognised when compiled: on ASCII text the number is read
    /// from the slice in place; any other input runs the pipe itself (the third part).
    SliceNum(Option<Box<Expr>>, Option<Box<Expr>>, Box<Expr>),
    /// [`Expr::SliceNum`] whose bounds are literals (non-negative, or absent): `.[from:to]`
    /// with `to` the end when absent.
    SliceNumAt(usize, Option<usize>, Box<Expr>),
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    If(Vec<(Expr, Expr)>, Box<Expr>),
    Var(usize),
    Path(Box<Expr>, Vec<Step>),
    Call(Builtin, Vec<Expr>),
}

#[derive(Debug, Clone)]
enum Seg {
    Text(String),
    Interp(Expr),
}

#[derive(Debug, Clone)]
enum Key {
    Static(String),
    Dynamic(Expr),
}

impl Key {
    /// The key's text when it is static.
    fn name(&self) -> Option<&str> {
        match self {
            Key::Static(k) => Some(k),
            Key::Dynamic(_) => None,
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Field(String),
    Index(Expr),
    Slice(Option<Expr>, Option<Expr>),
    Iter,
    /// `?`: the step's own access errors yield nothing.
    Try(Box<Step>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    Length,
    ToString,
    ToNumber,
    Type,
    Keys,
    Add,
    AsciiDowncase,
    AsciiUpcase,
    Split,
    Join,
    StartsWith,
    EndsWith,
    LtrimStr,
    RtrimStr,
    Has,
    ToEntries,
    FromEntries,
    /// `with_entries(f)`: `to_entries | map(f) | from_entries`, taken in key order, which gives
    /// jaq's answer whenever no two entries end with the same key (checked at run time).
    WithEntries,
    /// `error` and `error(msg)`: jaq reports it, with its own message.
    Error,
}

/// A program the native evaluator runs exactly.
#[derive(Debug, Clone)]
pub struct Program {
    expr: Expr,
    slots: usize,
    /// Which globals the program names: the others are not converted for a run.
    uses: [bool; 3],
    /// The member names when the program is `.a.b...` of its input ([`Program::input_path`]).
    path: Option<Box<[String]>>,
}

/// Compile-time scope: definitions, filter parameters and variables, innermost first.
enum Scope<'s> {
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

enum Found<'s> {
    Def(&'s Def<&'s str, Term<&'s str>>, Rc<Scope<'s>>),
    Filter(Expr),
}

impl<'s> Scope<'s> {
    fn find_call(self: &Rc<Self>, name: &str, arity: usize) -> Option<Found<'s>> {
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

    fn find_var(self: &Rc<Self>, name: &str) -> Option<usize> {
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

struct Compiler {
    slots: usize,
    uses: [bool; 3],
    depth: usize,
    nodes: usize,
}

/// Outside the subset: jaq runs this program.
struct Unsupported;

type C<T> = Result<T, Unsupported>;

impl Program {
    /// Parses `code` with jaq's own parser and compiles it if every construct is in the subset.
    pub fn compile(code: &str) -> Option<Program> {
        let tokens = jaq_core::load::Lexer::new(code).lex().ok()?;
        let term = jaq_core::load::Parser::new(&tokens)
            .parse(|p| p.term())
            .ok()?;
        let mut c = Compiler {
            slots: GLOBALS.len(),
            uses: [false; 3],
            depth: 0,
            nodes: 0,
        };
        let expr = c.term(&term, &Rc::new(Scope::Root)).ok()?;
        let path = match &expr {
            Expr::Id => Some(Box::default()),
            Expr::Path(root, steps) if matches!(**root, Expr::Id) => steps
                .iter()
                .map(|s| match s {
                    Step::Field(k) => Some(k.clone()),
                    _ => None,
                })
                .collect(),
            _ => None,
        };
        Some(Program {
            expr,
            slots: c.slots,
            uses: c.uses,
            path,
        })
    }

    /// The member names `a`, `b`... when the whole program is the path `.a.b...` of its input
    /// (a mapping's `from: .start_date`, say; none for `.`): its one output is then the value
    /// at that path, `null` where a member is missing or a value on the way is `null`, and an
    /// error (jaq's to report) where a value on the way is neither an object nor `null`.
    pub fn input_path(&self) -> Option<&[String]> {
        self.path.as_deref()
    }

    /// Runs the program on `input` with the global variables in [`GLOBALS`] order; returns
    /// the first output (or `None`), or `Stop::Fallback` when jaq must decide.
    /// The globals' strings are borrowed, never copied.
    pub fn run(&self, input: &Value, globals: [&Value; 3]) -> Result<Option<Value>, Stop> {
        self.run_doc(&Doc::from_value(input), globals)
    }

    /// [`Program::run`] on a [`Doc`] (a backend body read in place, say): the same answer
    /// for the same value. Only the globals the program names are looked at.
    pub fn run_doc(&self, input: &Doc<'_>, globals: [&Value; 3]) -> Result<Option<Value>, Stop> {
        let [args, status, meta] = globals;
        self.run_docs(input, [args, meta], Doc::from_owned(status.clone()))
            .map(|out| out.map(Doc::into_value))
    }

    /// [`Program::run_doc`] answering a [`Doc`] that borrows from the input, the program and
    /// the globals (`args`, `meta`; `$status` is `status`): nothing is converted.
    pub fn run_docs<'a>(
        &'a self,
        input: &Doc<'a>,
        globals: [&'a Value; 2],
        status: Doc<'static>,
    ) -> Result<Option<Doc<'a>>, Stop> {
        let locals = self.slots.saturating_sub(GLOBALS.len());
        // Unbound slots share one `null`; a binding replaces its slot's Rc, never mutates it.
        // A program without local variables (most) allocates none.
        let null = (locals > 0).then(|| Rc::new(Doc::Null));
        // Only the globals the program names are converted; the others stay `null`.
        let ([args, meta], [ua, us, um]) = (globals, self.uses);
        let named = |used: bool, v: &'a Value| if used { Doc::from_value(v) } else { Doc::Null };
        let ev = Eval {
            globals: [
                named(ua, args),
                if us { status } else { Doc::Null },
                named(um, meta),
            ],
            locals: RefCell::new(null.map_or_else(Vec::new, |null| vec![null; locals])),
        };
        let mut first = None;
        let r = ev.each(&self.expr, input, &mut |v| {
            first = Some(v);
            Err(Stop::Done)
        });
        match r {
            Ok(()) | Err(Stop::Done) => Ok(first),
            Err(Stop::Fallback) => Err(Stop::Fallback),
        }
    }
}

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// Most operands one [`Expr::Sum`] takes; a longer chain nests (a sum is an operand too).
const SUM_MAX: usize = 8;

/// `l | r`, as [`Expr::SliceNum`] when it is `.[from:to] | tonumber`.
fn pipe(l: Expr, r: Expr) -> Expr {
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
fn literal_bound(e: Option<&Expr>) -> Option<Option<usize>> {
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
fn math(op: Math, l: Expr, r: Expr) -> Expr {
    match (op, l) {
        (Math::Add, Expr::Math(Math::Add, a, c)) => Expr::Sum(vec![*a, *c, r]),
        (Math::Add, Expr::Sum(mut parts)) if parts.len() < SUM_MAX => {
            parts.push(r);
            Expr::Sum(parts)
        }
        (op, l) => Expr::Math(op, b(l), b(r)),
    }
}

fn lit_str(parts: &[StrPart<&str, Term<&str>>]) -> Option<String> {
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
    fn var(&mut self, sc: &Rc<Scope<'_>>, name: &str) -> C<usize> {
        let slot = sc.find_var(name).ok_or(Unsupported)?;
        if let Some(used) = self.uses.get_mut(slot) {
            *used = true;
        }
        Ok(slot)
    }

    fn slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }

    fn term<'s>(&mut self, t: &'s Term<&'s str>, sc: &Rc<Scope<'s>>) -> C<Expr> {
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

    fn entry<'s>(
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

    fn call<'s>(
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
    fn inline<'s>(
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
fn number_literal(n: &str) -> Option<Doc<'static>> {
    if n.bytes().all(|c| c.is_ascii_digit()) {
        return n.parse::<i64>().ok().map(Doc::from);
    }
    let f: f64 = n.parse().ok()?;
    Number::from_f64(f).map(Doc::Num)
}

static NULL: Doc<'static> = Doc::Null;

/// Run-time state: the globals (slots `0..GLOBALS.len()`), their strings borrowed from the
/// caller's values (a global the program never names is `null`), and the
/// `as $x` bindings (the slots after them).
struct Eval<'g> {
    globals: [Doc<'g>; 3],
    locals: RefCell<Vec<Rc<Doc<'g>>>>,
}

type Out<'o, 'a> = &'o mut dyn FnMut(Doc<'a>) -> Res;
type OutRef<'o, 'a> = &'o mut dyn FnMut(&Doc<'a>) -> Res;

fn truthy(v: &Doc<'_>) -> bool {
    !matches!(v, Doc::Null | Doc::Bool(false))
}

#[derive(Clone, Copy)]
enum N {
    I(i64),
    F(f64),
}

fn num(v: &Doc<'_>) -> Result<N, Stop> {
    match v {
        Doc::Num(n) => match n.as_i64() {
            Some(i) => Ok(N::I(i)),
            None if n.is_f64() => n.as_f64().map(N::F).ok_or(Stop::Fallback),
            None => Err(Stop::Fallback),
        },
        _ => Err(Stop::Fallback),
    }
}

fn from_n<'a>(n: N) -> Result<Doc<'a>, Stop> {
    match n {
        N::I(i) => Ok(Doc::from(i)),
        N::F(f) => Number::from_f64(f).map(Doc::Num).ok_or(Stop::Fallback),
    }
}

fn as_f(n: N) -> f64 {
    match n {
        N::I(i) => i as f64,
        N::F(f) => f,
    }
}

/// jq's `+`, `-` and `*` for the operand types modelled exactly. The operands are borrowed
/// where they are read only: a string sum is built once, at its final size, from borrowed text.
fn arith<'a>(op: Math, l: Cow<'_, Doc<'a>>, r: Cow<'_, Doc<'a>>) -> Result<Doc<'a>, Stop> {
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

fn rank(v: &Doc<'_>) -> u8 {
    match v {
        Doc::Null => 0,
        Doc::Bool(_) => 1,
        Doc::Num(_) => 2,
        Doc::Str(_) => 3,
        Doc::Arr(_) => 4,
        Doc::Obj(_) => 5,
    }
}

fn num_cmp(a: &Doc<'_>, b: &Doc<'_>) -> Result<Ordering, Stop> {
    match (num(a)?, num(b)?) {
        (N::I(x), N::I(y)) => Ok(x.cmp(&y)),
        (x, y) => as_f(x).partial_cmp(&as_f(y)).ok_or(Stop::Fallback),
    }
}

/// jq's total order, for the cases modelled exactly (objects are left to jaq).
fn order(a: &Doc<'_>, b: &Doc<'_>) -> Result<Ordering, Stop> {
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

fn equal(a: &Doc<'_>, b: &Doc<'_>) -> Result<bool, Stop> {
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

fn compare(op: Cmp, a: &Doc<'_>, b: &Doc<'_>) -> Result<bool, Stop> {
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
fn order_free(m: &[(Cow<'_, str>, Doc<'_>)]) -> Res {
    if m.len() > 1 {
        Err(Stop::Fallback)
    } else {
        Ok(())
    }
}

/// Appends what `tostring` (and string interpolation) gives for `v`, for the values whose
/// text is unambiguous.
fn push_text(s: &mut String, v: &Doc<'_>) -> Res {
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
fn field<'v, 'a>(cur: &'v Doc<'a>, k: &str) -> Result<&'v Doc<'a>, Stop> {
    match cur {
        Doc::Obj(m) => Ok(member(m, k).unwrap_or(&NULL)),
        Doc::Null => Ok(&NULL),
        _ => Err(Stop::Fallback),
    }
}

/// The name `k` when `e` is `.k`, a member of the input: the commonest path of a mapping,
/// which the evaluator reads in place.
#[inline(always)]
fn input_field(e: &Expr) -> Option<&str> {
    match e {
        Expr::Path(root, steps) if matches!(**root, Expr::Id) => match steps.as_slice() {
            [Step::Field(k)] => Some(k),
            _ => None,
        },
        _ => None,
    }
}

/// True when `e` has exactly one output whenever it has any (its run either gives one value
/// or stops): a pipe whose left side is such an expression feeds its right side once. Checked
/// on the node itself (and a path's root), not recursively: pipes and conditionals answer
/// false and take the general route, which is exact for them too.
fn single(e: &Expr) -> bool {
    match e {
        Expr::Id | Expr::Lit(_) | Expr::Var(_) | Expr::Str(_) | Expr::Arr(_) | Expr::Obj(..) => {
            true
        }
        Expr::Neg(_) | Expr::Math(..) | Expr::Cmp(..) | Expr::And(..) | Expr::Or(..) => true,
        Expr::Sum(_) | Expr::SliceNum(..) | Expr::SliceNumAt(..) => true,
        Expr::Call(..) => true,
        Expr::Path(root, steps) => {
            matches!(**root, Expr::Id | Expr::Var(_))
                && steps
                    .iter()
                    .all(|s| matches!(s, Step::Field(_) | Step::Index(_) | Step::Slice(..)))
        }
        Expr::Pipe(..)
        | Expr::If(..)
        | Expr::Empty
        | Expr::Bind(..)
        | Expr::Comma(..)
        | Expr::Alt(..) => false,
    }
}

/// Whether an object construction's keys are all static with none repeated; if so, its
/// entries are sorted by key, an object's own order, so the object is built by pushing each
/// member in turn, without a search. The values may then be computed in any order: each has
/// exactly one output or the run stops, so the order is never seen.
fn prototype(entries: &mut [(Key, Expr)]) -> bool {
    if entries.iter().any(|(k, _)| k.name().is_none()) {
        return false;
    }
    // Stable: should keys repeat (no prototype then), the last of them still wins.
    entries.sort_by(|(a, _), (b, _)| a.name().cmp(&b.name()));
    !entries.windows(2).any(|w| w[0].0.name() == w[1].0.name())
}

/// The `{key, value}` object `to_entries` makes of one member.
fn entry_of<'a>(k: &Cow<'a, str>, v: &Doc<'a>) -> Doc<'a> {
    // In key order: "key" < "value".
    Doc::Obj(vec![
        (Cow::Borrowed("key"), Doc::Str(k.clone())),
        (Cow::Borrowed("value"), v.clone()),
    ])
}

/// The one output `run` gives to its output callback; more or none, and jaq decides.
fn exactly_one<'a>(run: impl FnOnce(Out<'_, 'a>) -> Res) -> Result<Doc<'a>, Stop> {
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
fn sliced_at<'a>(from: usize, to: Option<usize>, text: &str) -> Result<Doc<'a>, Stop> {
    sliced_int(from, to, text).map(Doc::from)
}

/// [`sliced_at`]'s number as a machine integer.
fn sliced_int(from: usize, to: Option<usize>, text: &str) -> Result<i64, Stop> {
    let len = text.len();
    let s = from.min(len);
    let e = to.map_or(len, |t| t.min(len)).max(s);
    integer_of(text.get(s..e).unwrap_or_default())
}

/// An index that jq reads as a position: a non-negative or negative machine integer.
fn position(i: &Doc<'_>, len: usize) -> Result<Option<usize>, Stop> {
    let i = i.as_i64().ok_or(Stop::Fallback)?;
    let len = i64::try_from(len).map_err(|_| Stop::Fallback)?;
    let at = if i < 0 { len + i } else { i };
    Ok((0..len).contains(&at).then_some(at as usize))
}

/// The range `.[from:to]` takes of `len` items: missing bounds are the ends, and an end before
/// the start is the start (an empty slice).
fn span(from: Option<&Doc<'_>>, to: Option<&Doc<'_>>, len: usize) -> Result<(usize, usize), Stop> {
    let s = bound(from, len)?.unwrap_or(0);
    let e = bound(to, len)?.unwrap_or(len);
    Ok((s, e.max(s)))
}

fn bound(v: Option<&Doc<'_>>, len: usize) -> Result<Option<usize>, Stop> {
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

impl<'a> Eval<'a> {
    /// Calls `f` with the value of variable `slot`.
    fn with_var(&self, slot: usize, f: impl FnOnce(&Doc<'a>) -> Res) -> Res {
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
    fn one(&self, e: &'a Expr, input: &Doc<'a>) -> Result<Doc<'a>, Stop> {
        // A literal lives as long as the program: its text is lent, not copied.
        if let Expr::Lit(v) = e {
            return Ok(v.lend());
        }
        self.leaf(e, input).map(Cow::into_owned)
    }

    /// [`Eval::val`], with the commonest leaves taken inline: a literal, the input and `.name`
    /// of the input are most of a mapping's nodes, and each would otherwise cost a call.
    #[inline(always)]
    fn leaf<'s>(&'s self, e: &'a Expr, input: &'s Doc<'a>) -> Result<Cow<'s, Doc<'a>>, Stop> {
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
    fn operand<'s>(&'s self, e: &'a Expr, input: &'s Doc<'a>) -> Result<Cow<'s, Doc<'a>>, Stop> {
        match self.sliced_number(e, input) {
            Some(n) => n.map(Cow::Owned),
            None => self.leaf(e, input),
        }
    }

    /// `.[from:to] | tonumber` ([`Expr::SliceNumAt`], [`Expr::SliceNum`]) of ASCII text: the
    /// number read from the slice in place. `None` for any other expression or input, which
    /// the general route takes.
    #[inline(always)]
    fn sliced_number(&self, e: &'a Expr, input: &Doc<'a>) -> Option<Result<Doc<'a>, Stop>> {
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
    fn int(&self, e: &'a Expr, input: &Doc<'a>) -> Option<Result<i64, Stop>> {
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
    fn val<'s>(&'s self, e: &'a Expr, input: &'s Doc<'a>) -> Result<Cow<'s, Doc<'a>>, Stop> {
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
    fn sum<'s>(&'s self, parts: &'a [Expr], input: &'s Doc<'a>) -> Result<Doc<'a>, Stop> {
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
    fn path_val<'s>(
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
    fn object(
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
    fn one_each(&self, e: &'a Expr, input: &Doc<'a>) -> Result<Doc<'a>, Stop> {
        exactly_one(|out| self.each(e, input, out))
    }

    /// Outputs by reference where the expression is a path into the input or a variable.
    fn each_ref(&self, e: &'a Expr, input: &Doc<'a>, out: OutRef<'_, 'a>) -> Res {
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

    fn steps(&self, cur: &Doc<'a>, steps: &'a [Step], orig: &Doc<'a>, out: OutRef<'_, 'a>) -> Res {
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
    fn step(
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
    fn slice(
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

    fn each(&self, e: &'a Expr, input: &Doc<'a>, out: Out<'_, 'a>) -> Res {
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
    fn holds(&self, cond: &'a Expr, input: &Doc<'a>) -> Result<bool, Stop> {
        if let Expr::Cmp(op, l, r) = cond {
            return compare(*op, &*self.leaf(l, input)?, &*self.leaf(r, input)?);
        }
        Ok(truthy(&*self.leaf(cond, input)?))
    }

    fn each_path(&self, e: &'a Expr, input: &Doc<'a>, out: Out<'_, 'a>) -> Res {
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

    fn builtin(&self, f: Builtin, args: &'a [Expr], input: &Doc<'a>, out: Out<'_, 'a>) -> Res {
        out(self.builtin1(f, args, input)?)
    }

    /// A builtin's one output (every modelled builtin has exactly one, or stops).
    fn builtin1(&self, f: Builtin, args: &'a [Expr], input: &Doc<'a>) -> Result<Doc<'a>, Stop> {
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

/// `tonumber` of text: `-?[0-9]+` of at most 18 digits (leading zeros included when positive,
/// as jaq reads them; not a negative zero, nor a negative with a leading zero, which jaq reads
/// as 0), the strings whose `tonumber` is a machine integer unambiguously, is read here in one
/// pass (18 digits cannot overflow); anything else by jaq.
fn integer_text<'a>(s: &str) -> Result<Doc<'a>, Stop> {
    integer_of(s).map(Doc::from)
}

/// [`integer_text`]'s number as a machine integer.
fn integer_of(s: &str) -> Result<i64, Stop> {
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

fn is_ref_path(e: &Expr) -> bool {
    match e {
        Expr::Id | Expr::Var(_) | Expr::Lit(_) => true,
        Expr::Path(root, _) => matches!(**root, Expr::Id | Expr::Var(_)),
        Expr::Pipe(l, r) => is_ref_path(l) && is_ref_path(r),
        Expr::Empty => true,
        Expr::If(branches, other) => {
            branches.iter().all(|(_, then)| is_ref_path(then)) && is_ref_path(other)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_text;
    use crate::translate::transform::{Transform, Vars3};
    use proptest::prelude::*;
    use serde_json::json;

    fn args() -> Value {
        json!({"service_id": "MASSAGE-60", "n": 3, "tags": ["a", "b"]})
    }

    fn meta() -> Value {
        json!({"idempotency_key": "k-1"})
    }

    /// jaq's answer (`Err` for a run-time error).
    fn reference(code: &str, input: &Value) -> Result<Option<Value>, String> {
        let t = Transform::compile(code).expect("the reference compiles it");
        let (a, m) = (args(), meta());
        t.run_jaq(
            input,
            Vars3 {
                args: &a,
                status: 201,
                meta: &m,
            },
        )
        .map_err(|e| e.message)
    }

    fn native(code: &str, input: &Value) -> Result<Option<Value>, Stop> {
        let p = Program::compile(code).unwrap_or_else(|| panic!("`{code}` is in the subset"));
        p.run(input, [&args(), &Value::from(201), &meta()])
    }

    /// The native answer equals jaq's; when jaq fails, the native run hands over to jaq.
    fn same(code: &str, input: Value) {
        match (reference(code, &input), native(code, &input)) {
            (Ok(want), got) => assert_eq!(got, Ok(want), "`{code}` on {input}"),
            (Err(e), got) => assert_eq!(
                got,
                Err(Stop::Fallback),
                "`{code}` on {input}: jaq says {e}"
            ),
        }
    }

    /// Literal text in an output is lent from the program, not copied (no allocation per
    /// output), and the answers are jaq's.
    #[test]
    fn literals_in_outputs_borrow_from_the_program() {
        for code in [
            r#"{state: "available", n: 1, l: [1, "x"], o: {"k": "v"}}"#,
            r#"[.[] | {s: "t", v: .}]"#,
            r#""lit""#,
        ] {
            same(code, json!([1, 2]));
        }
        let p = Program::compile(r#"[.[] | {state: "available", v: .}]"#).expect("in the subset");
        let (a, m) = (args(), meta());
        let input = Doc::from_owned(json!([1, 2]));
        let out = p
            .run_docs(&input, [&a, &m], Doc::Null)
            .expect("runs natively")
            .expect("one output");
        let Doc::Arr(items) = &out else {
            panic!("an array: {out:?}")
        };
        assert_eq!(items.len(), 2);
        for item in items {
            assert!(
                matches!(
                    item.get("state"),
                    Some(Doc::Str(Cow::Borrowed("available")))
                ),
                "{item:?}"
            );
        }
    }

    /// Found by the `transform` fuzz target in a 10-minute run: jaq reads a negative number
    /// string with a leading zero as 0, where the native `tonumber` read -1111111111151110.
    /// Such strings are left to jaq, so the answer is jaq's.
    #[test]
    fn a_negative_number_string_with_a_leading_zero_is_left_to_jaq() {
        for s in ["-01111111111151110", "-01", "-00"] {
            let input = json!({"x": "c", "code": s});
            assert_eq!(
                native(".code | tonumber", &input),
                Err(Stop::Fallback),
                "{s}"
            );
            assert!(reference(".code | tonumber", &input).is_ok(), "{s}");
        }
        // The forms the native evaluator keeps still equal jaq.
        for s in [
            "-1",
            "09",
            "0",
            "-4",
            "-10",
            "000123",
            "123456789012345678",
            "999999999999999999",
            "-999999999999999999",
        ] {
            same(".code | tonumber", json!({"code": s}));
        }
        // Other text is jaq's to read (or to refuse).
        for s in ["+5", "1a", "-", "", " 1", "1234567890123456789", "１"] {
            let input = json!({"code": s});
            match native(".code | tonumber", &input) {
                Err(Stop::Fallback) => {}
                got => panic!("`{s}`: the native side answered {got:?}"),
            }
        }
    }

    /// Found by the `transform` fuzz target in its second 10-minute run: `add` over an
    /// integer past i64::MAX kept it exact natively, jaq answers a float. Left to jaq now.
    #[test]
    fn adding_an_integer_past_i64_is_left_to_jaq() {
        let input = json!({"l": [11111111111111111111u64], "n": 11111111111111111111u64});
        for code in [".l | add", "null + .n", ".n + null"] {
            assert_eq!(native(code, &input), Err(Stop::Fallback), "{code}");
            assert!(reference(code, &input).is_ok(), "{code}");
        }
        same(".l | add", json!({"l": [1, 2.5, null]}));
        same("null + .n", json!({"n": 7}));
    }

    /// The direct route for single-output expressions (`Eval::val`): borrowed paths, string
    /// sums built from borrowed text, slices inside paths, pipes fed once, builtins, and the
    /// cases it hands to the general evaluator (iteration, `?`, `//`, local variables). Every
    /// answer must be jaq's, and natively (`same` fails on a needless hand-over to jaq).
    #[test]
    fn single_output_expressions_match_jaq() {
        let doc = json!({
            "l": [{"free": true, "id": "a", "n": 2}, {"free": false, "id": "b", "n": 5}],
            "small": {"a": 1, "b": 2, "s": "x"},
            "t": "2026-12-01T09:30",
            "u": "héllo wörld",
            "nul": null,
        });
        let defs = "def lisbon: if . >= \"2027-03-28T01:00\" then . + \":00+01:00\" else . + \":00+00:00\" end; \
                    def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber); \
                    def iso: \"PT\" + tostring + \"M\";";
        for code in [
            ".t | lisbon",
            ".t | minutes",
            "(.t | minutes) - 60 | iso",
            "[.l[] | select(.free) | {id: .id, at: (.t? // \"none\"), k: $args.service_id}]",
            "{a: .small.a, s: (.small.s + .small.s + \"!\"), t: \"\\(.small.a)-\\(.small.s)\"}",
            ".small | .a + .b",
            ".small | .s | ascii_upcase",
            ".t[0:4] | tonumber",
            ".t[11:16][0:2]",
            ".u[1:3] + .u[6:]",
            ".nul.a.b, .nul[1:2]",
            "$args.tags[1:] | length",
            "$args.n * 2 - $meta.idempotency_key[2:] == 5",
            ".small.a as $x | $x + .small.b",
            "if .small.a == 1 and (.small.b > 1 or .nul) then .small.s else empty end",
            "[.l[] | .n] | add",
            "-(.small.b) + (.nul // 3)",
            ".small + {c: 3} | keys",
            "[.l[].id] + [\"z\"] | join(\",\")",
        ] {
            same(&format!("{defs} {code}"), doc.clone());
        }
        // A path into a value that has no such member stays jaq's error.
        same(&format!("{defs} .t.a"), doc.clone());
        same(&format!("{defs} .small[0:1]"), doc.clone());
    }

    /// The shortcuts of the hot path answer as jaq does: `select` passing its input by
    /// reference, member lookup by key comparison (small objects) and by hash (large ones),
    /// ASCII slices by byte range next to non-ASCII ones by character.
    #[test]
    fn hot_path_shortcuts_match_jaq() {
        let big: serde_json::Map<String, Value> =
            (0..20).map(|i| (format!("k{i}"), json!(i))).collect();
        let doc = json!({
            "l": [{"free": true, "id": "a"}, {"free": false, "id": "b"}, {"id": "c"}],
            "small": {"a": 1, "b": 2},
            "big": big,
            "t": "2026-12-01T09:00",
            "u": "héllo wörld",
        });
        for code in [
            "[.l[] | select(.free) | .id]",
            "[.l[] | select(.free == false) | {id: .id}]",
            "[.l[] | if .free then . else empty end]",
            "[.l[] | select(.free) | select(.id == \"a\") | .id]",
            ".small.a, .small.z, .big.k0, .big.k19, .big.missing",
            ".big[\"k7\"], .small[\"b\"]",
            ".t[11:13], .t[:4], .t[14:], .t[5:3], .t[3:100]",
            ".u[1:4], .u[:1], .u[6:], .u[4:2]",
        ] {
            same(code, doc.clone());
        }
    }

    /// `.[a:b] | tonumber` is read from the slice in place on ASCII text; every other input
    /// takes the general route. Both answer as jaq does.
    #[test]
    fn sliced_numbers_match_jaq() {
        let doc = json!({"t": "2026-12-01T09:05", "x": "x-12", "u": "é12", "n": 42, "z": null});
        for code in [
            ".t | .[11:13] | tonumber",
            ".t[11:13] | tonumber",
            "(.t[:4] | tonumber) * 100 + (.t[5:7] | tonumber)",
            ".t[14:] | tonumber",
            ".x[1:] | tonumber",
            ".x | .[1:] | tonumber",
            ".u | .[1:3] | tonumber",
            ".n | .[0:1] | tonumber",
            ".z | .[0:1] | tonumber",
            ".t | .[null:4] | tonumber",
            ".t | [.[11:13], .[14:16] | tonumber]",
            "[([.t, .x][] | .[2:4] | tonumber)]",
            ".t[4:6] | tonumber",
            ".t | .[$args.n:4] | tonumber",
            ".t | .[14:null] | tonumber",
            ".t | .[14:99] | tonumber",
            ".x | .[2:] | tonumber",
            "(.t[11:13] | tonumber) - (.t[14:16] | tonumber) * 2",
        ] {
            same(code, doc.clone());
        }
        // Negative bounds are left to jaq.
        for code in [".t[-5:-3] | tonumber", ".t | .[-2:] | tonumber"] {
            assert_eq!(native(code, &doc), Err(Stop::Fallback), "{code}");
            assert!(reference(code, &doc).is_ok(), "{code}");
        }
        // Text that is not a plain integer is left to jaq, as before the shortcut.
        for code in [
            ".t[5:3] | tonumber",
            ".t[0:100] | tonumber",
            ".t[10:12] | tonumber",
        ] {
            let t = json!("2026-12-01T09:05");
            assert_eq!(
                native(code, &json!({"t": t})),
                Err(Stop::Fallback),
                "{code}"
            );
        }
    }

    /// Arithmetic of integers, taken on machine integers ([`Eval::int`]), answers as jaq does,
    /// and every operand it does not take (text, null, floats, wide integers, an overflow)
    /// leaves the answer to the general route, which answers the same.
    #[test]
    fn integer_arithmetic_matches_jaq() {
        let doc = json!({
            "b": "2026-12-01T09:05", "e": "2026-12-01T10:50", "n": 42, "m": -7, "f": 1.5,
            "s": "x", "z": null, "big": 9_000_000_000_000_000_000u64, "o": {"n": 3},
            "max": i64::MAX, "min": i64::MIN
        });
        let minutes = "def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber); ";
        for code in [
            "(.e | minutes) - (.b | minutes)",
            "((.e | minutes) - (.b | minutes)) * 2 + 1",
            ".n + .m",
            ".n - .m * 3",
            ".n * .m - 1",
            ".n + .f",
            ".n + .z",
            ".z + .n",
            ".n + .s",
            ".s + .n",
            ".n + .big",
            ".n + .missing",
            ".o | .n + 1",
            "(.o | .n) * .n",
            ".n + (.b | minutes)",
            ".n + 1.5",
            "3 * 4 - 5",
            "[(.n, .m) | . * 2 + 1]",
        ] {
            same(&format!("{minutes}{code}"), doc.clone());
        }
        // The text operand's error and the overflow are handed to jaq, as by the general route.
        for code in [
            ".n + (.s | minutes)",
            "(.s | minutes) + 1",
            ".max + 1",
            ".min - 1",
            ".max * 2",
        ] {
            assert_eq!(
                native(&format!("{minutes}{code}"), &doc),
                Err(Stop::Fallback),
                "{code}"
            );
        }
    }

    /// A chain of `+` is one sum: text parts (with `tostring` of the input written in place)
    /// make one string; any other operand adds left to right as jq does, errors included.
    #[test]
    fn sums_match_jaq() {
        let doc = json!({"s": "ab", "n": 42, "f": 1.5, "z": null, "l": [1], "o": {"a": 1},
                         "b": true, "u": "é"});
        // Outside the modelled subset (`tostring` of a float or a collection, an integer past
        // i64): jaq answers, whatever the native side says must be jaq's answer.
        for code in [
            "\"PT\" + tostring + \"M\"",
            ".f | \"PT\" + tostring + \"M\"",
            ".l | \"PT\" + tostring + \"M\"",
            "9223372036854775807 + .n + 1",
        ] {
            let want = reference(code, &doc);
            match native(code, &doc) {
                Err(Stop::Fallback) => {}
                got => assert_eq!(got.ok(), want.ok(), "`{code}`"),
            }
        }
        for code in [
            ".n | \"PT\" + tostring + \"M\"",
            ".s | \"PT\" + tostring + \"M\"",
            ".z | \"PT\" + tostring + \"M\"",
            ".b | \"PT\" + tostring + \"M\"",
            ".u | \"<\" + tostring + \">\" + . + tostring",
            ".s + .s + .s",
            ".s + .u + \"x\" + .s",
            ".n + .n + 1",
            ".n + .f + 1",
            ".z + .s + .s",
            ".s + .z + .s",
            ".z + .z + .z",
            ".l + .l + [2]",
            ".o + {b: 2} + {a: 3}",
            ".s + .n + .s",
            ".s + .s + .n",
            "1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11",
            ".s + .s + .s + .s + .s + .s + .s + .s + .s + .s",
            "[.s, .n] | .[0] + \"-\" + (.[1] | tostring)",
            ".s + (.n | tostring) + .s",
            "(.s + .s) + .s",
            ".s + (.s + .s)",
        ] {
            same(code, doc.clone());
        }
    }

    /// The shapes the demo's mappings lean on compile to their dedicated forms; if a change
    /// in the compiler lost them, the answers would stay right and only the cost would grow.
    #[test]
    fn chains_of_plus_and_sliced_numbers_compile_to_their_forms() {
        let expr = |code: &str| Program::compile(code).expect("in the subset").expr;
        assert!(matches!(expr("\"PT\" + tostring + \"M\""), Expr::Sum(p) if p.len() == 3));
        assert!(matches!(expr(".a + .b + .c + .d"), Expr::Sum(p) if p.len() == 4));
        assert!(matches!(expr(".a + .b"), Expr::Math(Math::Add, ..)));
        assert!(matches!(
            expr(".[11:13] | tonumber"),
            Expr::SliceNumAt(11, Some(13), _)
        ));
        assert!(matches!(
            expr(".[:4] | tonumber"),
            Expr::SliceNumAt(0, Some(4), _)
        ));
        assert!(matches!(
            expr(".[5:null] | tonumber"),
            Expr::SliceNumAt(5, None, _)
        ));
        assert!(matches!(expr(".[-2:] | tonumber"), Expr::SliceNum(..)));
        assert!(matches!(expr(".[$args.n:] | tonumber"), Expr::SliceNum(..)));
        assert!(matches!(expr(".[11:13]? | tonumber"), Expr::Pipe(..)));
        let long = vec![".a"; 20].join(" + ");
        assert!(matches!(expr(&long), Expr::Sum(p) if p.len() <= SUM_MAX));
    }

    /// Objects are key-ordered maps (no `preserve_order`): a built object has jaq's members and
    /// is written in key order, as jaq's answer is once it is a `serde_json` value, whether
    /// copied from a prototype (static, distinct keys, entries sorted) or built key by key.
    /// Iterating a built object, where jaq's insertion order shows in the answer, is left to jaq.
    #[test]
    fn constructed_objects_have_jaq_members_and_iterate_in_jaq_order() {
        let doc = json!({"s": "x", "t": true, "n": null, "l": [1, 2]});
        for code in [
            "{b: .s, a: .t, c: .n}",
            "{a: 1, a: .s}",
            "{a: .s, b: .t, a: .n}",
            "{z: .s, y: {b: .t, a: .l}, x: [.l[] | {k: ., j: .}]}",
            "{(.s): 1, a: 2}",
            "{a: .s} + {b: 1, a: 2}",
            // Found by the `transform` fuzz target: a prototype's values went to the wrong keys.
            ".name as $n | {n: $n, l: ($n | length)}",
        ] {
            let want = reference(code, &doc).map(|v| v.map(|v| json_text::to_vec(&v)));
            let got = native(code, &doc).map(|v| v.map(|v| json_text::to_vec(&v)));
            assert_eq!(got.ok(), want.ok(), "`{code}`");
        }
        // jaq lists `b` first; a key-ordered map would list `a` first: these go to jaq.
        for code in [
            "{b: 1, a: 2} | to_entries",
            "[{b: 1, a: 2}[]]",
            "{b: \"x\", a: \"y\"} | add",
        ] {
            assert_eq!(native(code, &doc), Err(Stop::Fallback), "`{code}`");
            assert!(reference(code, &doc).is_ok(), "jaq answers `{code}`");
        }
        // `with_entries` is taken natively unless two entries end with the same key, where
        // jaq's last (in insertion order) wins.
        same(
            "{b: 1, a: null, c: 3} | with_entries(select(.value != null))",
            doc.clone(),
        );
        same(
            "{b: 1, a: 2} | with_entries({key: (.key + \"x\"), value})",
            doc.clone(),
        );
        let clash = "{b: 1, a: 2} | with_entries({key: \"k\", value})";
        assert_eq!(native(clash, &doc), Err(Stop::Fallback));
        assert_eq!(reference(clash, &doc), Ok(Some(json!({"k": 2}))));
        // One member has one order: taken natively.
        assert_eq!(
            native("{b: 1} | to_entries", &doc),
            Ok(Some(json!([{"key": "b", "value": 1}])))
        );
    }

    #[test]
    fn paths_literals_and_construction() {
        let doc = json!({"a": {"b": [1, 2, {"c": "x"}]}, "s": "héllo wörld", "n": null, "t": true});
        for code in [
            ".",
            ".a",
            ".a.b",
            ".a.b[2].c",
            ".a.b[-1]",
            ".a.b[7]",
            ".missing",
            ".n.x",
            ".a.b[]",
            "[.a.b[]]",
            "{x: .s, y: [1, 2.5, \"z\", null, true, false]}",
            "{s, t}",
            "{(.s): 1}",
            "{\"k\": .t, $args}",
            ".a.b[1:]",
            ".a.b[:2]",
            ".s[1:4]",
            ".s[3:]",
            ".a.b | length",
            ".s | length",
            "{} | length",
            "null | length",
            "-3 | length",
            "[.a.b[] | select(type == \"number\")]",
            "[.a.b[] | numbers?]",
            ".a.b[]?",
            "[.s[]?]",
            "[.t.x?]",
            "[.s[0]?]",
            "[.n[]?]",
            ".a?.b",
            ".s[1:]?",
            "[.t[]?, 1]",
            "[.a.b[]?.c?]",
            "{a: 1, b: null} | with_entries(select(.value != null))",
            "{a: 1} | to_entries",
            "[{key: \"k\", value: 2}, {key: \"j\"}] | from_entries",
            "if .t then error(\"stop\") else 1 end",
            ".t | error",
            "\"x=\\(.t) n=\\(.n) i=\\(1 + 2)\"",
            "\"tab\\tquote\\\"\"",
            "$args.service_id",
            "$args[\"n\"]",
            "$status",
            "$meta.idempotency_key",
            "first",
            "[.a.b | first, last]",
            ".a | keys",
            ".a.b | has(0)",
            "{a: 1} | has(\"a\")",
            "[.a.b[] | type]",
        ] {
            // `numbers?` (try on a call) is outside the subset: the run must not be native.
            if code.contains("numbers?") {
                assert!(Program::compile(code).is_none(), "{code}");
                continue;
            }
            same(code, doc.clone());
        }
    }

    #[test]
    fn operators_and_conditionals() {
        let doc = json!({"x": 7, "y": 2.5, "s": "ab", "l": [3, 1], "o": {"k": 1}, "z": 0});
        for code in [
            ".x + 1",
            ".x - 10",
            ".x * 3",
            ".x + .y",
            ".y * 2",
            "-.x",
            ".s + \"cd\"",
            ".l + [2]",
            ".o + {j: 2}",
            ".o + {k: 9}",
            "null + .x",
            ".x + null",
            ".s + 1",
            ".x == 7",
            ".x == 7.0",
            ".x != .y",
            ".s < \"b\"",
            ".l < [3, 2]",
            "null < false",
            "false < 0",
            "0 < \"\"",
            "\"\" < []",
            "[] < {}",
            ".x >= 7",
            ".o == {k: 1}",
            ".o == {k: 1.0}",
            ".x > 3 and .s == \"ab\"",
            ".z or false",
            "if .x > 5 then \"big\" else \"small\" end",
            "if .x > 50 then 1 elif .x > 5 then 2 else 3 end",
            "if .missing then 1 end",
            ".missing // \"d\"",
            ".z // 9",
            "false // null // 3",
            "(.l[] | select(. > 2)) // 0",
            "[.l[] | select(. > 5)] // 0",
            ".x | not",
            "[.l[] | . * 2]",
            "[.l[], .x]",
            ".l | map(. + 1)",
            ".l | add",
            "[\"a\", \"b\"] | add",
            "{} | add",
            ".o | to_entries? // 1",
        ] {
            if code.contains('?') {
                assert!(Program::compile(code).is_none(), "{code}");
                continue;
            }
            same(code, doc.clone());
        }
    }

    #[test]
    fn strings_definitions_and_variables() {
        let doc = json!({"when": "2026-12-01T09:30", "name": "Ana Maria Silva", "code": "17",
                         "e": "", "lz": "09", "f": "1.5", "neg": "-4", "mixed": ["a", 1, null, true]});
        for code in [
            ".name | split(\" \")",
            ".name | split(\" \")[1:] | join(\" \")",
            ".e | split(\",\")",
            ".mixed | join(\"-\")",
            ".name | ascii_downcase",
            ".name | ascii_upcase",
            ".name | startswith(\"Ana\")",
            ".name | endswith(\"x\")",
            ".name | ltrimstr(\"Ana \")",
            ".name | rtrimstr(\"Silva\")",
            ".code | tonumber",
            ".neg | tonumber",
            ".lz | tonumber",
            "7 | tonumber",
            ".code | tonumber | tostring",
            "def hh: .[11:13] | tonumber; .when | hh * 60",
            "def twice(f): f | f; 3 | twice(. * 2)",
            "def add3($x; $y): $x + $y + .; 1 | add3(10; 100)",
            ".name as $n | {n: $n, l: ($n | length)}",
            "[.mixed[] as $m | $m]",
            "def f: 1; def g: f + 1; def f: 10; g + f",
            "def map(f): \"mine\"; [1] | map(. + 1)",
            "def fact: if . <= 1 then 1 else . * (. - 1 | fact) end; 5 | fact",
        ] {
            match Program::compile(code) {
                Some(_) => same(code, doc.clone()),
                // Recursion is beyond the inlining depth: jaq runs it.
                None => assert!(code.contains("fact"), "`{code}` should be native"),
            }
        }
    }

    #[test]
    fn constructs_outside_the_subset_are_left_to_jaq() {
        for code in [
            "reduce .[] as $x (0; . + $x)",
            "try .a catch 0",
            "numbers?",
            "..",
            ".a = 1",
            ".a |= 1",
            "@base64",
            "range(3)",
            "tojson",
            "label $f | 1",
            "[.[] as [$a] | $a]",
            "$__loc__",
            "input",
            "limit(1; .[])",
            "error(\"x\") | 1 as $x | reduce .[] as $y (0; 1)",
        ] {
            assert!(
                Program::compile(code).is_none(),
                "`{code}` must not run natively"
            );
        }
    }

    #[test]
    fn the_first_output_is_taken_lazily_like_jaq() {
        // jaq stops after the first output, so the later error never happens.
        same("1, (null | .[])", json!(null));
        // ... and an error before any output is jaq's to report.
        same("(null | .[]), 1", json!(null));
        same(".[]", json!([1, 2, 3]));
        same("empty", json!(1));
    }

    #[test]
    fn numbers_it_cannot_read_exactly_are_handed_to_jaq() {
        let doc = json!({"f": "1.5", "big": 9223372036854775807i64, "u": 18446744073709551615u64});
        for code in [
            ".f | tonumber",
            "[1] | tostring",
            ".big + 1",
            ".u * 1",
            ".u | tostring",
            "1.5 | tostring",
        ] {
            assert_eq!(native(code, &doc), Err(Stop::Fallback), "{code}");
            let t = Transform::compile(code).expect("compiles");
            let (a, m) = (args(), meta());
            let vars = Vars3 {
                args: &a,
                status: 201,
                meta: &m,
            };
            assert_eq!(t.run(&doc, vars), t.run_jaq(&doc, vars), "{code}");
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1000i64..1000).prop_map(Value::from),
            (-100.0f64..100.0).prop_map(|f| json!(f)),
            "[a-c ]{0,4}".prop_map(Value::String),
            Just(json!("09")),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-c]", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        /// On arbitrary inputs the native evaluator either agrees with jaq or hands over.
        #[test]
        fn agrees_with_jaq_on_arbitrary_input(input in json_value()) {
            for (code, reference, program) in programs() {
                let (a, m) = (args(), meta());
                let want = reference
                    .run_jaq(&input, Vars3 { args: &a, status: 201, meta: &m })
                    .map_err(|e| e.message);
                let got = program.run(&input, [&a, &Value::from(201), &m]);
                match (&want, &got) {
                    (_, Err(Stop::Fallback)) => {}
                    (Ok(w), Ok(g)) => prop_assert_eq!(g, w, "`{}` on {}", code, input),
                    _ => prop_assert!(false, "`{}` on {}: jaq {:?}, native {:?}", code, input, want, got),
                }
            }
        }
    }

    /// The programs of the property test, compiled once for both evaluators.
    fn programs() -> &'static [(&'static str, Transform, Program)] {
        static ALL: std::sync::OnceLock<Vec<(&'static str, Transform, Program)>> =
            std::sync::OnceLock::new();
        ALL.get_or_init(|| {
            [
                ".",
                ".a",
                ".a.b",
                ".[]",
                "[.[] | .a]",
                "{x: .a, y: .b // \"d\"}",
                ".a + .b",
                ".a - .b",
                ".a * .b",
                ".a == .b",
                ".a < .b",
                "[.[] | select(.)]",
                "length",
                "[.[] | length]",
                ".a | tostring",
                ".a | tonumber",
                "keys",
                "add",
                ".a[1:]",
                "if .a then .b else .c end",
                ".a and .b",
                ".a or .b",
                "[.[] | type]",
                "map(. + 1)",
                ".a | split(\" \")",
                "join(\",\")",
                "{(.a): 1}",
                "has(\"a\")",
                ".[0]",
                ".[-1]",
                "-.a",
                ".a[.b]",
                "[.a[]?]",
                "[.a.b?]",
                "[.[0]?]",
                "[.[]?.a?]",
                "[.a[1:]?]",
                "[.[.a]?]",
                "to_entries",
                "from_entries",
                "with_entries(select(.value))",
                "\"\\(.a)\"",
                ". as $x | [$x, $x]",
            ]
            .into_iter()
            .map(|code| {
                let t = Transform::compile(code).expect("compiles");
                let p = Program::compile(code).expect("in the subset");
                (code, t, p)
            })
            .collect()
        })
    }
}
