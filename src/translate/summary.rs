//! Tool summaries over `structuredContent` and the arguments, seen in place (MiniJinja or native).
//! It never changes what it reads or converts it up front, nor renders what MiniJinja would not.

use crate::json_doc::Doc;
use minijinja::value::{Enumerator, Object, ObjectRepr, Value as Jv};
use serde_json::Value;
use std::sync::Arc;

/// One step from a root JSON value to the value a view stands for.
#[derive(Debug, Clone)]
enum Seg {
    Key(Arc<str>),
    Index(usize),
}

/// A JSON value inside `root`, at `path`, as a MiniJinja object (maps and sequences only;
/// scalars are converted when reached).
#[derive(Debug)]
struct View {
    root: Arc<Value>,
    path: Vec<Seg>,
}

impl View {
    fn target(&self) -> &Value {
        let mut cur: &Value = &self.root;
        for seg in &self.path {
            let next = match (seg, cur) {
                (Seg::Key(k), Value::Object(m)) => m.get(&**k),
                (Seg::Index(i), Value::Array(a)) => a.get(*i),
                _ => None,
            };
            cur = next.unwrap_or(&Value::Null);
        }
        cur
    }

    fn child(&self, seg: Seg, v: &Value) -> Jv {
        match v {
            Value::Object(_) | Value::Array(_) => {
                let mut path = Vec::with_capacity(self.path.len() + 1);
                path.extend(self.path.iter().cloned());
                path.push(seg);
                Jv::from_object(View {
                    root: self.root.clone(),
                    path,
                })
            }
            scalar => scalar_value(scalar),
        }
    }
}

fn scalar_value(v: &Value) -> Jv {
    match v {
        Value::Null => Jv::from(()),
        Value::Bool(b) => Jv::from(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Jv::from(i),
            (None, Some(u)) => Jv::from(u),
            _ => Jv::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Jv::from(s.as_str()),
        // Containers are wrapped by `View::child` and `view`, never reach here.
        Value::Object(_) | Value::Array(_) => Jv::from(()),
    }
}

impl Object for View {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.target() {
            Value::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        match self.target() {
            Value::Object(m) => {
                let k = key.as_str()?;
                m.get(k).map(|v| self.child(Seg::Key(Arc::from(k)), v))
            }
            Value::Array(a) => {
                let i = usize::try_from(key.as_i64()?).ok()?;
                a.get(i).map(|v| self.child(Seg::Index(i), v))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.target() {
            Value::Object(m) => {
                Enumerator::Values(m.keys().map(|k| Jv::from(k.as_str())).collect())
            }
            Value::Array(a) => Enumerator::Seq(a.len()),
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.target() {
            Value::Object(m) => Some(m.len()),
            Value::Array(a) => Some(a.len()),
            _ => Some(0),
        }
    }
}

fn view(root: Arc<Value>) -> Jv {
    match &*root {
        Value::Object(_) | Value::Array(_) => Jv::from_object(View {
            root,
            path: Vec::new(),
        }),
        scalar => scalar_value(scalar),
    }
}

/// The template's top level: the fields of `structuredContent`, plus `args`.
#[derive(Debug)]
struct Top {
    content: Arc<Value>,
    args: Arc<Value>,
}

impl Object for Top {
    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let k = key.as_str()?;
        if k == "args" {
            return Some(view(self.args.clone()));
        }
        let v = self.content.as_object()?.get(k)?;
        Some(
            View {
                root: self.content.clone(),
                path: Vec::new(),
            }
            .child(Seg::Key(Arc::from(k)), v),
        )
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<Jv> = self
            .content
            .as_object()
            .map(|m| m.keys().map(|k| Jv::from(k.as_str())).collect())
            .unwrap_or_default();
        keys.push(Jv::from("args"));
        Enumerator::Values(keys)
    }
}

/// A tool's compiled summary: the MiniJinja template, plus a native plan when the template is
/// inside the subset [`Plan`] renders.
#[derive(Debug, Clone)]
pub struct Summary {
    env: minijinja::Environment<'static>,
    plan: Option<Plan>,
    /// Room reserved for a rendered text: the source's length and some, about what a
    /// summary renders to, so the text is not regrown as it is written.
    capacity: usize,
}

impl Summary {
    /// Compiles `src` (MiniJinja syntax, undefined values lenient).
    pub fn compile(src: &str) -> Result<Summary, minijinja::Error> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        env.add_template_owned("summary", src.to_string())?;
        Ok(Summary {
            env,
            plan: Plan::parse(src),
            capacity: src.len() + 64,
        })
    }
}

/// Renders a tool's summary; `content` is lent to the template and given back unchanged. The
/// native plan renders it when it can (the same text: tests compare it with MiniJinja's);
/// anything it does not model (a float, an undefined value, a container printed whole) goes
/// to MiniJinja.
pub fn render(s: &Summary, content: &mut Value, args: &Value) -> Result<String, minijinja::Error> {
    if let Some(plan) = &s.plan {
        let mut out = String::with_capacity(s.capacity);
        if plan
            .render(Content::Tree(content), args, &mut out)
            .is_some()
        {
            return Ok(out);
        }
    }
    render_minijinja(&s.env, content, args)
}

/// [`render`]'s text for `content` seen as a [`Doc`], from the native plan; `None` when the
/// summary has none or it meets a value it does not model (then [`render`] must answer, on the
/// content as a tree, with MiniJinja's text or error).
pub fn render_doc(s: &Summary, content: &Doc<'_>, args: &Value) -> Option<String> {
    let mut out = String::with_capacity(s.capacity);
    s.plan
        .as_ref()?
        .render(Content::Doc(content), args, &mut out)?;
    Some(out)
}

/// Renders with MiniJinja.
fn render_minijinja(
    env: &minijinja::Environment<'static>,
    content: &mut Value,
    args: &Value,
) -> Result<String, minijinja::Error> {
    let shared = Arc::new(std::mem::take(content));
    let top = Arc::new(Top {
        content: shared.clone(),
        args: Arc::new(args.clone()),
    });
    let rendered = env
        .get_template("summary")
        .and_then(|t| t.render(Jv::from_dyn_object(top)));
    // The template's values are gone once rendering returned, so the content is ours again.
    *content = Arc::try_unwrap(shared).unwrap_or_else(|still_shared| (*still_shared).clone());
    rendered
}

/// Names MiniJinja resolves without the context (keywords and default globals): left to it.
const RESERVED: [&str; 22] = [
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
    "not",
    "and",
    "or",
    "in",
    "is",
    "if",
    "else",
    "elif",
    "for",
    "loop",
    "self",
    "range",
    "dict",
    "namespace",
    "debug",
    "super",
];

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    /// `{{ path }}`, or `{{ path | length }}` when the flag is set.
    Print(Vec<Seg>, bool),
    /// `{% if path %}…{% endif %}`.
    If(Vec<Seg>, Vec<Node>),
}

/// The subset of MiniJinja rendered natively: text, `{{ a.b[0].c }}`, `{{ a | length }}` and
/// `{% if a %}…{% endif %}` (nested), no whitespace control, no comments, no trailing newline
/// (which MiniJinja drops). Parsing is strict: anything else leaves the template to MiniJinja.
#[derive(Debug, Clone)]
pub struct Plan(Vec<Node>);

impl Plan {
    fn parse(src: &str) -> Option<Plan> {
        if src.ends_with('\n') {
            return None;
        }
        let mut rest = src;
        let nodes = block(&mut rest, false)?;
        rest.is_empty().then_some(Plan(nodes))
    }

    /// Appends the rendered text; `None` when a value is outside what it models.
    fn render(&self, content: Content<'_>, args: &Value, out: &mut String) -> Option<()> {
        nodes(&self.0, content, args, out)
    }
}

/// Nodes up to the end of `rest`, or up to `{% endif %}` (consumed) when `in_if`.
fn block(rest: &mut &str, in_if: bool) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    loop {
        let Some(at) = tag_start(rest) else {
            if in_if {
                return None;
            }
            if !rest.is_empty() {
                out.push(Node::Text(rest.to_string()));
            }
            *rest = "";
            return Some(out);
        };
        if at > 0 {
            out.push(Node::Text(rest.get(..at)?.to_string()));
        }
        let tag = rest.get(at..)?;
        let (open, close) = (
            tag.get(..2)?,
            if tag.starts_with("{{") { "}}" } else { "%}" },
        );
        if open == "{#" {
            return None;
        }
        let end = tag.find(close)?;
        let inner = tag.get(2..end)?;
        *rest = tag.get(end + 2..)?;
        if inner.starts_with(['-', '+']) || inner.ends_with(['-', '+']) {
            return None;
        }
        if open == "{{" {
            let (path, length) = match inner.split_once('|') {
                Some((p, f)) if f.trim() == "length" => (p, true),
                Some(_) => return None,
                None => (inner, false),
            };
            out.push(Node::Print(path_of(path.trim())?, length));
            continue;
        }
        let mut words = inner.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("if"), Some(p), None) => {
                let path = path_of(p)?;
                out.push(Node::If(path, block(rest, true)?));
            }
            (Some("endif"), None, None) if in_if => return Some(out),
            _ => return None,
        }
    }
}

/// Where the next `{{`, `{%` or `{#` starts.
fn tag_start(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(1)).find(|&i| b[i] == b'{' && matches!(b[i + 1], b'{' | b'%' | b'#'))
}

/// `name(.name | [digits])*`, with no spaces.
fn path_of(p: &str) -> Option<Vec<Seg>> {
    let ident_len = |s: &str| {
        let n = s
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        (n > 0 && !s.as_bytes()[0].is_ascii_digit()).then_some(n)
    };
    let n = ident_len(p)?;
    let first = p.get(..n)?;
    if RESERVED.contains(&first) {
        return None;
    }
    let mut steps = vec![Seg::Key(Arc::from(first))];
    let mut rest = p.get(n..)?;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let n = ident_len(r)?;
            steps.push(Seg::Key(Arc::from(r.get(..n)?)));
            rest = r.get(n..)?;
        } else if let Some(r) = rest.strip_prefix('[') {
            let (digits, after) = r.split_once(']')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            steps.push(Seg::Index(digits.parse().ok()?));
            rest = after;
        } else {
            return None;
        }
    }
    Some(steps)
}

/// The structured content a plan reads: a tree, or a [`Doc`].
#[derive(Clone, Copy)]
enum Content<'c> {
    Tree(&'c Value),
    Doc(&'c Doc<'c>),
}

/// What a plan needs of the value it reached.
enum Leaf<'x> {
    Null,
    Bool(bool),
    Num(&'x serde_json::Number),
    Str(&'x str),
    /// An array or an object, with its length.
    Container(usize),
}

fn leaf_of(v: &Value) -> Leaf<'_> {
    match v {
        Value::Null => Leaf::Null,
        Value::Bool(b) => Leaf::Bool(*b),
        Value::Number(n) => Leaf::Num(n),
        Value::String(s) => Leaf::Str(s),
        Value::Array(a) => Leaf::Container(a.len()),
        Value::Object(m) => Leaf::Container(m.len()),
    }
}

fn doc_leaf_of<'x>(v: &'x Doc<'_>) -> Leaf<'x> {
    match v {
        Doc::Null => Leaf::Null,
        Doc::Bool(b) => Leaf::Bool(*b),
        Doc::Num(n) => Leaf::Num(n),
        Doc::Str(s) => Leaf::Str(s),
        Doc::Arr(a) => Leaf::Container(a.len()),
        Doc::Obj(m) => Leaf::Container(m.len()),
    }
}

/// The value at `steps` under `v`.
fn walk<'a>(mut cur: &'a Value, steps: &[Seg]) -> Option<&'a Value> {
    for step in steps {
        cur = match step {
            Seg::Key(k) => cur.as_object()?.get(&**k)?,
            Seg::Index(i) => cur.as_array()?.get(*i)?,
        };
    }
    Some(cur)
}

/// [`walk`] in a [`Doc`].
fn walk_doc<'a, 'd>(mut cur: &'a Doc<'d>, steps: &[Seg]) -> Option<&'a Doc<'d>> {
    for step in steps {
        cur = match (step, cur) {
            (Seg::Key(k), Doc::Obj(m)) => crate::json_doc::member(m, k)?,
            (Seg::Index(i), Doc::Arr(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The value at `path`: `args` is the arguments, any other first name a member of the content
/// (as the template's top level sees them). `None` for anything undefined.
fn lookup<'a>(path: &[Seg], content: Content<'a>, args: &'a Value) -> Option<Leaf<'a>> {
    let (first, rest) = path.split_first()?;
    match (first, content) {
        (Seg::Key(k), _) if &**k == "args" => walk(args, rest).map(leaf_of),
        (Seg::Key(k), Content::Tree(c)) => walk(c.as_object()?.get(&**k)?, rest).map(leaf_of),
        (Seg::Key(k), Content::Doc(Doc::Obj(m))) => {
            walk_doc(crate::json_doc::member(m, k)?, rest).map(doc_leaf_of)
        }
        _ => None,
    }
}

/// An integer's value; `None` for a float, which MiniJinja prints and tests its own way.
fn integer(n: &serde_json::Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn nodes(list: &[Node], content: Content<'_>, args: &Value, out: &mut String) -> Option<()> {
    for node in list {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Print(path, length) => {
                let v = lookup(path, content, args)?;
                let n = match (v, length) {
                    (Leaf::Str(s), false) => {
                        out.push_str(s);
                        continue;
                    }
                    (Leaf::Num(n), false) => integer(n)?,
                    (Leaf::Str(s), true) => s.chars().count() as i128,
                    (Leaf::Container(len), true) => len as i128,
                    _ => return None,
                };
                out.push_str(itoa::Buffer::new().format(n));
            }
            Node::If(path, body) => {
                let truth = match lookup(path, content, args)? {
                    Leaf::Null => false,
                    Leaf::Bool(b) => b,
                    Leaf::Num(n) => integer(n)? != 0,
                    Leaf::Str(s) => !s.is_empty(),
                    Leaf::Container(len) => len > 0,
                };
                if truth {
                    nodes(body, content, args, out)?;
                }
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn env(src: &str) -> Summary {
        Summary::compile(src).expect("template compiles")
    }

    #[test]
    fn reads_fields_lengths_indexes_loops_and_args() {
        let mut sc = json!({"service_id": "M-60", "slots": [{"start": "09:00"}, {"start": "11:00"}],
                            "n": 3, "f": 1.5, "ok": true, "none": null, "nested": {"a": {"b": "deep"}}});
        let before = sc.clone();
        let out = render(
            &env(
                "{{ service_id }} {{ slots | length }} {{ slots[0].start }} {{ slots[-1].start }} \
                  {% for s in slots %}[{{ s.start }}]{% endfor %} {{ n + 1 }} {{ f }} {{ ok }} \
                  {{ none is none }} {{ nested.a.b }} {{ args.who }} {{ missing is undefined }} \
                  {% for k in nested %}{{ k }}{% endfor %} {{ nested | length }}",
            ),
            &mut sc,
            &json!({"who": "ana"}),
        )
        .expect("renders");
        assert_eq!(
            out,
            "M-60 2 09:00 11:00 [09:00][11:00] 4 1.5 True True deep ana True a 1"
        );
        assert_eq!(sc, before, "the content is given back unchanged");
    }

    /// The native plan's text, if it renders, must be MiniJinja's; returns whether it rendered.
    fn renders_alike(src: &str, content: &Value, args: &Value) -> bool {
        let s = env(src);
        let reference = render_minijinja(&s.env, &mut content.clone(), args);
        let Some(plan) = &s.plan else {
            return false;
        };
        let mut out = String::new();
        if plan
            .render(Content::Tree(content), args, &mut out)
            .is_none()
        {
            assert_eq!(render_doc(&s, &Doc::from_value(content), args), None);
            return false;
        }
        // The plan reads a Doc as it reads the tree it stands for.
        assert_eq!(
            render_doc(&s, &Doc::from_value(content), args).as_deref(),
            Some(out.as_str())
        );
        assert_eq!(
            Ok(out),
            reference.map_err(|e| e.to_string()),
            "{src} on {content}"
        );
        true
    }

    const NATIVE: [&str; 13] = [
        "Found {{ slots | length }} available slot(s) for {{ service_id }} from {{ args.start_date }} to {{ args.end_date }}{% if slots %}; first: {{ slots[0].start }}{% endif %}.",
        "{{ a }}",
        "x{{a.b}}y{{ a.b | length }}z",
        "{%if a%}[{% if b %}{{ b }}{% endif %}]{%endif%} {{ args.end_date }}",
        "{ not a tag } }} %} {{ n }}",
        "{{ slots[1].start }}{{ s|length }}",
        "",
        "plain text only",
        "{% if a %}a{% endif %}",
        "{% if b %}b{% endif %}",
        "{% if n %}n{% endif %}",
        "{% if slots %}l{% endif %}",
        "{{ args.start_date }}",
    ];

    #[test]
    fn native_plans_render_what_minijinja_renders() {
        for src in NATIVE {
            assert!(env(src).plan.is_some(), "{src} should be native");
        }
        for src in [
            "{{ a }}\n",
            "{{- a }}",
            "{{ a -}}",
            "{# c #}{{ a }}",
            "{% for s in slots %}{{ s }}{% endfor %}",
            "{% if a %}x{% else %}y{% endif %}",
            "{% if a %}x",
            "{% endif %}",
            "{{ a | upper }}",
            "{{ a + 1 }}",
            "{{ slots[-1] }}",
            "{{ true }}",
            "{{ range }}",
            "{{ a['b'] }}",
            "{{ 1a }}",
        ] {
            // Some do not compile at all; none may be taken natively.
            let native = Summary::compile(src).is_ok_and(|s| s.plan.is_some());
            assert!(!native, "{src} should be MiniJinja's");
        }
        let args = json!({"start_date": "2026-12-01", "end_date": "2026-12-02"});
        let contents = [
            json!({"service_id": "M-60", "slots": [{"start": "09:00"}, {"start": "11:00"}],
                   "a": "é€😀", "b": 0, "n": 7, "s": "héllo"}),
            json!({"service_id": "M-60", "slots": [], "a": {"b": "deep"}, "b": true, "n": -3}),
            json!({"service_id": 18446744073709551615u64, "slots": {"k": 1}, "a": [], "b": "", "n": null}),
            json!({"a": 1.5, "b": false, "n": false, "slots": [{"start": 1}, {"start": 2.5}]}),
            json!({"a": {"b": [1, 2, 3]}, "b": {"x": null}, "s": [1], "args": "shadowed?"}),
            json!({"a": {}, "b": "", "n": 0, "s": "", "slots": {}}),
            json!({"a": {"k": 0}, "b": "x", "n": 2, "s": "", "slots": [[]]}),
            json!([1, 2]),
            json!(null),
        ];
        let mut rendered = 0;
        for src in NATIVE {
            for content in &contents {
                rendered += usize::from(renders_alike(src, content, &args));
            }
        }
        assert!(
            rendered >= 20,
            "the native plan rendered only {rendered} cases"
        );
    }

    fn json_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z é{}%#]{0,8}".prop_map(Value::String),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        json_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[abns]|start|slots", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn any_content_renders_as_minijinja_renders(content in json_value(), args in json_value()) {
            for src in NATIVE {
                renders_alike(src, &content, &args);
            }
        }
    }

    #[test]
    fn template_errors_are_reported_and_the_content_kept() {
        let mut sc = json!({"a": 1});
        let err = render(&env("{{ a | nosuchfilter }}"), &mut sc, &json!({}));
        assert!(err.is_err());
        assert_eq!(sc, json!({"a": 1}));
    }
}
