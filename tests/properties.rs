//! Property tests (issue 9, item 2): path percent-encoding, the binding status tables, and the
//! pure forward path `Call -> REST request -> Outcome -> MCP result` on the demo gateway.

use http::{HeaderMap, HeaderValue};
use percent_encoding::percent_decode_str;
use portico::binding::{Binding, Kind, Reply, Rule, ToolCtx};
use portico::forward;
use portico::model::{Failure, FailureKind};
use portico::translate::path::{PathTemplate, encode_segment};
use portico::translate::request;
use portico::translate::response::RestResponse;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Arbitrary JSON, bounded in depth and width.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn a_segment_round_trips_and_never_carries_delimiters(s in any::<String>()) {
        let enc = encode_segment(&s);
        let back = percent_decode_str(&enc).decode_utf8().expect("encoded text decodes as UTF-8");
        prop_assert_eq!(back.as_ref(), s.as_str());
        prop_assert!(!enc.contains(['/', '?', '#']), "{enc:?}");
        prop_assert!(enc.is_ascii(), "{enc:?}");
    }

    #[test]
    fn a_rendered_path_variable_fills_exactly_one_segment(s in any::<String>(), n in any::<i64>()) {
        let t = PathTemplate::parse("/items/{id}/slots").expect("template parses");
        for v in [json!(s), json!(n)] {
            match t.render(&json!({ "id": v })) {
                Ok(path) => {
                    prop_assert!(!path.contains(['?', '#']), "{path:?}");
                    let segs: Vec<&str> = path.split('/').collect();
                    prop_assert_eq!(segs.len(), 4, "{:?}", path);
                    prop_assert_eq!(segs[1], "items");
                    prop_assert_eq!(segs[3], "slots");
                    prop_assert!(!matches!(segs[2], "" | "." | ".."), "{path:?}");
                    let raw = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                    let decoded = percent_decode_str(segs[2]).decode_utf8().unwrap();
                    prop_assert_eq!(decoded.as_ref(), raw.as_str());
                }
                // Refusals are fine: empty, dot-segments and over-long values.
                Err(_) => {
                    let raw = v.as_str().map(str::to_string).unwrap_or_default();
                    prop_assert!(
                        v.is_string() && (matches!(raw.as_str(), "" | "." | "..")
                            || raw.len() > portico::translate::path::MAX_SEGMENT_LEN),
                        "refused {:?}", v
                    );
                }
            }
        }
    }
}

fn binding(kind: Kind) -> Binding {
    Binding {
        kind,
        version: "2026-08-20".into(),
        capabilities: None,
        capability: None,
        ucp: None,
    }
}

const KINDS: [Kind; 4] = [Kind::Usp, Kind::Ucp, Kind::Plain, Kind::Autonym];

/// Every status 100..=599 gets exactly one rule per binding: success for 2xx only, and every
/// error slug the table names exists in that binding's error table and renders as its row.
#[test]
fn every_status_maps_to_exactly_one_outcome_per_binding() {
    let mut checked = 0;
    for kind in KINDS {
        let b = binding(kind);
        for status in 100u16..=599 {
            let rule = b.default_rule(status);
            assert_eq!(
                rule,
                b.default_rule(status),
                "{kind:?} {status} is not stable"
            );
            let success = (200..300).contains(&status);
            assert_eq!(
                matches!(rule, Rule::Success),
                success,
                "{kind:?} {status}: {rule:?}"
            );
            let slug = match &rule {
                Rule::Success => {
                    checked += 1;
                    continue;
                }
                Rule::ToolError => {
                    assert_eq!(kind, Kind::Plain, "{kind:?} {status}: tool error");
                    let f = Failure {
                        status: Some(status),
                        ..Failure::new(FailureKind::UpstreamError, "x")
                    };
                    match b.render_failure(f, &ToolCtx::default()) {
                        Reply::Result(r) => {
                            assert_eq!(r["isError"], true, "{status}");
                            assert!(r["content"].is_array(), "{status}");
                        }
                        Reply::Error(e) => panic!("plain {status} became a JSON-RPC error {e:?}"),
                        Reply::Written(w) => panic!("a failure was written as a success {w:?}"),
                    }
                    checked += 1;
                    continue;
                }
                Rule::Error(s) | Rule::Business(s) => s.clone(),
            };
            let row = b
                .error_code(&slug)
                .unwrap_or_else(|| panic!("{kind:?} {status}: `{slug}` is not in the table"));
            if kind == Kind::Autonym {
                // autonym answers in one of its forms; never a success result.
                let f = Failure {
                    status: Some(status),
                    ..Failure::new(FailureKind::UpstreamError, "x").with_code(slug.clone())
                };
                match b.render_failure(f, &ToolCtx::default()) {
                    Reply::Result(r) => assert_eq!(r["isError"], true, "{status}"),
                    Reply::Error(e) => assert!(
                        e.code == portico::binding::HTTP_PROBLEM || e.code == -32603,
                        "{status}: {e:?}"
                    ),
                    Reply::Written(w) => panic!("a failure was written as a success {w:?}"),
                }
            } else if matches!(rule, Rule::Error(_)) {
                let f = Failure::new(FailureKind::UpstreamError, "x").with_code(slug.clone());
                match b.render_failure(f, &ToolCtx::default()) {
                    Reply::Error(e) => {
                        assert_eq!(e.code, row.rpc, "{kind:?} {status}");
                        assert_eq!(e.message, slug, "{kind:?} {status}");
                        if kind == Kind::Ucp {
                            assert_eq!(e.http_status, Some(row.http), "{status}");
                        }
                    }
                    Reply::Result(r) => panic!("{kind:?} {status} rendered a result {r}"),
                    Reply::Written(w) => panic!("{kind:?} {status} wrote a result {w:?}"),
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * 500);
}

// ---------------------------------------------------------------------------------------------
// The forward path on the demo gateway.

fn demo() -> &'static portico::config::Gateway {
    static G: OnceLock<portico::config::Gateway> = OnceLock::new();
    G.get_or_init(|| {
        // Nothing listens there: this test never sends a request.
        let dir =
            portico::demo::write_files("127.0.0.1:9".parse().unwrap(), None).expect("demo files");
        portico::config::load(&[dir.join("mappings")]).expect("demo config loads")
    })
}

/// A tiny deterministic generator driven by a proptest seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, per_cent: u64) -> bool {
        self.next() % 100 < per_cent
    }
}

const STRINGS: &[&str] = &[
    "",
    "a",
    "MASSAGE-60",
    "2026-12-01",
    "2026-12-01T09:00:00Z",
    "2026-12-01T09:00:00+01:00",
    "x@example.com",
    "https://agent.example/profile.json",
    "../../etc/passwd",
    "a/b?c#d",
    "%2F%00",
    "\u{0}\r\nX-Injected: 1",
    "ünïcødé ✓ 𝄞",
    "'; DROP TABLE x; --",
    "{{ 7 * 7 }}",
    "00000000-0000-4000-8000-000000000000",
];

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut s = schema;
    for _ in 0..8 {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(t) => s = t,
                None => return s,
            },
            None => return s,
        }
    }
    s
}

fn random_string(r: &mut Rng, schema: &Value) -> String {
    let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = schema
        .get("maxLength")
        .and_then(Value::as_u64)
        .unwrap_or(40) as usize;
    let mut s = if r.chance(60) {
        STRINGS[r.below(STRINGS.len())].to_string()
    } else {
        let len = r.below(24);
        (0..len)
            .map(|_| char::from_u32(r.below(0x2FF) as u32).unwrap_or('?'))
            .collect()
    };
    while s.chars().count() < min {
        s.push('x');
    }
    s.chars().take(max.max(min)).collect()
}

/// A value shaped by `schema` (types, enums, consts, properties, items, combinators), with
/// deliberate noise; the caller keeps only values the tool's validator accepts.
fn shaped(schema: &Value, root: &Value, r: &mut Rng, depth: usize) -> Value {
    let schema = resolve(schema, root);
    if depth > 6 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(Value::Array(e)) = schema.get("enum")
        && !e.is_empty()
    {
        return e[r.below(e.len())].clone();
    }
    for comb in ["oneOf", "anyOf"] {
        if let Some(Value::Array(alts)) = schema.get(comb)
            && !alts.is_empty()
        {
            return shaped(&alts[r.below(alts.len())], root, r, depth + 1);
        }
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        let mut out = Map::new();
        for s in all {
            if let Value::Object(m) = shaped(s, root, r, depth + 1) {
                out.extend(m);
            }
        }
        return Value::Object(out);
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) if !ts.is_empty() => {
            ts[r.below(ts.len())].as_str().unwrap_or("null").to_string()
        }
        _ if schema.get("properties").is_some() => "object".into(),
        _ => ["string", "integer", "boolean", "object", "array", "null"][r.below(6)].into(),
    };
    match ty.as_str() {
        "string" => {
            let format = match schema.get("format").and_then(Value::as_str) {
                Some("date") => Some("2026-12-01"),
                Some("date-time") => Some("2026-12-01T09:00:00Z"),
                Some("email") => Some("x@example.com"),
                Some("uri") => Some("https://agent.example/profile.json"),
                _ => None,
            };
            match (format, schema.get("examples").and_then(Value::as_array)) {
                (Some(f), _) if r.chance(80) => json!(f),
                (_, Some(ex)) if !ex.is_empty() && r.chance(50) => ex[r.below(ex.len())].clone(),
                _ => Value::String(random_string(r, schema)),
            }
        }
        "integer" | "number" => {
            let lo = schema
                .get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(-1000);
            let hi = schema
                .get("maximum")
                .and_then(Value::as_i64)
                .unwrap_or(lo.saturating_add(100_000));
            let span = (hi.saturating_sub(lo)).max(0) as u64 + 1;
            let n = lo.saturating_add((r.next() % span) as i64);
            if ty == "number" && r.chance(30) {
                json!(n as f64 + 0.5)
            } else {
                json!(n)
            }
        }
        "boolean" => json!(r.chance(50)),
        "null" => Value::Null,
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = schema.get("maxItems").and_then(Value::as_u64).unwrap_or(4) as usize;
            let n = min + r.below(max.saturating_sub(min) + 1);
            let items = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array((0..n).map(|_| shaped(&items, root, r, depth + 1)).collect())
        }
        _ => {
            let mut out = Map::new();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, s) in props {
                    if resolve(s, root).get("not").is_some() {
                        continue;
                    }
                    if required.contains(&k.as_str()) || r.chance(60) {
                        out.insert(k.clone(), shaped(s, root, r, depth + 1));
                    }
                }
            }
            if r.chance(15) {
                out.insert(
                    random_string(r, &json!({})),
                    Value::String(random_string(r, &json!({}))),
                );
            }
            Value::Object(out)
        }
    }
}

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/problem+json",
    "application/json; charset=utf-8",
    "text/plain",
    "text/html",
    "application/octet-stream",
    "image/png",
];

/// A backend body: garbage bytes, arbitrary JSON, or JSON shaped like the tool's own success.
fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        any_json().prop_map(|v| v.to_string().into_bytes()),
        any_json().prop_map(|v| {
            json!({"data": v, "errors": [{"msg": v, "field": "x"}], "detail": v})
                .to_string()
                .into_bytes()
        }),
    ]
}

fn check_reply(reply: &Reply, what: &str) -> Result<(), TestCaseError> {
    match reply {
        Reply::Error(e) => {
            prop_assert!(!e.message.is_empty(), "{what}: empty message {e:?}");
        }
        Reply::Written(w) => {
            prop_assert!(false, "{what}: a written reply was not materialized: {w:?}");
        }
        Reply::Result(r) => {
            let content = r.get("content").and_then(Value::as_array);
            prop_assert!(content.is_some(), "{what}: result without content: {r}");
            for block in content.unwrap() {
                prop_assert!(block.get("type").is_some(), "{what}: block {block}");
            }
        }
    }
    Ok(())
}

/// `Call -> REST request -> Outcome -> MCP result` never panics, for schema-valid arguments of
/// every demo tool and arbitrary backend statuses, content types and bodies; it always answers
/// a JSON-RPC error or a result with `content`.
#[test]
fn the_forward_path_never_panics_and_always_answers() {
    let g = demo();
    let tools: Vec<_> = g.tools.values().cloned().collect();
    assert!(tools.len() >= 5, "demo has {} tools", tools.len());
    let valid = std::cell::RefCell::new(vec![0usize; tools.len()]);
    let built = std::cell::Cell::new(0usize);
    let mut runner = TestRunner::new(config(1500));
    let strategy = (
        0..tools.len(),
        any::<u64>(),
        100u16..=599,
        0..CONTENT_TYPES.len() + 1,
        body_strategy(),
        prop::option::of(any::<String>()),
    );
    runner
        .run(&strategy, |(i, seed, status, ct, body, retry)| {
            let tool = &tools[i];
            let descriptor = tool.descriptor.value();
            let schema = &descriptor["inputSchema"];
            let mut r = Rng(seed | 1);
            let args = shaped(schema, schema, &mut r, 0);
            if !tool.input_validator.is_valid(&args) {
                // Rejected arguments must be answered, not panicked on.
                match forward::prepare(tool, args) {
                    Ok(_) => prop_assert!(false, "{}: invalid arguments accepted", tool.name),
                    Err(reply) => check_reply(&reply, &tool.name)?,
                }
                return Ok(());
            }
            valid.borrow_mut()[i] += 1;
            let call = match forward::prepare(tool, args) {
                Ok(c) => c,
                Err(reply) => return check_reply(&reply, &tool.name),
            };
            if request::build(tool, &call).is_ok() {
                built.set(built.get() + 1);
            }
            let mut headers = HeaderMap::new();
            if let Some(ct) = CONTENT_TYPES.get(ct) {
                headers.insert("content-type", HeaderValue::from_static(ct));
            }
            if let Some(v) = retry.and_then(|s| HeaderValue::from_str(&s).ok()) {
                headers.insert("retry-after", v);
            }
            let resp = RestResponse {
                status,
                headers,
                body: body.into(),
            };
            // The hot path (no trees) answers exactly as the tree path, value and bytes.
            let tree = forward::translate_response_tree(tool, &call, resp.clone());
            let mut reply = forward::translate_response(tool, &call, resp);
            if let (Reply::Written(w), Reply::Result(t)) = (&reply, &tree) {
                let mut bytes = Vec::new();
                w.write(&mut bytes);
                let expected = portico::json_text::to_vec(t);
                prop_assert_eq!(
                    String::from_utf8_lossy(&bytes),
                    String::from_utf8_lossy(&expected),
                    "{} HTTP {}",
                    tool.name,
                    status
                );
            }
            reply.materialize();
            prop_assert_eq!(&reply, &tree, "{} HTTP {}", tool.name, status);
            check_reply(&reply, &format!("{} HTTP {status}", tool.name))?;
            if !(200..300).contains(&status) && status != 404 {
                // A backend failure is never reported as a plain success.
                if let Reply::Result(r) = &reply {
                    let business = r.pointer("/structuredContent/messages").is_some();
                    prop_assert!(
                        r["isError"] == true || business,
                        "{} HTTP {status} became a success: {r}",
                        tool.name
                    );
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // The generator really reached the backend half for every tool (not a vacuous pass).
    let valid = valid.into_inner();
    let reached = valid.iter().filter(|&&n| n > 0).count();
    assert_eq!(
        reached,
        tools.len(),
        "schema-valid arguments for only {reached} of {} tools: {valid:?}",
        tools.len()
    );
    assert!(built.get() > 0, "no request was ever built");
}
