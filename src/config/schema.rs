//! JSON Schema sources and bundling: every `$ref` (local, relative file, or absolute `$id` mapped
//! to a local file) is resolved at load into one self-contained schema with a `$defs` table.
//! It never fetches anything over the network, and an unresolvable reference never panics: it is
//! reported with the document and pointer and replaced by an open schema.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use url::Url;

/// A reference that could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The document (URI) holding the `$ref`.
    pub document: String,
    /// JSON pointer of the `$ref` inside that document, when known.
    pub pointer: String,
    /// The `$ref` value as written.
    pub reference: String,
    /// Why it failed.
    pub reason: String,
}

/// Loaded schema documents, by absolute URI (no fragment).
#[derive(Default)]
pub struct Sources {
    docs: HashMap<String, Arc<Value>>,
    /// `$id` prefix -> local file or folder, longest prefix first.
    id_map: Vec<(String, PathBuf)>,
    /// `$id`-based folder -> file folder, learned from loaded files whose `$id` differs from
    /// their location (so relative references inside them also work on disk).
    aliases: Vec<(String, String)>,
}

fn strip_fragment(u: &Url) -> String {
    let mut u = u.clone();
    u.set_fragment(None);
    u.to_string()
}

fn dir_of(uri: &str) -> String {
    match uri.rfind('/') {
        Some(i) => uri[..=i].to_string(),
        None => uri.to_string(),
    }
}

impl Sources {
    /// Adds an id-to-file mapping; `prefix` ending in `/` maps a folder.
    pub fn map_id(&mut self, prefix: &str, path: PathBuf) {
        self.id_map.push((prefix.to_string(), path));
        self.id_map.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
    }

    /// Local files loaded so far (for the hot-reload watcher).
    pub fn local_files(&self) -> Vec<PathBuf> {
        self.docs
            .keys()
            .filter_map(|uri| url::Url::parse(uri).ok())
            .filter(|u| u.scheme() == "file")
            .filter_map(|u| u.to_file_path().ok())
            .collect()
    }

    /// Registers an already parsed document under its URI.
    pub fn insert(&mut self, uri: &str, doc: Arc<Value>) {
        self.docs.insert(uri.to_string(), doc);
    }

    /// Loads (or returns the cached) document at an absolute URI without fragment.
    pub fn load(&mut self, uri: &str) -> Result<Arc<Value>, String> {
        if let Some(doc) = self.docs.get(uri) {
            return Ok(doc.clone());
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(rest) = uri.strip_prefix("file://") {
            candidates.push(PathBuf::from(
                percent_encoding::percent_decode_str(rest)
                    .decode_utf8_lossy()
                    .into_owned(),
            ));
        }
        for (prefix, path) in &self.id_map {
            if prefix.ends_with('/') {
                if let Some(rest) = uri.strip_prefix(prefix.as_str()) {
                    candidates.push(path.join(rest));
                }
            } else if uri == prefix {
                candidates.push(path.clone());
            }
        }
        for (id_dir, file_dir) in &self.aliases {
            if let Some(rest) = uri.strip_prefix(id_dir.as_str())
                && let Some(dir) = file_dir.strip_prefix("file://")
            {
                candidates.push(Path::new(dir).join(rest));
            }
        }
        if candidates.is_empty() {
            return Err(format!(
                "no local file for `{uri}`: portico never fetches schemas over the network; map it with `schema_ids`"
            ));
        }
        let mut last_err = String::new();
        for path in candidates {
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    let doc: Value = parse_document(&path, &text)?;
                    let doc = Arc::new(doc);
                    self.docs.insert(uri.to_string(), doc.clone());
                    // A file whose `$id` differs from where it was found: remember both.
                    let file_uri = Url::from_file_path(
                        std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()),
                    )
                    .map(|u| u.to_string())
                    .unwrap_or_default();
                    if let Some(id) = doc.get("$id").and_then(Value::as_str) {
                        if id != uri {
                            self.docs.insert(id.to_string(), doc.clone());
                        }
                        if !file_uri.is_empty() && dir_of(id) != dir_of(&file_uri) {
                            self.aliases.push((dir_of(id), dir_of(&file_uri)));
                        }
                    }
                    return Ok(doc);
                }
                Err(e) => last_err = format!("cannot read {}: {e}", path.display()),
            }
        }
        Err(last_err)
    }
}

/// Parses a JSON or YAML document by file extension.
pub fn parse_document(path: &Path, text: &str) -> Result<Value, String> {
    let is_yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml") | Some("yml")
    );
    if is_yaml {
        serde_saphyr::from_str(text).map_err(|e| format!("{}: {e}", path.display()))
    } else {
        serde_json::from_str(text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Builds one self-contained schema out of a node that lives in document `base`.
pub struct Bundler<'s> {
    sources: &'s mut Sources,
    /// absolute ref (with fragment) -> `$defs` key
    keys: HashMap<String, String>,
    defs: IndexMap<String, Value>,
    queue: Vec<(String, Url, String, String)>,
    pub unresolved: Vec<Unresolved>,
}

impl<'s> Bundler<'s> {
    pub fn new(sources: &'s mut Sources) -> Self {
        Bundler {
            sources,
            keys: HashMap::new(),
            defs: IndexMap::new(),
            queue: Vec::new(),
            unresolved: Vec::new(),
        }
    }

    /// Bundles `node` (found at `pointer` inside the document `base`) on its own.
    pub fn bundle(mut self, node: &Value, base: &Url, pointer: &str) -> (Value, Vec<Unresolved>) {
        let out = self.add(node, base, pointer);
        self.finish(out)
    }

    /// Rewrites one schema node; its references are queued for the shared `$defs` table.
    pub fn add(&mut self, node: &Value, base: &Url, pointer: &str) -> Value {
        self.rewrite(node, base, pointer)
    }

    /// Resolves everything queued and attaches `$defs` to `root`.
    pub fn finish(mut self, mut out: Value) -> (Value, Vec<Unresolved>) {
        while let Some((key, abs, doc, ptr)) = self.queue.pop() {
            let def = match self.resolve(&abs) {
                Ok((target, target_base)) => {
                    self.rewrite(&target, &target_base, abs.fragment().unwrap_or(""))
                }
                Err(reason) => {
                    let reference = abs.to_string();
                    self.unresolved.push(Unresolved {
                        document: doc,
                        pointer: ptr,
                        reference,
                        reason,
                    });
                    Value::Object(Map::new())
                }
            };
            self.defs.insert(key, def);
        }
        if !self.defs.is_empty() {
            let mut defs: Map<String, Value> = self.defs.into_iter().collect();
            match &mut out {
                Value::Object(obj) => {
                    if let Some(Value::Object(existing)) = obj.remove("$defs") {
                        for (k, v) in existing {
                            defs.entry(k).or_insert(v);
                        }
                    }
                    obj.insert("$defs".into(), Value::Object(defs));
                }
                other => {
                    let inner = std::mem::take(other);
                    let mut obj = Map::new();
                    obj.insert("allOf".into(), Value::Array(vec![inner]));
                    obj.insert("$defs".into(), Value::Object(defs));
                    *other = Value::Object(obj);
                }
            }
        }
        (out, self.unresolved)
    }

    /// Follows `$ref`s at the root of `node` (at most 16) and returns the target and its base.
    pub fn deref_root(&mut self, node: &Value, base: &Url) -> Result<(Value, Url, String), String> {
        let mut cur = node.clone();
        let mut base = base.clone();
        let mut pointer = String::new();
        for _ in 0..16 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                return Ok((cur, base, pointer));
            };
            let abs = base.join(r).map_err(|e| format!("bad `$ref` `{r}`: {e}"))?;
            let (target, target_base) = self.resolve(&abs)?;
            pointer = abs.fragment().unwrap_or("").to_string();
            cur = target;
            base = target_base;
        }
        Err("too many chained `$ref`s".into())
    }

    /// Finds the node an absolute reference points at, and the base URI that applies inside it.
    fn resolve(&mut self, abs: &Url) -> Result<(Value, Url), String> {
        let doc_uri = strip_fragment(abs);
        let doc = self.sources.load(&doc_uri)?;
        let doc_base = doc
            .get("$id")
            .and_then(Value::as_str)
            .and_then(|id| Url::parse(id).ok())
            .unwrap_or_else(|| abs.clone());
        let fragment = abs.fragment().unwrap_or("");
        let fragment = percent_encoding::percent_decode_str(fragment)
            .decode_utf8_lossy()
            .into_owned();
        if fragment.is_empty() {
            return Ok(((*doc).clone(), doc_base));
        }
        if fragment.starts_with('/') {
            return doc
                .pointer(&fragment)
                .cloned()
                .map(|v| (v, doc_base))
                .ok_or_else(|| format!("`#{fragment}` does not exist in {doc_uri}"));
        }
        find_anchor(&doc, &fragment)
            .map(|v| (v, doc_base))
            .ok_or_else(|| format!("no `$anchor: {fragment}` in {doc_uri}"))
    }

    fn key_for(&mut self, abs: &Url, doc: &str, ptr: &str) -> String {
        let id = abs.to_string();
        if let Some(k) = self.keys.get(&id) {
            return k.clone();
        }
        let tail: String = {
            let path = abs
                .path()
                .rsplit('/')
                .next()
                .unwrap_or("")
                .trim_end_matches(".json");
            let frag = abs.fragment().unwrap_or("");
            let frag = frag.rsplit('/').next().unwrap_or(frag);
            let raw = if frag.is_empty() {
                path.to_string()
            } else if path.is_empty() {
                frag.to_string()
            } else {
                format!("{path}.{frag}")
            };
            raw.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let mut key = if tail.is_empty() {
            "def".to_string()
        } else {
            tail
        };
        let taken: std::collections::HashSet<&String> = self.keys.values().collect();
        if taken.contains(&key) {
            let mut n = 2;
            while taken.contains(&format!("{key}_{n}")) {
                n += 1;
            }
            key = format!("{key}_{n}");
        }
        self.keys.insert(id, key.clone());
        self.queue
            .push((key.clone(), abs.clone(), doc.to_string(), ptr.to_string()));
        key
    }

    /// Rewrites an array of schemas, element by element.
    fn rewrite_each(&mut self, items: &[Value], base: &Url, pointer: &str) -> Value {
        Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, sub)| self.rewrite(sub, base, &format!("{pointer}/{i}")))
                .collect(),
        )
    }

    fn rewrite(&mut self, node: &Value, base: &Url, pointer: &str) -> Value {
        let Value::Object(obj) = node else {
            // `true` / `false` schemas (or junk, which the validator compiler will report).
            return node.clone();
        };
        let mut base = base.clone();
        if let Some(id) = obj.get("$id").and_then(Value::as_str)
            && let Ok(u) = base.join(id)
        {
            base = u;
        }
        let esc = |k: &str| k.replace('~', "~0").replace('/', "~1");
        let mut out = Map::new();
        for (k, v) in obj {
            let child_ptr = format!("{pointer}/{}", esc(k));
            match k.as_str() {
                "$id" | "$schema" | "$defs" | "definitions" | "$anchor" => {}
                "$ref" => match v.as_str() {
                    Some(r) => match base.join(r) {
                        Ok(abs) => {
                            let key = self.key_for(&abs, base.as_str(), &child_ptr);
                            out.insert("$ref".into(), Value::String(format!("#/$defs/{key}")));
                        }
                        Err(e) => self.unresolved.push(Unresolved {
                            document: base.to_string(),
                            pointer: child_ptr,
                            reference: r.to_string(),
                            reason: format!("not a valid URI reference: {e}"),
                        }),
                    },
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                },
                // Maps of name -> schema.
                "properties" | "patternProperties" | "dependentSchemas" => match v {
                    Value::Object(map) => {
                        let mut m = Map::new();
                        for (name, sub) in map {
                            let p = format!("{child_ptr}/{}", esc(name));
                            m.insert(name.clone(), self.rewrite(sub, &base, &p));
                        }
                        out.insert(k.clone(), Value::Object(m));
                    }
                    other => {
                        out.insert(k.clone(), other.clone());
                    }
                },
                // Arrays of schemas.
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => match v {
                    Value::Array(items) => {
                        let items = self.rewrite_each(items, &base, &child_ptr);
                        out.insert(k.clone(), items);
                    }
                    other => {
                        out.insert(k.clone(), other.clone());
                    }
                },
                // Single schemas (`items` may be an array in older drafts).
                "items"
                | "additionalItems"
                | "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema" => match v {
                    Value::Array(items) => {
                        let items = self.rewrite_each(items, &base, &child_ptr);
                        out.insert(k.clone(), items);
                    }
                    sub => {
                        out.insert(k.clone(), self.rewrite(sub, &base, &child_ptr));
                    }
                },
                // Everything else (type, enum, const, examples, annotations, extensions) verbatim.
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Object(out)
    }
}

fn find_anchor(v: &Value, name: &str) -> Option<Value> {
    match v {
        Value::Object(obj) => {
            if obj.get("$anchor").and_then(Value::as_str) == Some(name) {
                return Some(v.clone());
            }
            obj.values().find_map(|c| find_anchor(c, name))
        }
        Value::Array(items) => items.iter().find_map(|c| find_anchor(c, name)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("portico-schema-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn bundles_local_file_and_id_refs() {
        let d = tmpdir("bundle");
        std::fs::write(
            d.join("money.json"),
            r##"{"$id":"https://ex.dev/schemas/money.json","$defs":{"Money":{"type":"object","required":["amount"],"properties":{"amount":{"type":"integer"},"cur":{"$ref":"#/$defs/Cur"}}},"Cur":{"type":"string","minLength":3}}}"##,
        )
        .unwrap();
        let doc = json!({"components": {"schemas": {"Price": {"$ref": "https://ex.dev/schemas/money.json#/$defs/Money"}}}});
        let mut sources = Sources::default();
        sources.map_id("https://ex.dev/schemas/", d.clone());
        let base = Url::from_file_path(d.join("api.json")).unwrap();
        sources.insert(base.as_str(), Arc::new(doc));
        let node =
            json!({"type":"object","properties":{"price":{"$ref":"#/components/schemas/Price"}}});
        let (schema, unresolved) = Bundler::new(&mut sources).bundle(&node, &base, "/x");
        assert!(unresolved.is_empty(), "{unresolved:?}");
        let v = jsonschema::validator_for(&schema).expect("valid schema");
        assert!(v.is_valid(&json!({"price": {"amount": 5, "cur": "EUR"}})));
        assert!(!v.is_valid(&json!({"price": {"amount": "5"}})));
        assert!(!v.is_valid(&json!({"price": {"amount": 5, "cur": "E"}})));
    }

    #[test]
    fn reports_unresolvable_refs_with_pointer() {
        let d = tmpdir("unres");
        let mut sources = Sources::default();
        let base = Url::from_file_path(d.join("api.json")).unwrap();
        sources.insert(base.as_str(), Arc::new(json!({})));
        let node = json!({"properties":{"a":{"$ref":"missing.json#/X"},"b":{"$ref":"https://nowhere.dev/s.json"}}});
        let (schema, unresolved) =
            Bundler::new(&mut sources).bundle(&node, &base, "/methods/0/params/0/schema");
        assert_eq!(unresolved.len(), 2);
        assert!(
            unresolved
                .iter()
                .any(|u| u.pointer == "/methods/0/params/0/schema/properties/a/$ref")
        );
        assert!(unresolved.iter().any(|u| u.reason.contains("schema_ids")));
        // The open replacement still compiles and accepts anything there.
        let v = jsonschema::validator_for(&schema).expect("valid schema");
        assert!(v.is_valid(&json!({"a": 1, "b": "x"})));
    }

    #[test]
    fn recursive_schemas_terminate() {
        let d = tmpdir("rec");
        let mut sources = Sources::default();
        let base = Url::from_file_path(d.join("api.json")).unwrap();
        sources.insert(
            base.as_str(),
            Arc::new(json!({"components":{"schemas":{"Node":{"type":"object","properties":{"next":{"$ref":"#/components/schemas/Node"}}}}}})),
        );
        let (schema, unresolved) = Bundler::new(&mut sources).bundle(
            &json!({"$ref":"#/components/schemas/Node"}),
            &base,
            "",
        );
        assert!(unresolved.is_empty());
        let v = jsonschema::validator_for(&schema).expect("valid");
        assert!(v.is_valid(&json!({"next": {"next": {}}})));
        assert!(!v.is_valid(&json!({"next": {"next": 3}})));
    }
}
