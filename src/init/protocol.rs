//! `portico init --openapi FILE --openrpc FILE`: a protocol's published MCP surface (its OpenRPC,
//! referenced unchanged) paired with a backend's operations into a USP/UCP/autonym/plain mapping.
//! Every unpaired method becomes a `todo:` entry that `check` refuses: none is silently served.

use super::common::{Backend, InitError, Options, Report, backend_url, credentials, fail};
use super::pair::{self, Candidate, Method, Operation, Outcome};
use super::schema_ids;
use super::source::parse_any;
use super::write::{self, MappingHead, yaml_jq, yaml_str};
use crate::init::operations::jq_arg;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::Path;

const VERBS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
/// Params that carry protocol metadata, never placed in a request.
const META: [&str; 2] = ["_meta", "meta"];
/// UCP's checkout capability, whose results name the business's payment handlers.
const CHECKOUT: &str = "dev.ucp.shopping.checkout";
const BINDINGS: [&str; 4] = ["plain", "usp", "ucp", "autonym"];

/// `v` with a local `$ref` (`#/...`) followed, a few hops at most.
fn deref<'a>(doc: &'a Value, mut v: &'a Value) -> &'a Value {
    for _ in 0..8 {
        match v
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
        {
            Some(p) => match doc.pointer(p) {
                Some(t) => v = t,
                None => break,
            },
            None => break,
        }
    }
    v
}

/// Every `$ref` under `v`, local ones followed (`depth` hops), as the referenced file (fragment
/// dropped, as written).
fn file_refs(doc: &Value, v: &Value, depth: usize, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x.as_str()) {
                    ("$ref", Some(r)) if r.starts_with('#') => {
                        if depth > 0
                            && let Some(t) = doc.pointer(&r[1..])
                        {
                            file_refs(doc, t, depth - 1, out);
                        }
                    }
                    ("$ref", Some(r)) => {
                        out.push(r.split('#').next().unwrap_or(r).to_string());
                    }
                    _ => file_refs(doc, x, depth, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| file_refs(doc, x, depth, out)),
        _ => {}
    }
}

/// The file a schema is, when it is nothing but a reference to one (local refs followed):
/// `{"$ref": "#/components/schemas/checkout"}` -> `checkout.json`.
fn top_ref(doc: &Value, v: &Value) -> BTreeSet<String> {
    let v = deref(doc, v);
    let mut out = BTreeSet::new();
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        // The file's name with the fragment, so two `$defs` of one file stay apart.
        let (file, frag) = r.split_once('#').unwrap_or((r, ""));
        let name = file.rsplit('/').next().unwrap_or(file);
        out.insert(if frag.is_empty() {
            name.to_string()
        } else {
            format!("{name}#{frag}")
        });
    }
    out
}

/// The backend's operations as pairing sees them (those --include/--exclude admit).
fn operations(opts: &Options, doc: &Value, cred_headers: &BTreeSet<String>) -> Vec<Operation> {
    let mut out = Vec::new();
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return out;
    };
    for (path, item) in paths {
        let item = deref(doc, item);
        for verb in VERBS {
            let Some(op) = item.get(verb) else { continue };
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .map(str::to_string);
            let tags: Vec<String> = op
                .get("tags")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let method = verb.to_ascii_uppercase();
            if !opts.filter.admits(&method, path, id.as_deref(), &tags) {
                continue;
            }
            let mut o = Operation {
                method,
                path: path.clone(),
                id,
                path_params: path
                    .split('{')
                    .skip(1)
                    .filter_map(|s| s.split('}').next())
                    .map(str::to_string)
                    .collect(),
                links: pair::x_strings(op),
                ..Default::default()
            };
            let params = [item.get("parameters"), op.get("parameters")];
            for p in params
                .into_iter()
                .flatten()
                .filter_map(Value::as_array)
                .flatten()
            {
                let p = deref(doc, p);
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                match p.get("in").and_then(Value::as_str) {
                    Some("query") => o.query.push(name.to_string()),
                    Some("header") if !cred_headers.contains(&name.to_ascii_lowercase()) => {
                        o.headers.push(name.to_string())
                    }
                    _ => {}
                }
            }
            if let Some(schema) = op
                .get("requestBody")
                .map(|b| deref(doc, b))
                .and_then(|b| b.pointer("/content/application~1json/schema"))
            {
                o.body_refs = top_ref(doc, schema);
            }
            out.push(o);
        }
    }
    out
}

/// The OpenRPC's methods as pairing sees them; a duplicate name is refused.
fn methods(path: &Path, rpc: &Value) -> Result<Vec<Method>, InitError> {
    let Some(list) = rpc.get("methods").and_then(Value::as_array) else {
        return Err(fail(
            path,
            Some("/methods"),
            "not an OpenRPC document: it has no `methods` list",
        ));
    };
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let m = deref(rpc, m);
        let Some(name) = m.get("name").and_then(Value::as_str) else {
            return Err(fail(
                path,
                Some(&format!("/methods/{i}/name")),
                "a method without a `name`",
            ));
        };
        if let Some(first) = seen.insert(name.to_string(), i) {
            return Err(fail(
                path,
                Some(&format!("/methods/{i}/name")),
                format!(
                    "method name clash: `{name}` is the name of /methods/{first} and /methods/{i}; each method becomes one tool, so names must be unique"
                ),
            ));
        }
        let text = ["summary", "description"]
            .iter()
            .filter_map(|k| m.get(*k).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let params = m
            .get("params")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .map(|p| deref(rpc, p))
                    .filter_map(|p| {
                        let n = p.get("name")?.as_str()?.to_string();
                        let refs = p.get("schema").map(|s| top_ref(rpc, s)).unwrap_or_default();
                        Some((n, refs))
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Method {
            name: name.to_string(),
            text,
            params,
            links: pair::x_strings(m),
        });
    }
    Ok(out)
}

/// `x-...` member names anywhere under `v` (a few levels).
fn x_keys(v: &Value, depth: usize, out: &mut BTreeSet<String>) {
    if depth == 0 {
        return;
    }
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if k.starts_with("x-") {
                    out.insert(k.clone());
                }
                x_keys(x, depth - 1, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| x_keys(x, depth - 1, out)),
        _ => {}
    }
}

/// The binding the OpenRPC names (its `x-` fields, else its title), and why.
pub fn infer_binding(rpc: &Value) -> (String, String) {
    let mut keys = BTreeSet::new();
    x_keys(rpc, 4, &mut keys);
    for b in ["usp", "ucp", "autonym"] {
        if let Some(k) = keys.iter().find(|k| k.starts_with(&format!("x-{b}"))) {
            return (
                b.into(),
                format!("inferred from the OpenRPC's `{k}` fields"),
            );
        }
    }
    let title = rpc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("");
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    let lower = title.to_ascii_lowercase();
    for (b, long) in [
        ("usp", "universal scheduling protocol"),
        ("ucp", "universal commerce protocol"),
        ("autonym", "autonym"),
    ] {
        if words.iter().any(|w| w == b) || lower.contains(long) {
            return (
                b.into(),
                format!("inferred from the OpenRPC's info.title `{title}`"),
            );
        }
    }
    (
        "plain".into(),
        "the OpenRPC names no protocol (no `x-usp`/`x-ucp` fields, no protocol in info.title)"
            .into(),
    )
}

/// UCP: the capability a method serves, from the `name` of the schema file its result (else a
/// param) refers to (`dev.ucp.shopping.checkout`).
fn capability(rpc_dir: &Path, rpc: &Value, m: &Value) -> Option<String> {
    let mut refs = Vec::new();
    if let Some(r) = m.get("result") {
        file_refs(rpc, deref(rpc, r), 4, &mut refs);
    }
    for p in m
        .get("params")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let p = deref(rpc, p);
        if !p
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| META.contains(&n))
        {
            file_refs(rpc, p, 4, &mut refs);
        }
    }
    refs.iter()
        .filter(|r| !r.starts_with("http"))
        .filter_map(|r| std::fs::read_to_string(rpc_dir.join(r)).ok())
        .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
        .find_map(|v| v.get("name")?.as_str().map(str::to_string))
}

fn candidate_line(ops: &[Operation], c: &Candidate) -> String {
    format!(
        "{}: score {}, {}",
        ops[c.op].label(),
        c.score,
        c.why.join("; ")
    )
}

/// Runs `init` with `--openrpc`.
pub(crate) fn run(opts: &Options, rpc_path: &Path, api: &Backend) -> Result<Report, InitError> {
    let text = std::fs::read_to_string(rpc_path).map_err(|e| {
        fail(
            rpc_path,
            None,
            format!("cannot read the OpenRPC document: {e}"),
        )
    })?;
    let rpc = parse_any(rpc_path, &text).map_err(|e| {
        fail(
            rpc_path,
            None,
            format!("the OpenRPC document does not parse as JSON or YAML: {e}"),
        )
    })?;
    if !rpc.get("openrpc").is_some_and(Value::is_string) {
        return Err(fail(
            rpc_path,
            Some("/openrpc"),
            "not an OpenRPC document: it has no `openrpc` version field",
        ));
    }
    let methods = methods(rpc_path, &rpc)?;
    if methods.is_empty() {
        return Err(fail(
            rpc_path,
            Some("/methods"),
            "the OpenRPC document has no method",
        ));
    }
    let (binding, binding_why) = match &opts.binding {
        Some(b) if BINDINGS.contains(&b.as_str()) => (b.clone(), "chosen by --binding".to_string()),
        Some(b) => {
            return Err(fail(
                rpc_path,
                None,
                format!("unknown binding `{b}`: use one of {}", BINDINGS.join(", ")),
            ));
        }
        None => infer_binding(&rpc),
    };
    let rpc_version = rpc
        .pointer("/info/version")
        .and_then(Value::as_str)
        .filter(|v| !v.trim().is_empty());
    let version = match (&opts.protocol_version, rpc_version) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(_)) => None,
        (None, None) if matches!(binding.as_str(), "usp" | "ucp") => {
            return Err(fail(
                rpc_path,
                Some("/info/version"),
                format!(
                    "the OpenRPC names no `info.version`, and every {binding} result announces the protocol version: pass --protocol-version VERSION (the version this business speaks)"
                ),
            ));
        }
        (None, None) => None,
    };

    let (cred_headers, _, creds) = credentials(&api.doc, &api.env_prefix);
    let ops = operations(opts, &api.doc, &cred_headers);
    let outcomes = pair::pair(&methods, &ops);
    let (backend, note, backend_env) = backend_url(opts, &api.doc, &api.env_prefix);

    let rpc_abs = std::fs::canonicalize(rpc_path).unwrap_or_else(|_| rpc_path.to_path_buf());
    let rpc_dir = rpc_abs.parent().unwrap_or(Path::new(".")).to_path_buf();
    let found = schema_ids::find(&rpc_abs, &rpc);
    let rpc_methods: Vec<&Value> = rpc
        .get("methods")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|m| deref(&rpc, m)).collect())
        .unwrap_or_default();
    let caps: Vec<Option<String>> = if binding == "ucp" {
        rpc_methods
            .iter()
            .map(|m| capability(&rpc_dir, &rpc, m))
            .collect()
    } else {
        vec![None; methods.len()]
    };
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for c in caps.iter().flatten() {
        *counts.entry(c.as_str()).or_default() += 1;
    }
    let main_cap = counts
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(c, _)| c.to_string());

    // The top-level sections between `openrpc:` and `backend:`.
    let mut extra = String::new();
    if !found.prefixes.is_empty() {
        let _ = writeln!(
            extra,
            "# The OpenRPC's absolute `$ref`s, served from the files whose `$id` they name."
        );
        let _ = writeln!(extra, "schema_ids:");
        for (prefix, dir) in &found.prefixes {
            let mut rel = schema_ids::relative(&opts.out, dir);
            if prefix.ends_with('/') && !rel.ends_with('/') {
                rel.push('/');
            }
            let _ = writeln!(extra, "  {}: {}", yaml_str(prefix), yaml_str(&rel));
        }
    }
    if !found.unresolved.is_empty() {
        let _ = writeln!(
            extra,
            "# {} referenced schema(s) are not on disk (e.g. {}): check warns for each.",
            found.unresolved.len(),
            found
                .unresolved
                .iter()
                .next()
                .map(String::as_str)
                .unwrap_or("")
        );
        let _ = writeln!(extra, "unresolved_refs: warn");
    }
    if !found.prefixes.is_empty() || !found.unresolved.is_empty() {
        let _ = writeln!(extra);
    }
    if version.is_some() || main_cap.is_some() {
        let _ = writeln!(extra, "protocol:");
        if let Some(v) = &version {
            let _ = writeln!(extra, "  version: {}", json_str(v));
        }
        if let Some(c) = &main_cap {
            let _ = writeln!(extra, "  capability: {}", yaml_str(c));
        }
        if caps.iter().flatten().any(|c| c == CHECKOUT) {
            let _ = writeln!(
                extra,
                "  # Checkout results name the business's payment handlers, as its /.well-known/ucp\n  # profile declares them: fill them in (an empty registry declares none)."
            );
            let _ = writeln!(extra, "  ucp:\n    payment_handlers: {{}}");
        }
        let _ = writeln!(extra);
    }

    let mut y = String::new();
    let mut paired = Vec::new();
    let mut todos = Vec::new();
    let mut tools = Vec::new();
    let mut todo_y = String::new();
    for (i, (m, outcome)) in methods.iter().zip(&outcomes).enumerate() {
        match outcome {
            Outcome::Paired { op, why } => {
                let o = &ops[*op];
                paired.push(format!("{} -> {} ({why})", m.name, o.label()));
                tools.push(m.name.clone());
                tool_yaml(&mut y, m, o, why, caps[i].as_deref(), main_cap.as_deref());
            }
            Outcome::Todo { reason, candidates } => {
                let lines: Vec<String> =
                    candidates.iter().map(|c| candidate_line(&ops, c)).collect();
                todos.push(format!(
                    "{}: {reason}; candidates: {}",
                    m.name,
                    if lines.is_empty() {
                        "none".to_string()
                    } else {
                        lines.join(" | ")
                    }
                ));
                let _ = writeln!(todo_y, "  {}:", yaml_str(&m.name));
                let _ = writeln!(todo_y, "    reason: {}", json_str(reason));
                if lines.is_empty() {
                    let _ = writeln!(todo_y, "    candidates: []");
                } else {
                    let _ = writeln!(todo_y, "    candidates:");
                    for l in &lines {
                        let _ = writeln!(todo_y, "      - {}", json_str(l));
                    }
                }
            }
        }
    }

    let title = rpc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or(&api.business)
        .to_string();
    let rpc_rel = schema_ids::relative(&opts.out, &rpc_abs);
    let mapping_file = format!("{}.yaml", api.business);
    let source_name = opts
        .openapi
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("openapi")
        .to_string();
    let intro = format!(
        "# {title}: the methods of `{}` (referenced unchanged) served over the REST API of `{source_name}`.\n# Binding `{binding}`: {binding_why}. Every method is either a tool below or a `todo:` entry\n# that `portico check` refuses until it is paired; docs/mapping.md describes this file.\n",
        rpc_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("openrpc"),
    );
    let head = MappingHead {
        business: &api.business,
        source: &source_name,
        openapi_version: &api.version,
        title: &title,
        openrpc_file: &rpc_rel,
        backend: &backend,
        backend_note: note,
        credentials: creds,
        skipped: Vec::new(),
    };
    let mut text = write::mapping_head(&head, &binding, &intro, &extra);
    let _ = writeln!(text, "tools:{}", if tools.is_empty() { " {}" } else { "" });
    text.push_str(&y);
    if !todo_y.is_empty() {
        let _ = writeln!(text);
        let _ = writeln!(
            text,
            "# Methods not paired with an operation: pair each (move it under `tools:` with its\n# `http: METHOD /path`), or delete its entry to leave the method unserved."
        );
        let _ = writeln!(text, "todo:");
        text.push_str(&todo_y);
    }
    let files = vec![
        (mapping_file.clone(), text),
        (
            write::SCHEMA_FILE.to_string(),
            crate::mapping_schema::text(),
        ),
    ];
    write::publish(&opts.out, &files).map_err(|e| fail(&opts.out, None, e))?;
    Ok(Report {
        mapping: opts.out.join(mapping_file),
        openrpc: rpc_path.to_path_buf(),
        tools,
        skipped: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
        backend_env,
        binding: (binding, binding_why),
        paired,
        todos,
    })
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// One paired tool: its route, the query and header params the method has, and the body when
/// one method param carries the request body's schema.
fn tool_yaml(
    y: &mut String,
    m: &Method,
    o: &Operation,
    why: &str,
    cap: Option<&str>,
    main_cap: Option<&str>,
) {
    let params: HashSet<&str> = m.params.iter().map(|(n, _)| n.as_str()).collect();
    if !y.is_empty() {
        let _ = writeln!(y);
    }
    let _ = writeln!(y, "  # {}: {why}", o.label());
    let _ = writeln!(y, "  {}:", yaml_str(&m.name));
    let _ = writeln!(y, "    http: {} {}", o.method, o.path);
    for (section, names) in [("query", &o.query), ("headers", &o.headers)] {
        let placed: Vec<&String> = names
            .iter()
            .filter(|n| params.contains(n.as_str()) && !META.contains(&n.as_str()))
            .collect();
        if placed.is_empty() {
            continue;
        }
        let _ = writeln!(y, "    {section}:");
        for n in placed {
            let _ = writeln!(y, "      {}: {}", yaml_str(n), yaml_jq(&jq_arg(n)));
        }
    }
    if matches!(o.method.as_str(), "POST" | "PUT" | "PATCH")
        && let Some(p) = pair::body_param(m, o)
    {
        let _ = writeln!(y, "    body: {}", yaml_jq(&jq_arg(p)));
    }
    if let Some(c) = cap
        && Some(c) != main_cap
    {
        let _ = writeln!(y, "    capability: {}", yaml_str(c));
    }
}
