//! Compiled jq transforms (jaq): argument -> request body, backend body -> structuredContent.
//! Compiled once at load; running one never touches the file system or the network, and never panics.
//!
//! Why jq: mapping authors already know it from shell work, it expresses reshaping
//! (rename, nest, map over arrays, defaults with `//`, conditionals) in one line, and jaq is a
//! safe, pure-Rust implementation that compiles filters ahead of time.

use crate::json_doc::Doc;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Native, Vars, data::JustLut, unwrap_valr};
use jaq_json::{Map, Num, Rc, Val};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

type CompiledFilter = jaq_core::compile::Filter<Native<JustLut<Val>>>;

/// Natives refused in mapping transforms: they read the process environment (secrets), the
/// clock (non-deterministic output), stop the process, or write to stderr.
pub const DENIED: [&str; 5] = ["env", "halt", "now", "debug_empty", "stderr_empty"];

/// Standard-library definitions built on the refused natives.
const DENIED_DEFS: [&str; 4] = ["stderr", "debug", "halt", "halt_error"];

/// `PORTICO_JQ_CROSSCHECK=1`: every native answer is compared with jaq's, and a disagreement
/// fails the transform (the end-to-end suite runs the demo this way). Read once.
static CROSSCHECK: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var("PORTICO_JQ_CROSSCHECK").is_ok_and(|v| v == "1"));

/// The global variables every transform may read.
pub const GLOBAL_VARS: [&str; 3] = ["$args", "$status", "$meta"];

/// A jq program compiled at load.
#[derive(Clone)]
pub struct Transform {
    source: String,
    uses_args: bool,
    uses_meta: bool,
    /// The whole program (definitions included), for compiling jaq on demand.
    program: std::sync::Arc<str>,
    /// jaq's compiled filter: built at load for programs outside the native subset, on first
    /// need for the others.
    jaq: std::sync::Arc<std::sync::OnceLock<CompiledFilter>>,
    /// The same program for the native evaluator, when it is inside its subset.
    native: Option<std::sync::Arc<super::fastjq::Program>>,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transform")
            .field("source", &self.source)
            .finish()
    }
}

/// Inputs bound to the global variables.
#[derive(Debug, Clone, Copy)]
pub struct Vars3<'a> {
    pub args: &'a Value,
    pub status: u16,
    pub meta: &'a Value,
}

/// A jq program that did not compile; `offset` is a byte offset into the program when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub message: String,
    pub offset: Option<usize>,
}

/// A transform failed at run time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transform `{source_text}` failed: {message}")]
pub struct RunError {
    pub source_text: String,
    pub message: String,
}

fn offset_in(code: &str, found: &str) -> Option<usize> {
    let start = code.as_ptr() as usize;
    let at = found.as_ptr() as usize;
    (at >= start && at <= start + code.len()).then(|| at - start)
}

impl Transform {
    /// Compiles `code` with jq definitions (`def f: ...;`) in scope; offsets in errors point
    /// into `code` (or are `None` when the error is inside the definitions).
    pub fn compile_with(defs: Option<&str>, code: &str) -> Result<Self, CompileError> {
        let Some(defs) = defs.filter(|d| !d.trim().is_empty()) else {
            return Self::compile(code);
        };
        let joined = format!("{defs}\n{code}");
        let shift = defs.len() + 1;
        match Self::compile(&joined) {
            Ok(mut t) => {
                t.source = code.to_string();
                Ok(t)
            }
            Err(mut e) => {
                e.offset = e.offset.and_then(|o| o.checked_sub(shift));
                if e.offset.is_none() {
                    e.message = format!("{} (in `definitions` or the expression)", e.message);
                }
                Err(e)
            }
        }
    }

    /// Parses and compiles a jq program. Programs the native evaluator runs keep only its tree:
    /// the jaq filter (with its whole standard library) is rebuilt the first time a run needs
    /// jaq, which keeps a configuration's memory small.
    pub fn compile(code: &str) -> Result<Self, CompileError> {
        let filter = Self::jaq_filter(code)?;
        let native = super::fastjq::Program::compile(code).map(std::sync::Arc::new);
        let jaq = std::sync::OnceLock::new();
        if native.is_none() {
            let _ = jaq.set(filter);
        }
        Ok(Transform {
            native,
            uses_args: code.contains("$args"),
            uses_meta: code.contains("$meta"),
            source: code.to_string(),
            program: std::sync::Arc::from(code),
            jaq: std::sync::Arc::new(jaq),
        })
    }

    /// Parses and compiles `code` with jaq (the sandboxed standard library in scope).
    fn jaq_filter(code: &str) -> Result<CompiledFilter, CompileError> {
        let arena = Arena::default();
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs())
            .filter(|d| !DENIED_DEFS.contains(&d.name));
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs())
            .filter(|(name, _, _)| !DENIED.contains(name));
        let loader = Loader::new(defs);
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| {
                let mut message = String::new();
                let mut offset = None;
                for (_file, err) in errs {
                    match err {
                        jaq_core::load::Error::Io(items) => {
                            for (path, e) in items {
                                message.push_str(&format!("cannot import `{path}`: {e}; "));
                            }
                        }
                        jaq_core::load::Error::Lex(items) => {
                            for (expect, found) in items {
                                offset = offset.or_else(|| offset_in(code, found));
                                message.push_str(&format!(
                                    "expected {} near `{}`; ",
                                    expect.as_str(),
                                    found.chars().take(16).collect::<String>()
                                ));
                            }
                        }
                        jaq_core::load::Error::Parse(items) => {
                            for (expect, found) in items {
                                offset = offset.or_else(|| offset_in(code, found));
                                let near: String = found.chars().take(16).collect();
                                if near.is_empty() {
                                    message.push_str(&format!(
                                        "expected {} at end of program; ",
                                        expect.as_str()
                                    ));
                                } else {
                                    message.push_str(&format!(
                                        "expected {} near `{near}`; ",
                                        expect.as_str()
                                    ));
                                }
                            }
                        }
                    }
                }
                CompileError {
                    message: message.trim_end_matches("; ").to_string(),
                    offset,
                }
            })?;
        let filter = Compiler::default()
            .with_funs(funs)
            .with_global_vars(GLOBAL_VARS)
            .compile(modules)
            .map_err(|errs| {
                let mut message = String::new();
                let mut offset = None;
                for (_file, list) in errs {
                    for (name, undefined) in list {
                        offset = offset.or_else(|| offset_in(code, name));
                        message.push_str(&format!("undefined {} `{name}`; ", undefined.as_str()));
                    }
                }
                CompileError {
                    message: message.trim_end_matches("; ").to_string(),
                    offset,
                }
            })?;
        Ok(filter)
    }

    /// The program text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the program names `$meta` (its value is then built for each call).
    pub fn uses_meta(&self) -> bool {
        self.uses_meta
    }

    /// Whether the native evaluator runs this program (jaq still decides every run it cannot
    /// finish exactly).
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// Runs the program on `input`; returns the first output, or `None` when it yields nothing.
    /// The native evaluator answers when it can; jaq, the reference, answers everything else.
    pub fn run(&self, input: &Value, vars: Vars3<'_>) -> Result<Option<Value>, RunError> {
        self.run_read(input, false, vars)
    }

    /// [`Transform::run`] on an input `narrow`ly read: `true` when the reader vouched that
    /// it holds no integer past `i64` ([`crate::json_text::from_slice_narrow`]), which spares
    /// the walk of the answer looking for one.
    pub fn run_read(
        &self,
        input: &Value,
        narrow: bool,
        vars: Vars3<'_>,
    ) -> Result<Option<Value>, RunError> {
        self.run_lent(input, narrow, vars)
            .map(|out| out.map(Cow::into_owned))
    }

    /// [`Transform::run_read`], answering a program that is a path of member names into its
    /// input ([`Transform::at_path`]) with the input's own value, lent rather than copied.
    pub fn run_lent<'v>(
        &self,
        input: &'v Value,
        narrow: bool,
        vars: Vars3<'_>,
    ) -> Result<Option<Cow<'v, Value>>, RunError> {
        if let Some(v) = self.at_path(input, narrow) {
            return Ok(Some(Cow::Borrowed(v)));
        }
        if self.native.is_some()
            && let Some(out) = self.native_answer(&Doc::from_value(input), narrow, vars, || {
                Cow::Borrowed(input)
            })?
        {
            return Ok(out.map(Cow::Owned));
        }
        Ok(self.run_jaq(input, vars)?.map(Cow::Owned))
    }

    /// Writes the program's output on `input` as JSON text (`null` when it gives none), the
    /// text [`Transform::run`]'s value would give: a path into the input is written from the
    /// input in place, a native answer from the document it makes (no `serde_json` value is
    /// built for it), anything else from jaq's value.
    pub fn run_written(
        &self,
        input: &Value,
        vars: Vars3<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        if let Some(v) = self.at_path(input, false) {
            crate::json_text::write(v, out);
            return Ok(());
        }
        if self.native.is_some() {
            let doc = Doc::from_value(input);
            if let Some(answer) = self.run_doc_native(&doc, false, vars) {
                crate::json_text::write_doc(answer.as_ref().unwrap_or(&Doc::Null), out);
                return Ok(());
            }
        }
        let answer = self.run_lent(input, false, vars)?;
        crate::json_text::write(answer.as_deref().unwrap_or(&Value::Null), out);
        Ok(())
    }

    /// The member names when the program is a path into its input (`.a.b`) the native
    /// evaluator reads in place; `None` under the crosscheck, so that jaq's answer is the one
    /// compared.
    pub fn input_path(&self) -> Option<&[String]> {
        if *CROSSCHECK {
            return None;
        }
        self.native.as_deref()?.input_path()
    }

    /// The one output of a program that is a path of member names into its input (`.a.b`,
    /// [`super::fastjq::Program::input_path`]), read in place: no copy of the input and no
    /// run. `None` when the program is anything else, when a value on the way is neither an
    /// object nor `null` (jaq reports that error), when the answer holds an integer past
    /// `i64` (jaq's answer is a float; not looked for in a `narrow` input), and under the
    /// crosscheck: [`Transform::run_lent`] then runs the program.
    fn at_path<'v>(&self, input: &'v Value, narrow: bool) -> Option<&'v Value> {
        static NULL: Value = Value::Null;
        let path = self.native.as_deref()?.input_path()?;
        if *CROSSCHECK {
            return None;
        }
        let mut v = input;
        for key in path {
            v = match v {
                Value::Object(m) => m.get(key.as_str()).unwrap_or(&NULL),
                Value::Null => &NULL,
                _ => return None,
            };
        }
        (narrow || !has_wide_integer(v)).then_some(v)
    }

    /// [`Transform::run_read`] on a [`Doc`] (a backend body read in place by
    /// [`crate::json_text::read_borrowed`]): the same answer as on the `serde_json` value it
    /// stands for. jaq, when it must answer, gets that value.
    pub fn run_doc(
        &self,
        input: &Doc<'_>,
        narrow: bool,
        vars: Vars3<'_>,
    ) -> Result<Option<Value>, RunError> {
        if let Some(out) =
            self.native_answer(input, narrow, vars, || Cow::Owned(input.to_value()))?
        {
            return Ok(out);
        }
        self.run_jaq(&input.to_value(), vars)
    }

    /// The native evaluator's answer, when it gives one that is jaq's (`None`: jaq must
    /// answer). `value` is the input as a `serde_json` value, asked for only by the crosscheck.
    fn native_answer<'v>(
        &self,
        input: &Doc<'_>,
        narrow: bool,
        vars: Vars3<'_>,
        value: impl FnOnce() -> Cow<'v, Value>,
    ) -> Result<Option<Option<Value>>, RunError> {
        let Some(native) = &self.native else {
            return Ok(None);
        };
        let status = Value::from(vars.status);
        // jaq reads an integer past i64::MAX as a float; a native answer that carries one
        // exact is not jaq's, so jaq answers (found by the `transform` fuzz target). The
        // native evaluator makes no such integer itself (its literals, arithmetic and
        // `tonumber` stay within i64 or are floats), so an answer can only carry one
        // copied from the input or a global: with neither holding one, it has none.
        let may_copy_wide = !narrow || has_wide_integer(vars.args) || has_wide_integer(vars.meta);
        let Ok(out) = native.run_doc(input, [vars.args, &status, vars.meta]) else {
            return Ok(None);
        };
        if may_copy_wide && out.as_ref().is_some_and(has_wide_integer) {
            return Ok(None);
        }
        if *CROSSCHECK {
            let reference = self.run_jaq(&value(), vars);
            if reference.as_ref().ok() != Some(&out) {
                tracing::error!(transform = %self.source, "the native jq evaluator disagrees with jaq");
                return Err(RunError {
                    source_text: self.source.clone(),
                    message: format!(
                        "native evaluator answered {out:?}, jaq answered {reference:?}"
                    ),
                });
            }
        }
        Ok(Some(out))
    }

    /// The native evaluator's answer on `input` as a [`Doc`] that borrows from it, from the
    /// program and from the globals: nothing is converted. `None` when jaq must answer or the
    /// answer might not be jaq's; [`Transform::run_doc`] then decides (and reports).
    pub fn run_doc_native<'a>(
        &'a self,
        input: &Doc<'a>,
        narrow: bool,
        vars: Vars3<'a>,
    ) -> Option<Option<Doc<'a>>> {
        let native = self.native.as_deref()?;
        // As in `native_answer`: an exact integer past i64 is not jaq's answer.
        let may_copy_wide = !narrow || has_wide_integer(vars.args) || has_wide_integer(vars.meta);
        let status = Doc::Num(vars.status.into());
        let out = native
            .run_docs(input, [vars.args, vars.meta], status)
            .ok()?;
        if may_copy_wide && out.as_ref().is_some_and(doc_has_wide_integer) {
            return None;
        }
        if *CROSSCHECK
            && self.run_jaq(&input.to_value(), vars).ok() != Some(out.as_ref().map(Doc::to_value))
        {
            return None;
        }
        Some(out)
    }

    /// Runs the program with jaq only (the reference the native evaluator is tested against).
    pub fn run_jaq(&self, input: &Value, vars: Vars3<'_>) -> Result<Option<Value>, RunError> {
        let fail = |message: String| RunError {
            source_text: self.source.clone(),
            message,
        };
        let input = json_to_val(input);
        // Globals the program never names are not converted.
        let globals = [
            if self.uses_args {
                json_to_val(vars.args)
            } else {
                Val::Null
            },
            Val::from(vars.status as isize),
            if self.uses_meta {
                json_to_val(vars.meta)
            } else {
                Val::Null
            },
        ];
        let filter = match self.jaq.get() {
            Some(f) => f,
            None => match Self::jaq_filter(&self.program) {
                Ok(f) => self.jaq.get_or_init(|| f),
                Err(e) => return Err(fail(format!("cannot compile: {}", e.message))),
            },
        };
        let ctx = Ctx::<JustLut<Val>>::new(&filter.lut, Vars::new(globals));
        let mut out = filter.id.run((ctx, input)).map(unwrap_valr);
        match out.next() {
            None => Ok(None),
            Some(Err(e)) => {
                // `error("text")` displays as a JSON string: show the text itself.
                let text = e.to_string();
                let text = serde_json::from_str::<String>(&text).unwrap_or(text);
                Err(fail(text))
            }
            Some(Ok(v)) => val_to_json(&v).map(Some).map_err(fail),
        }
    }
}

/// Converts JSON to a jaq value without a serde round trip (this is on every call's hot path).
fn json_to_val(v: &Value) -> Val {
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => match n.as_i64().and_then(|i| isize::try_from(i).ok()) {
            Some(i) => Val::from(i),
            None => match n.as_f64() {
                Some(f) if n.is_f64() => Val::from(f),
                // Large integers keep every digit.
                _ => Val::Num(Num::from_dec_str(&n.to_string())),
            },
        },
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => Val::Arr(Rc::new(items.iter().map(json_to_val).collect())),
        Value::Object(obj) => {
            let mut m = Map::with_capacity_and_hasher(obj.len(), Default::default());
            for (k, v) in obj {
                m.insert(Val::from(k.clone()), json_to_val(v));
            }
            Val::obj(m)
        }
    }
}

/// Converts a jaq value to JSON; byte strings, non-string keys and non-finite numbers are not
/// JSON and are refused.
fn val_to_json(v: &Val) -> Result<Value, String> {
    Ok(match v {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(Num::Int(i)) => Value::from(*i as i64),
        Val::Num(Num::Float(f)) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("result holds a number that is not JSON: {f}"))?,
        Val::Num(n) => {
            let text = v.to_string();
            serde_json::from_str(&text)
                .map_err(|_| format!("result holds a number that is not JSON: {n:?}"))?
        }
        Val::TStr(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        Val::BStr(_) => return Err("result holds a byte string, which is not JSON".into()),
        Val::Arr(items) => Value::Array(items.iter().map(val_to_json).collect::<Result<_, _>>()?),
        Val::Obj(m) => {
            let mut out = serde_json::Map::with_capacity(m.len());
            for (k, v) in m.iter() {
                let Val::TStr(k) = k else {
                    return Err(format!(
                        "result has an object key that is not a string: {k}"
                    ));
                };
                out.insert(String::from_utf8_lossy(k).into_owned(), val_to_json(v)?);
            }
            Value::Object(out)
        }
    })
}

/// Does `v` hold an integer that is neither an i64 nor a float (past `i64::MAX`)?
/// [`has_wide_integer`] on a [`Doc`].
fn doc_has_wide_integer(v: &Doc<'_>) -> bool {
    match v {
        Doc::Num(n) => n.as_i64().is_none() && !n.is_f64(),
        Doc::Arr(a) => a.iter().any(doc_has_wide_integer),
        Doc::Obj(m) => m.iter().any(|(_, v)| doc_has_wide_integer(v)),
        _ => false,
    }
}

fn has_wide_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64().is_none() && !n.is_f64(),
        Value::Array(a) => a.iter().any(has_wide_integer),
        Value::Object(m) => m.values().any(has_wide_integer),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(code: &str, input: Value) -> Option<Value> {
        let t = Transform::compile(code).expect("compiles");
        let args = json!({"who": "alice"});
        t.run(
            &input,
            Vars3 {
                args: &args,
                status: 201,
                meta: &Value::Null,
            },
        )
        .expect("runs")
    }

    /// Found by the `transform` fuzz smoke: jaq reads 10000000000854346115 (past i64::MAX) as
    /// a float even for `.`; the answer must be jaq's, not the exact integer.
    #[test]
    fn an_integer_past_i64_gets_jaqs_answer() {
        let input: Value = serde_json::from_str("10000000000854346115").expect("JSON");
        let t = Transform::compile(".").expect("compiles");
        let vars = Vars3 {
            args: &Value::Null,
            status: 200,
            meta: &Value::Null,
        };
        assert_eq!(t.run(&input, vars), t.run_jaq(&input, vars));
        assert_eq!(run(".", json!({"n": 7})), Some(json!({"n": 7})));
    }

    /// The answer's walk for an integer past i64 is spared only when the input was read
    /// `narrow`; one in `$args` or `$meta` still gets jaq's answer, and an input the reader
    /// did not vouch for is checked as before.
    #[test]
    fn a_narrow_input_still_gets_jaqs_answer_for_a_wide_global() {
        let wide: Value = serde_json::from_str(r#"{"n": 10000000000854346115}"#).expect("JSON");
        let t = Transform::compile("{a: $args.n, b: $meta.n, c: .n}").expect("compiles");
        let input = json!({"n": 1});
        for (args, meta) in [(&wide, &Value::Null), (&Value::Null, &wide)] {
            let vars = Vars3 {
                args,
                status: 200,
                meta,
            };
            let reference = t.run_jaq(&input, vars);
            assert_eq!(t.run_read(&input, true, vars), reference);
            assert_ne!(
                reference.ok().flatten().and_then(|v| v.get("a").cloned()),
                Some(json!(10000000000854346115u64))
            );
        }
        let body = br#"{"n": 10000000000854346115}"#;
        let (input, narrow) = crate::json_text::from_slice_narrow(body).expect("JSON");
        assert!(!narrow);
        let vars = Vars3 {
            args: &Value::Null,
            status: 200,
            meta: &Value::Null,
        };
        assert_eq!(t.run_read(&input, narrow, vars), t.run_jaq(&input, vars));
        let (input, narrow) = crate::json_text::from_slice_narrow(br#"{"n": 7}"#).expect("JSON");
        assert!(narrow);
        assert_eq!(
            t.run_read(&input, narrow, vars).ok().flatten(),
            Some(json!({"a": null, "b": null, "c": 7}))
        );
    }

    /// A program that is a path of member names is answered in place, with jaq's answer on
    /// every input kind: the member, `null` through `null` or a missing member, jaq's error
    /// through anything else, and jaq's float for an integer past i64.
    #[test]
    fn member_paths_are_read_in_place_with_jaqs_answers() {
        let wide: Value =
            serde_json::from_str(r#"{"a": {"b": 10000000000854346115}}"#).expect("JSON");
        let inputs = [
            json!({"a": {"b": "x", "c": [1, 2]}, "d": 3}),
            json!({"a": {"b": null}}),
            json!({"a": null}),
            json!({}),
            json!(null),
            json!({"a": "text"}),
            json!({"a": [1, 2]}),
            json!({"a": 1.5}),
            json!([{"a": 1}]),
            json!("s"),
            json!(true),
            wide,
        ];
        let vars = Vars3 {
            args: &Value::Null,
            status: 200,
            meta: &Value::Null,
        };
        for code in [
            ".",
            ".a",
            ".a.b",
            ".a.c",
            ".d",
            ".missing.b",
            "def f: .; .a.b",
        ] {
            let t = Transform::compile(code).expect("compiles");
            for input in &inputs {
                let reference = t.run_jaq(input, vars);
                assert_eq!(
                    t.run_read(input, false, vars),
                    reference,
                    "{code} on {input}"
                );
                match t.at_path(input, false) {
                    // In place: the answer is the input's own value.
                    Some(v) => {
                        assert_eq!(Ok(Some(v.clone())), reference, "{code} on {input}");
                        assert!(
                            matches!(t.run_lent(input, false, vars), Ok(Some(Cow::Borrowed(_)))),
                            "{code} on {input}: lent, not copied"
                        );
                        let mut parts = code.trim_start_matches("def f: .; ").split('.');
                        parts.next();
                        let mut at = Some(input);
                        for k in parts.filter(|k| !k.is_empty()) {
                            at = at.and_then(|x| x.get(k));
                        }
                        if let Some(at) = at {
                            assert!(std::ptr::eq(v, at), "{code} on {input}: not read in place");
                        }
                    }
                    None => assert!(
                        reference.is_err()
                            || reference
                                .as_ref()
                                .ok()
                                .and_then(Option::as_ref)
                                .is_some_and(|v| has_wide_integer(input) && !has_wide_integer(v)),
                        "{code} on {input}: {reference:?} was not read in place"
                    ),
                }
            }
        }
        // Any other program runs.
        for code in [".a?", ".[0]", ".a | .b", "{a}", ".a | tostring", "$args.a"] {
            let t = Transform::compile(code).expect("compiles");
            assert!(
                t.at_path(&json!({"a": {"b": 1}}), false).is_none(),
                "{code}"
            );
        }
    }

    #[test]
    fn reshapes_objects_and_arrays() {
        let out = run(
            "{ id: .ref, slots: [ .slots[] | { id: .k, free: (.state == \"open\") } ] }",
            json!({"ref": "r1", "slots": [{"k": "a", "state": "open"}, {"k": "b", "state": "x"}]}),
        );
        assert_eq!(
            out,
            Some(
                json!({"id": "r1", "slots": [{"id": "a", "free": true}, {"id": "b", "free": false}]})
            )
        );
    }

    #[test]
    fn reads_global_variables() {
        assert_eq!(
            run("{who: $args.who, status: $status}", json!(null)),
            Some(json!({"who": "alice", "status": 201}))
        );
    }

    #[test]
    fn empty_yields_none() {
        assert_eq!(run("empty", json!(1)), None);
    }

    #[test]
    fn keeps_large_integers_and_unicode() {
        assert_eq!(
            run(".", json!({"n": 9007199254740993u64, "s": "café ☕"})),
            Some(json!({"n": 9007199254740993u64, "s": "café ☕"}))
        );
    }

    #[test]
    fn syntax_errors_carry_an_offset() {
        let err = Transform::compile("{ a: .b ").expect_err("must fail");
        assert!(err.message.contains("expected"), "{}", err.message);
        let err = Transform::compile(".a | nosuchfn").expect_err("must fail");
        assert!(
            err.message.contains("undefined filter `nosuchfn`"),
            "{}",
            err.message
        );
        assert_eq!(err.offset, Some(5));
    }

    #[test]
    fn the_sandbox_refuses_environment_clock_and_exit() {
        for code in [
            "env",
            "env.HOME",
            "$ENV",
            "halt",
            "halt_error",
            "now",
            "debug",
            "stderr",
            "input",
        ] {
            let err = Transform::compile(code).expect_err(code);
            assert!(err.message.contains("undefined"), "{code}: {}", err.message);
        }
        assert!(Transform::compile("tojson | length").is_ok());
    }

    #[test]
    fn runtime_errors_are_reported() {
        let t = Transform::compile(".a + 1").expect("compiles");
        let err = t
            .run(
                &json!({"a": "text"}),
                Vars3 {
                    args: &Value::Null,
                    status: 200,
                    meta: &Value::Null,
                },
            )
            .expect_err("string + number fails");
        assert!(err.message.contains("cannot"), "{}", err.message);
    }
}
