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

mod ast;
mod compile;
mod eval;
#[cfg(test)]
mod tests;
mod value;

use ast::{Expr, GLOBALS, Step};
pub use ast::{Program, Stop};
use compile::{Compiler, Scope};
use eval::Eval;

use crate::json_doc::Doc;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

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
