//! UCP's published shopping service served unchanged: each tool's input schema is the request
//! variant of the response-shaped schemas it references (`ucp_request` annotations), so the
//! spec's own request examples pass, while output schemas stay as published.
//!
//! The examples come from the spec texts (`docs/specification/shopping/{checkout,cart}/mcp.md`,
//! fetched with the protocol files): every block marked `<!-- ucp:example ... direction=request -->`
//! whose JSON is complete is a `tools/call` request; its arguments are validated against the tool
//! portico serves. Nothing here calls a backend.

mod common;

use common::upstream;
use portico::config::Gateway;
use serde_json::Value;
use std::path::PathBuf;

fn mapping() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/ucp-shopping.yaml")
}

/// The mapping, with `extra` appended under every tool (e.g. `request_variant: none`).
fn load(extra: &str) -> Gateway {
    let text = std::fs::read_to_string(mapping()).unwrap();
    let text = if extra.is_empty() {
        text
    } else {
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(line);
            out.push('\n');
            if line.starts_with("    http: ") {
                out.push_str(&format!("    {extra}\n"));
            }
        }
        out
    };
    // Beside the original, so its relative paths still reach `.upstream/`.
    let file = mapping().with_file_name(format!(
        "ucp-shopping-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&file, text).unwrap();
    let loaded = portico::config::load(std::slice::from_ref(&file));
    std::fs::remove_file(&file).unwrap();
    loaded.unwrap_or_else(|ds| {
        panic!(
            "{}",
            ds.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// Every complete request example of the spec texts: (file, line, tool, arguments).
fn request_examples() -> Vec<(String, usize, String, Value)> {
    let mut out = Vec::new();
    for doc in ["checkout", "cart"] {
        let rel = format!("ucp/docs/specification/shopping/{doc}/mcp.md");
        let text = std::fs::read_to_string(upstream(&rel)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !(line.contains("<!-- ucp:example") && line.contains("direction=request")) {
                continue;
            }
            // The fenced block that follows.
            let Some(open) =
                (i + 1..lines.len()).find(|&j| lines[j].trim_start().starts_with("```"))
            else {
                continue;
            };
            let Some(close) =
                (open + 1..lines.len()).find(|&j| lines[j].trim_start().starts_with("```"))
            else {
                continue;
            };
            let json: String = lines[open + 1..close].join("\n");
            let Ok(req) = serde_json::from_str::<Value>(&json) else {
                continue; // an abridged example (`[ ... ]`): not JSON
            };
            let params = &req["params"];
            let Some(tool) = params["name"].as_str() else {
                continue;
            };
            out.push((
                rel.clone(),
                i + 1,
                tool.to_string(),
                params["arguments"].clone(),
            ));
        }
    }
    out
}

#[test]
fn the_specs_own_request_examples_fit_the_served_input_schemas() {
    let g = load("");
    let examples = request_examples();
    let tools: Vec<&str> = examples.iter().map(|e| e.2.as_str()).collect();
    for needed in ["create_checkout", "update_checkout", "create_cart"] {
        assert!(
            tools.contains(&needed),
            "the spec texts lost their complete `{needed}` example: {tools:?}"
        );
    }
    let mut checked = 0;
    for (file, line, tool, args) in &examples {
        let Some(t) = g.tools.get(tool.as_str()) else {
            continue; // a tool this shop does not map
        };
        let errors: Vec<String> = t
            .input_validator
            .iter_errors(args)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{file}:{line} `{tool}`: the spec's example is refused:\n{}",
            errors.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} examples checked");
}

#[test]
fn served_as_published_the_create_example_is_refused() {
    let g = load("request_variant: none");
    let (_, _, _, args) = request_examples()
        .into_iter()
        .find(|e| e.2 == "create_checkout")
        .expect("a create_checkout example");
    let t = &g.tools["create_checkout"];
    assert!(t.request_variant.is_none());
    let errors: Vec<String> = t
        .input_validator
        .iter_errors(&args)
        .map(|e| e.to_string())
        .collect();
    for missing in ["\"ucp\"", "\"id\"", "\"status\""] {
        assert!(
            errors
                .iter()
                .any(|e| e.contains(missing) && e.contains("required")),
            "{missing}: {errors:?}"
        );
    }
}

#[test]
fn each_operation_gets_its_variant_and_results_keep_the_full_schema() {
    let g = load("");
    let checkout_of =
        |tool: &str| -> Value { g.tools[tool].descriptor.value()["inputSchema"].clone() };
    let required_of = |tool: &str| -> Vec<String> {
        let schema = checkout_of(tool);
        let node = resolve(&schema, &schema["properties"]["checkout"]);
        node["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(required_of("create_checkout"), ["line_items"]);
    assert_eq!(required_of("update_checkout"), ["line_items"]);
    assert!(
        !required_of("complete_checkout").contains(&"line_items".to_string()),
        "complete omits line_items"
    );
    let t = &g.tools["create_checkout"];
    let (op, changed) = t.request_variant.clone().unwrap();
    assert_eq!(op, "create");
    assert!(changed > 5, "{changed}");
    // The output schema still requires what a business answers.
    let out = t.descriptor.value()["outputSchema"].to_string();
    assert!(
        out.contains("\"totals\"") && out.contains("\"status\""),
        "{out}"
    );
}

/// Follows a local `$ref` (`#/$defs/...`) of `root`, once.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
        Some(ptr) => root.pointer(ptr).unwrap_or(node),
        None => node,
    }
}

#[test]
fn check_lists_every_request_variant() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .arg(mapping())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{text}");
    for (tool, op) in [
        ("create_checkout", "create"),
        ("update_checkout", "update"),
        ("complete_checkout", "complete"),
        ("create_cart", "create"),
    ] {
        assert!(
            text.contains(&format!(
                "note: tool `{tool}` serves the `{op}` request variant"
            )),
            "{tool}: {text}"
        );
    }
}
