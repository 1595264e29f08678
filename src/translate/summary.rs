//! Renders a tool's MiniJinja summary over `structuredContent` and the arguments, seen in place.
//! It never changes the result it reads, and never converts it up front (children are wrapped on access).

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

/// Renders the environment's `summary` template; `content` is lent to the template and given
/// back unchanged.
pub fn render(
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(src: &str) -> minijinja::Environment<'static> {
        let mut env = minijinja::Environment::new();
        env.add_template_owned("summary", src.to_string())
            .expect("template compiles");
        env
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

    #[test]
    fn template_errors_are_reported_and_the_content_kept() {
        let mut sc = json!({"a": 1});
        let err = render(&env("{{ a | nosuchfilter }}"), &mut sc, &json!({}));
        assert!(err.is_err());
        assert_eq!(sc, json!({"a": 1}));
    }
}
