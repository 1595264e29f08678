//! The native jq subset's compiled form: expression nodes, path steps, builtins, the program.
//! Data only: it must never compile or evaluate anything.

use crate::json_doc::Doc;
use jaq_core::ops::{Cmp, Math};

/// Why a native run did not produce its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Something outside the exactly-modelled subset happened: run jaq instead.
    Fallback,
    /// The first output was taken; evaluation stops early (jaq is lazy the same way).
    Done,
}

pub(super) type Res = Result<(), Stop>;

/// Global variables, in slot order (the same names the jaq side binds).
pub(super) const GLOBALS: [&str; 3] = ["$args", "$status", "$meta"];

/// Most operands one [`Expr::Sum`] takes; a longer chain nests (a sum is an operand too).
pub(super) const SUM_MAX: usize = 8;

/// Deepest chain of inlined `def` calls; deeper means recursion, which jaq handles.
pub(super) const MAX_INLINE: usize = 12;

/// Most expression nodes one program may inline to (definitions used many times multiply).
pub(super) const MAX_NODES: usize = 20_000;

#[derive(Debug, Clone)]
pub(super) enum Expr {
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
pub(super) enum Seg {
    Text(String),
    Interp(Expr),
}

#[derive(Debug, Clone)]
pub(super) enum Key {
    Static(String),
    Dynamic(Expr),
}

impl Key {
    /// The key's text when it is static.
    pub(super) fn name(&self) -> Option<&str> {
        match self {
            Key::Static(k) => Some(k),
            Key::Dynamic(_) => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Step {
    Field(String),
    Index(Expr),
    Slice(Option<Expr>, Option<Expr>),
    Iter,
    /// `?`: the step's own access errors yield nothing.
    Try(Box<Step>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Builtin {
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
    pub(super) expr: Expr,
    pub(super) slots: usize,
    /// Which globals the program names: the others are not converted for a run.
    pub(super) uses: [bool; 3],
    /// The member names when the program is `.a.b...` of its input ([`Program::input_path`]).
    pub(super) path: Option<Box<[String]>>,
}

pub(super) type Out<'o, 'a> = &'o mut dyn FnMut(Doc<'a>) -> Res;
pub(super) type OutRef<'o, 'a> = &'o mut dyn FnMut(&Doc<'a>) -> Res;

/// The name `k` when `e` is `.k`, a member of the input: the commonest path of a mapping,
/// which the evaluator reads in place.
#[inline(always)]
pub(super) fn input_field(e: &Expr) -> Option<&str> {
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
pub(super) fn single(e: &Expr) -> bool {
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

pub(super) fn is_ref_path(e: &Expr) -> bool {
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
