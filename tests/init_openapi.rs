//! `portico init --openapi` on real, differently shaped public OpenAPI documents (fetched through
//! upstream.lock), on USP's and UCP's REST documents, on the demo facade's own OpenAPI and on a
//! messy hand-written one: the generated folder passes `portico check` as written, and for plain
//! cases an MCP client (rmcp) calls every generated read tool against a live generic backend.

mod common;

use bytes::Bytes;
use common::upstream;
use http_body_util::Full;
use hyper::Response;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const BIN: &str = env!("CARGO_BIN_EXE_portico");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portico-init-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("portico runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `init` on `doc` into a fresh folder, then `check` on it (with the backend URL's
/// variable set when the document named no absolute server). Returns the folder and output.
fn init_and_check(doc: &Path, name: &str, extra: &[&str]) -> (PathBuf, String) {
    let out = tmp(name);
    let mut args = vec![
        "init",
        "--openapi",
        doc.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(&args, &[]);
    let said = text(&o);
    assert!(o.status.success(), "init {name} failed:\n{said}");
    let var = said
        .lines()
        .find_map(|l| l.strip_prefix("next: export "))
        .and_then(|l| l.split('=').next())
        .map(str::to_string);
    let env: Vec<(&str, &str)> = var
        .as_deref()
        .map(|v| vec![(v, "http://127.0.0.1:9")])
        .unwrap_or_default();
    let c = run(&["check", out.to_str().unwrap()], &env);
    assert!(c.status.success(), "check {name} failed:\n{}", text(&c));
    assert!(
        var.is_some() || said.contains("check: ok"),
        "init runs check itself: {said}"
    );
    (out, said)
}

fn file_with(folder: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(folder)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no *{suffix} in {}", folder.display()))
}

fn openrpc_of(folder: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file_with(folder, ".openrpc.json")).unwrap())
        .unwrap()
}

fn method_names(folder: &Path) -> Vec<String> {
    openrpc_of(folder)["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect()
}

fn skipped_count(said: &str) -> usize {
    said.lines().filter(|l| l.starts_with("skipped: ")).count()
}

#[test]
fn every_public_document_of_the_set_becomes_a_checked_mapping() {
    // (document, operations under `paths`, webhooks)
    let docs: &[(&str, usize, usize)] = &[
        ("openapi/oai-examples/v3.0/petstore.yaml", 3, 0),
        ("openapi/oai-examples/v3.0/petstore.json", 3, 0),
        ("openapi/oai-examples/v3.0/petstore-expanded.yaml", 4, 0),
        ("openapi/oai-examples/v3.0/petstore-expanded.json", 4, 0),
        ("openapi/oai-examples/v3.0/link-example.yaml", 6, 0),
        ("openapi/oai-examples/v3.0/link-example.json", 6, 0),
        ("openapi/oai-examples/v3.0/callback-example.yaml", 1, 0),
        ("openapi/oai-examples/v3.0/callback-example.json", 1, 0),
        ("openapi/oai-examples/v3.0/api-with-examples.yaml", 2, 0),
        ("openapi/oai-examples/v3.0/api-with-examples.json", 2, 0),
        ("openapi/oai-examples/v3.0/uspto.yaml", 3, 0),
        ("openapi/oai-examples/v3.0/uspto.json", 3, 0),
        ("openapi/oai-examples/v3.1/tictactoe.yaml", 3, 1),
        ("openapi/oai-examples/v3.1/tictactoe.json", 3, 0),
        ("openapi/oai-examples/v3.1/non-oauth-scopes.yaml", 1, 0),
        ("openapi/oai-examples/v3.1/non-oauth-scopes.json", 1, 0),
        ("openapi/oai-examples/v3.2/3.2-tags-example.yaml", 4, 0),
        ("openapi/oai-examples/v3.2/3.2-tags-example.json", 4, 0),
        ("openapi/adyen-checkout/CheckoutService-v72.json", 28, 0),
        ("openapi/medusa-store/openapi.yaml", 46, 0),
        ("openapi/medusa-store/openapi.full.yaml", 46, 0),
        ("openapi/pretalx/schema.yml", 132, 0),
        ("openapi/twilio-api-v2010/twilio_api_v2010.json", 197, 0),
    ];
    for (i, (doc, ops, webhooks)) in docs.iter().enumerate() {
        let (out, said) = init_and_check(&upstream(doc), &format!("set{i}"), &[]);
        let tools = method_names(&out).len();
        let skipped = skipped_count(&said) - usize::from(*webhooks > 0);
        assert_eq!(
            tools + skipped,
            *ops,
            "{doc}: every operation is a tool or listed as skipped:\n{said}"
        );
        assert!(tools > 0, "{doc}: no tools");
        let mapping = std::fs::read_to_string(file_with(&out, ".yaml")).unwrap();
        assert!(
            mapping.starts_with("# yaml-language-server: $schema="),
            "{doc}: the mapping names its schema for editors"
        );
        for name in method_names(&out) {
            assert!(name.len() <= 64, "{doc}: tool name {name} is too long");
        }
        let _ = std::fs::remove_dir_all(out);
    }
}

#[test]
fn split_and_bundled_medusa_give_the_same_tools() {
    let (a, _) = init_and_check(&upstream("openapi/medusa-store/openapi.yaml"), "ms", &[]);
    let (b, _) = init_and_check(
        &upstream("openapi/medusa-store/openapi.full.yaml"),
        "mf",
        &[],
    );
    let (mut x, mut y) = (method_names(&a), method_names(&b));
    x.sort();
    y.sort();
    assert_eq!(x, y);
    assert_eq!(x.len(), 46);
}

#[test]
fn swagger_2_is_refused_by_name_in_json_and_yaml_and_nothing_is_written() {
    for doc in [
        "openapi/amadeus-hotel-booking/HotelBooking_v2_Swagger_specification.json",
        "openapi/amadeus-hotel-booking/HotelBooking_v2_swagger_specification.yaml",
    ] {
        let out = tmp("swagger");
        let o = run(
            &[
                "init",
                "--openapi",
                upstream(doc).to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let said = text(&o);
        assert!(said.contains("Swagger 2.0"), "{said}");
        assert!(said.contains("(/swagger)"), "names the pointer: {said}");
        assert!(!out.exists(), "no folder is left behind");
    }
}

#[test]
fn a_document_with_only_webhooks_has_no_tools_and_says_why() {
    let out = tmp("webhooks");
    let o = run(
        &[
            "init",
            "--openapi",
            upstream("openapi/oai-examples/v3.1/webhook-example.yaml")
                .to_str()
                .unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("webhook(s) (#/webhooks): requests the API sends, not tools"));
    assert!(!out.exists());
}

#[test]
fn protocol_rest_documents_and_the_demo_facade_api_become_checked_mappings() {
    for (doc, name) in [
        ("usp/openapi/usp-rest.json", "usp"),
        (
            "ucp/source/services/shopping/rest.openapi.json",
            "ucp-shopping",
        ),
        (
            "ucp/source/services/lodging/rest.openapi.json",
            "ucp-lodging",
        ),
    ] {
        let (out, said) = init_and_check(&upstream(doc), name, &[]);
        assert!(method_names(&out).len() >= 5, "{doc}: {said}");
        // Credentials are the mapping's business, never a tool argument.
        for m in openrpc_of(&out)["methods"].as_array().unwrap() {
            for p in m["params"].as_array().unwrap() {
                let n = p["name"].as_str().unwrap().to_ascii_lowercase();
                assert!(
                    !matches!(n.as_str(), "authorization" | "x_api_key"),
                    "{doc}: {} asks for {n}",
                    m["name"]
                );
            }
        }
    }
    // The demo's own REST API: the OpenAPI document its facade serves.
    let o = run(&["openapi", "mappings/demo-spa-facade.yaml"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let dir = tmp("demo-doc");
    std::fs::create_dir_all(&dir).unwrap();
    let doc = dir.join("demo-spa.openapi.json");
    std::fs::write(&doc, &o.stdout).unwrap();
    let (out, said) = init_and_check(&doc, "demo", &["--backend", "http://127.0.0.1:9101/"]);
    assert!(method_names(&out).len() >= 5, "{said}");
    let mapping = std::fs::read_to_string(file_with(&out, ".yaml")).unwrap();
    assert!(
        mapping.contains("url: \"http://127.0.0.1:9101\""),
        "{mapping}"
    );
}

#[test]
fn messy_documents_are_served_where_they_can_be_and_listed_where_not() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openapi/messy.yaml");
    let (out, said) = init_and_check(&fixture, "messy", &[]);
    let rpc = openrpc_of(&out);
    let methods = rpc["methods"].as_array().unwrap();
    let method = |n: &str| {
        methods
            .iter()
            .find(|m| m["name"] == n)
            .unwrap_or_else(|| panic!("no {n} in {rpc}"))
    };
    let params = |n: &str| -> Vec<String> {
        method(n)["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    // Credentials and the fixed API version are not arguments; the version is sent.
    assert_eq!(params("getAppointment"), ["appointment_id"]);
    let mapping = std::fs::read_to_string(file_with(&out, ".yaml")).unwrap();
    assert!(
        mapping.contains("Clinic-Version: '\"2024-06-01\"'"),
        "{mapping}"
    );
    assert!(mapping.contains("#   X-Clinic-Key: \"${MESSY_CLINIC_API_X_CLINIC_KEY}\""));
    // Server with a trailing slash: one slash between base and path.
    assert!(mapping.contains("url: \"http://clinic.example/api\"\n"));
    // A placeholder the parameter list forgot becomes a required string argument.
    assert_eq!(
        params("get_clinics_by_clinic_rooms_by_room"),
        ["clinic", "room"]
    );
    // A long operationId: a name within 64 characters, the full id in the title.
    let long =
        "thisOperationIdIsMuchLongerThanTheSixtyFourCharactersThatMcpClientsAcceptAsAToolName";
    let cut = methods
        .iter()
        .find(|m| m["summary"] == long)
        .expect("the full id is the title");
    assert!(cut["name"].as_str().unwrap().len() <= 64);
    // A top-level oneOf body is one `body` argument; the recursive schema is a shared entry.
    assert_eq!(params("plantTree"), ["body"]);
    assert!(method("plantTree")["params"][0]["schema"]["oneOf"].is_array());
    assert_eq!(
        rpc["components"]["schemas"]["Node"]["properties"]["children"]["items"]["$ref"],
        "#/components/schemas/Node"
    );
    // Missing and remote references: warned with their pointer, replaced by open schemas.
    assert!(said.contains(
        "warning: messy.yaml#/components/schemas/Ghost/$ref: unresolvable `$ref: #/components/schemas/DoesNotExist`"
    ), "{said}");
    assert!(said.contains(
        "warning: messy.yaml#/components/schemas/Far/$ref: remote `$ref: https://schemas.example/far.json#/Far` is not fetched"
    ), "{said}");
    // Multipart, a required cookie and webhooks: skipped and listed with their pointer.
    for line in [
        "skipped: POST /scans (messy.yaml#/paths/~1scans/post): request body is `multipart/form-data`",
        "skipped: GET /session (messy.yaml#/paths/~1session/get): required cookie parameter `sid`",
        "skipped: 1 webhook(s) (#/webhooks)",
        "note: plantTree: callbacks are not served",
    ] {
        assert!(said.contains(line), "missing `{line}` in:\n{said}");
    }
    // The mapping names the schema written next to it, and validates against it.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("portico-mapping.schema.json")).unwrap(),
    )
    .unwrap();
    let doc: Value = serde_saphyr::from_str(&mapping).unwrap();
    let v = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .unwrap();
    assert!(
        v.is_valid(&doc),
        "{:?}",
        v.iter_errors(&doc)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    // The nullable field of the cross-file schema accepts null.
    let app = &rpc["components"]["schemas"]["appointment"]["properties"]["appointment"];
    assert_eq!(
        app["properties"]["patient"]["type"],
        json!(["string", "null"])
    );
}

#[test]
fn broken_documents_are_refused_with_file_and_pointer_and_nothing_is_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openapi");
    for (doc, expect) in [
        (
            "circular.yaml",
            "GET /x (circular.yaml#/paths/~1x/get): parameter 0: circular `$ref: #/components/parameters/A`",
        ),
        ("not-openapi.json", "not an OpenAPI document"),
        ("missing.yaml", "not a readable JSON or YAML document"),
    ] {
        let out = tmp("broken");
        let o = run(
            &[
                "init",
                "--openapi",
                root.join(doc).to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(1), "{doc}");
        assert!(text(&o).contains(expect), "{doc}: {}", text(&o));
        assert!(!out.exists(), "{doc}: no folder is left behind");
    }
    // An existing non-empty folder is never written into.
    let out = tmp("occupied");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let o = run(
        &[
            "init",
            "--openapi",
            root.join("messy.yaml").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

#[test]
fn include_and_exclude_select_operations_by_tag_path_and_id() {
    let doc = upstream("openapi/oai-examples/v3.0/petstore.yaml");
    let (out, _) = init_and_check(&doc, "inc", &["--include", "/pets/*"]);
    assert_eq!(method_names(&out), ["showPetById"]);
    let (out, _) = init_and_check(
        &doc,
        "exc",
        &["--include", "pets", "--exclude", "createPets"],
    );
    let mut names = method_names(&out);
    names.sort();
    assert_eq!(names, ["listPets", "showPetById"]);
}

// ---- a live generic backend ----

/// A value valid for `schema` (resolving `$ref`s in `root`): a documented example when it
/// validates, else one built from the types.
fn synth(schema: &Value, root: &Value, depth: usize, examples: bool) -> Value {
    let Some(o) = schema.as_object() else {
        return json!("x");
    };
    if depth > 24 {
        return Value::Null;
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str)
        && let Some(t) = r.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        return synth(t, root, depth + 1, examples);
    }
    if examples {
        if let Some(Value::Array(e)) = o.get("examples")
            && let Some(v) = e.first()
        {
            return v.clone();
        }
        if let Some(d) = o.get("default") {
            return d.clone();
        }
    }
    if let Some(c) = o.get("const") {
        return c.clone();
    }
    if let Some(Value::Array(e)) = o.get("enum")
        && let Some(v) = e.iter().find(|v| !v.is_null())
    {
        return v.clone();
    }
    if let Some(Value::Array(all)) = o.get("allOf") {
        let mut merged = Map::new();
        for s in all {
            match synth(s, root, depth + 1, examples) {
                Value::Object(m) => merged.extend(m),
                // `allOf: [{$ref: SomeEnum}]`: the branch's value is the value.
                other => return other,
            }
        }
        let mut rest = o.clone();
        rest.remove("allOf");
        if let Value::Object(m) = synth(&Value::Object(rest), root, depth + 1, examples) {
            merged.extend(m);
        }
        return Value::Object(merged);
    }
    for k in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = o.get(k) {
            let candidates: Vec<Value> = branches
                .iter()
                .filter(|b| b.get("type") != Some(&json!("null")))
                .map(|b| synth(b, root, depth + 1, examples))
                .collect();
            let whole = with_defs(schema, root);
            return candidates
                .iter()
                .find(|c| valid(&whole, c))
                .or(candidates.first())
                .cloned()
                .unwrap_or(Value::Null);
        }
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if o.contains_key("properties") => "object",
        _ => "",
    };
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    match ty {
        "string" => match o.get("format").and_then(Value::as_str) {
            Some("date") => json!("2026-01-02"),
            Some("date-time") => json!("2026-01-02T09:00:00Z"),
            Some("email") => json!("ann@example.com"),
            Some("uuid") => json!("00000000-0000-4000-8000-000000000000"),
            Some("uri" | "url") => json!("https://example.com/"),
            _ => {
                let n = num("minLength").unwrap_or(1.0).max(1.0) as usize;
                let plain = json!("x".repeat(n));
                match o.get("pattern") {
                    // A few shapes patterns usually ask for, tried in turn.
                    Some(p) => [
                        "1",
                        "x",
                        "1.5",
                        "ab12",
                        "A1",
                        "x-1",
                        "2026-01-02",
                        "en",
                        "#abcdef",
                        "#abc",
                        "a_b",
                        "+15550100",
                        "1.00",
                    ]
                    .iter()
                    .map(|c| json!(c))
                    .find(|c| valid(&json!({"type": "string", "pattern": p}), c))
                    .unwrap_or(plain),
                    None => plain,
                }
            }
        },
        "integer" | "number" => {
            let v = num("minimum")
                .or(num("exclusiveMinimum").map(|m| m + 1.0))
                .unwrap_or(1.0)
                .min(num("maximum").unwrap_or(f64::MAX));
            if ty == "integer" {
                json!(v.ceil() as i64)
            } else {
                json!(v)
            }
        }
        "boolean" => json!(true),
        "null" => Value::Null,
        "array" => {
            let n = num("minItems").unwrap_or(0.0) as usize;
            let item = o.get("items").cloned().unwrap_or(json!({}));
            Value::Array(
                (0..n)
                    .map(|_| synth(&item, root, depth + 1, examples))
                    .collect(),
            )
        }
        "object" => {
            let mut m = Map::new();
            let props = o.get("properties").and_then(Value::as_object);
            for r in o
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(r) = r.as_str() else { continue };
                let s = props.and_then(|p| p.get(r)).cloned().unwrap_or(json!({}));
                m.insert(r.to_string(), synth(&s, root, depth + 1, examples));
            }
            Value::Object(m)
        }
        _ => json!("x"),
    }
}

fn with_defs(schema: &Value, root: &Value) -> Value {
    let mut s = schema.clone();
    if let (Value::Object(o), Some(d)) = (&mut s, root.get("$defs")) {
        o.insert("$defs".into(), d.clone());
    }
    s
}

fn valid(schema: &Value, v: &Value) -> bool {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .map(|c| c.is_valid(v))
        .unwrap_or(false)
}

fn example_for(schema: &Value) -> Value {
    let v = synth(schema, schema, 0, true);
    if valid(schema, &v) {
        v
    } else {
        synth(schema, schema, 0, false)
    }
}

/// One route of the generic backend: method, path template and the body it answers.
struct Route {
    method: String,
    segments: Vec<String>,
    answer: Value,
}

fn matches(template: &[String], path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    parts.len() == template.len()
        && template.iter().zip(&parts).all(|(t, p)| match t.find('{') {
            None => t == p,
            Some(i) => {
                let tail = &t[t.find('}').map_or(t.len(), |j| j + 1)..];
                p.starts_with(&t[..i]) && p.ends_with(tail) && p.len() > i + tail.len()
            }
        })
}

/// Serves the generated mapping through portico, with a backend that answers each operation
/// with a value valid for its documented response; calls every read tool with rmcp.
async fn call_every_read_tool(doc: &Path, name: &str) -> usize {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let routes: Arc<Mutex<Vec<Route>>> = Arc::default();
    let hits: Arc<Mutex<Vec<String>>> = Arc::default();
    let (r2, h2) = (routes.clone(), hits.clone());
    common::serve_with(listener, move |req| {
        let (routes, hits) = (r2.clone(), h2.clone());
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            hits.lock().unwrap().push(format!("{method} {path}"));
            let answer = routes
                .lock()
                .unwrap()
                .iter()
                .find(|r| r.method == method && matches(&r.segments, &path))
                .map(|r| r.answer.clone());
            match answer {
                Some(a) => Response::builder()
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(a.to_string())))
                    .unwrap(),
                None => Response::builder()
                    .status(404)
                    .body(Full::new(Bytes::from_static(b"{}")))
                    .unwrap(),
            }
        }
    });
    let backend = format!("http://127.0.0.1:{port}");
    let (out, _) = init_and_check(doc, name, &["--backend", &backend]);
    let mapping: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(file_with(&out, ".yaml")).unwrap())
            .unwrap();
    let gw = common::gateway(std::slice::from_ref(&out)).await;
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("portico-init-test", "1.0.0"),
    )
    .serve(StreamableHttpClientTransport::from_uri(format!(
        "http://{}/mcp",
        gw.addr
    )))
    .await
    .expect("rmcp connects");
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut called = 0;
    for tool in &tools {
        if tool.annotations.as_ref().and_then(|a| a.read_only_hint) != Some(true) {
            continue;
        }
        let spec = &mapping["tools"][tool.name.as_ref()];
        let (method, path) = spec["http"].as_str().unwrap().split_once(' ').unwrap();
        let answer = match &tool.output_schema {
            Some(s) => {
                let v = example_for(&Value::Object((**s).clone()));
                if spec.get("result").is_some() {
                    v["result"].clone()
                } else {
                    v
                }
            }
            None => json!({}),
        };
        *routes.lock().unwrap() = vec![Route {
            method: method.to_string(),
            segments: path.split('/').map(str::to_string).collect(),
            answer,
        }];
        let input = Value::Object((*tool.input_schema).clone());
        let Value::Object(args) = synth(&input, &input, 0, false) else {
            panic!("arguments of {} are not an object", tool.name)
        };
        let before = hits.lock().unwrap().len();
        let r = client
            .call_tool(CallToolRequestParams::new(tool.name.clone()).with_arguments(args.clone()))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", tool.name));
        assert_ne!(
            r.is_error,
            Some(true),
            "{name}: {} with {args:?} failed: {r:?}",
            tool.name
        );
        if tool.output_schema.is_some() {
            assert!(r.structured_content.is_some(), "{}: {r:?}", tool.name);
        }
        assert_eq!(
            hits.lock().unwrap().len(),
            before + 1,
            "{}: one backend request",
            tool.name
        );
        called += 1;
    }
    let _ = client.cancel().await;
    called
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_calls_every_generated_read_tool_against_a_live_backend() {
    for (doc, name, at_least) in [
        (
            "openapi/oai-examples/v3.0/petstore.yaml",
            "live-petstore",
            2,
        ),
        (
            "openapi/oai-examples/v3.0/petstore-expanded.json",
            "live-expanded",
            2,
        ),
        (
            "openapi/oai-examples/v3.1/tictactoe.yaml",
            "live-tictactoe",
            2,
        ),
        (
            "openapi/oai-examples/v3.2/3.2-tags-example.yaml",
            "live-tags",
            2,
        ),
        ("openapi/medusa-store/openapi.yaml", "live-medusa", 15),
        ("openapi/pretalx/schema.yml", "live-pretalx", 50),
    ] {
        let n = call_every_read_tool(&upstream(doc), name).await;
        eprintln!("{doc}: {n} read tools called");
        assert!(n >= at_least, "{doc}: only {n} read tools called");
    }
}
