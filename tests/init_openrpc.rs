//! `portico init --openapi FILE --openrpc FILE`: a protocol's published OpenRPC (USP, UCP shopping,
//! UCP lodging; fetched through upstream.lock) paired with its REST twin. `check` passes on what
//! is written, or lists exactly the TODOs with their candidates; bad input gets a clear message.

mod common;

use common::upstream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_portico");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portico-init-rpc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("portico runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `init` with `--openrpc` into a fresh folder; returns the folder, init's output, and `check`'s
/// exit code and output.
fn init(
    openapi: &str,
    openrpc: Option<&str>,
    name: &str,
    extra: &[&str],
) -> (PathBuf, String, i32, String) {
    let out = tmp(name);
    let api = upstream(openapi);
    let mut args = vec!["init", "--openapi", api.to_str().unwrap()];
    let rpc = openrpc.map(upstream);
    if let Some(r) = &rpc {
        args.extend(["--openrpc", r.to_str().unwrap()]);
    }
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = run(&args);
    let said = text(&o);
    assert!(o.status.success(), "init {name} failed:\n{said}");
    let c = run(&["check", out.to_str().unwrap()]);
    (out, said, c.status.code().unwrap_or(-1), text(&c))
}

fn mapping(folder: &Path) -> (PathBuf, String) {
    let p = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "yaml"))
        .expect("a mapping file");
    let t = std::fs::read_to_string(&p).unwrap();
    (p, t)
}

/// The `tools:` entries of a generated mapping, by name: `(name, http line)`.
fn tools(yaml: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    v["tools"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, t)| (k.clone(), t["http"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// The methods of an upstream OpenRPC, sorted (as `tools()` reads them).
fn methods(rel: &str) -> Vec<String> {
    let t = std::fs::read_to_string(upstream(rel)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    v["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[test]
fn usp_with_its_openrpc_pairs_every_method_by_its_declared_route() {
    let (out, said, code, checked) = init(
        "usp/openapi/usp-rest.json",
        Some("usp/openrpc/usp-mcp.json"),
        "usp",
        &[],
    );
    assert_eq!(code, 0, "{checked}");
    assert!(
        checked.starts_with("ok: 1 file(s), 27 tool(s)"),
        "{checked}"
    );
    assert!(
        said.contains("binding: usp (inferred from the OpenRPC's `x-usp-access` fields)"),
        "{said}"
    );
    assert!(said.contains("27 method(s) paired, 0 TODO(s)"), "{said}");
    let (_, yaml) = mapping(&out);
    // The OpenRPC is referenced where it lies, unchanged; nothing is copied.
    assert!(yaml.contains("binding: usp\n"), "{yaml}");
    assert!(yaml.contains("/usp/openrpc/usp-mcp.json\"\n"), "{yaml}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        2,
        "mapping + schema only"
    );
    assert!(
        yaml.contains("\"https://usp-protocol.dev/schemas/\": "),
        "{yaml}"
    );
    let got = tools(&yaml);
    assert_eq!(
        got.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        methods("usp/openrpc/usp-mcp.json")
    );
    // The same routes as the hand-written mapping of the same pair of documents.
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/usp-upstream.yaml"),
    )
    .unwrap();
    assert_eq!(got, tools(&fixture));
    assert!(
        yaml.contains("  usp_services_feed:\n    http: GET /services/feed\n    query:\n      cursor: .cursor\n"),
        "{yaml}"
    );
}

#[test]
fn usp_rest_alone_is_the_plain_binding() {
    let (_, said, code, checked) = init("usp/openapi/usp-rest.json", None, "usp-plain", &[]);
    assert_eq!(code, 0, "{checked}");
    assert!(
        said.contains("32 tool(s), 1 operation(s) skipped"),
        "{said}"
    );
    // A protocol binding without the protocol's OpenRPC is refused, saying what is missing.
    let out = tmp("usp-plain-bound");
    let o = run(&[
        "init",
        "--openapi",
        upstream("usp/openapi/usp-rest.json").to_str().unwrap(),
        "--binding",
        "usp",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--binding usp needs the protocol's OpenRPC document (--openrpc FILE)")
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn an_excluded_operation_leaves_its_method_as_a_todo_that_check_lists_with_candidates() {
    let (out, said, code, checked) = init(
        "usp/openapi/usp-rest.json",
        Some("usp/openrpc/usp-mcp.json"),
        "usp-todo",
        &["--exclude", "/bookings*"],
    );
    assert!(said.contains("20 method(s) paired, 7 TODO(s)"), "{said}");
    assert!(said.contains("check: 7 TODO(s) left"), "{said}");
    assert_eq!(code, 1, "{checked}");
    let (file, yaml) = mapping(&out);
    let expected = [
        "usp_bookings_create",
        "usp_bookings_get",
        "usp_bookings_update",
        "usp_bookings_confirm",
        "usp_bookings_cancel",
        "usp_bookings_reschedule",
        "usp_bookings_confirm_payment",
    ];
    let errors: Vec<&str> = checked
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(
        errors.len(),
        expected.len(),
        "exactly the TODOs:\n{checked}"
    );
    let lines: Vec<&str> = yaml.lines().collect();
    for (name, err) in expected.iter().zip(&errors) {
        // file:line of the entry under `todo:`, and the route the method's description names.
        let line = lines
            .iter()
            .position(|l| *l == format!("  {name}:"))
            .unwrap()
            + 1;
        assert!(lines[..line].contains(&"todo:"), "{name} is under todo:");
        assert!(
            err.contains(&format!("{}:{line} (todo.{name})", file.display())),
            "{err}"
        );
        assert!(
            err.contains(&format!("TODO: method `{name}` is not paired")),
            "{err}"
        );
        assert!(
            err.contains("which the backend document does not have"),
            "{err}"
        );
        assert!(
            !yaml.contains(&format!("  {name}:\n    http:")),
            "{name} is not served"
        );
    }
    // The candidates considered are named (or that none came close).
    let cancel = checked
        .split("error:")
        .find(|e| e.contains("`usp_bookings_cancel`"))
        .unwrap();
    assert!(
        cancel.contains("candidates: DELETE /services/feed/subscriptions/{subscription_id} (cancelFeedSubscription)"),
        "{cancel}"
    );
    let confirm = checked
        .split("error:")
        .find(|e| e.contains("`usp_bookings_confirm`"))
        .unwrap();
    assert!(
        confirm.contains("no backend operation came close"),
        "{confirm}"
    );
}

#[test]
fn ucp_shopping_with_its_openrpc_pairs_by_operation_id_and_places_the_body() {
    // The published shopping OpenRPC names no version: init refuses until it is given one.
    let out = tmp("ucp-shop-noversion");
    let o = run(&[
        "init",
        "--openapi",
        upstream("ucp/source/services/shopping/rest.openapi.json")
            .to_str()
            .unwrap(),
        "--openrpc",
        upstream("ucp/source/services/shopping/mcp.openrpc.json")
            .to_str()
            .unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("(/info/version): the OpenRPC names no `info.version`"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());

    let (out, said, code, checked) = init(
        "ucp/source/services/shopping/rest.openapi.json",
        Some("ucp/source/services/shopping/mcp.openrpc.json"),
        "ucp-shop",
        &["--protocol-version", "2026-01-11"],
    );
    assert_eq!(code, 0, "{checked}");
    assert!(
        checked.starts_with("ok: 1 file(s), 13 tool(s)"),
        "{checked}"
    );
    assert!(
        said.contains(
            "binding: ucp (inferred from the OpenRPC's info.title `UCP Shopping Service`)"
        ),
        "{said}"
    );
    let (_, yaml) = mapping(&out);
    let got = tools(&yaml);
    assert_eq!(
        got.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        methods("ucp/source/services/shopping/mcp.openrpc.json")
    );
    // The routes the hand-written shopping mapping uses for the same methods.
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/ucp-shopping.yaml"),
    )
    .unwrap();
    for (name, http) in tools(&fixture) {
        assert!(
            got.contains(&(name.clone(), http.clone())),
            "{name}: {http} in {got:?}"
        );
    }
    assert!(
        yaml.contains(
            "  create_checkout:\n    http: POST /checkout-sessions\n    body: .checkout\n"
        ),
        "{yaml}"
    );
    assert!(
        yaml.contains("  capability: dev.ucp.shopping.checkout\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("    capability: dev.ucp.shopping.cart\n"),
        "{yaml}"
    );
    assert!(yaml.contains("\"https://ucp.dev/schemas/\": "), "{yaml}");
    // --binding wins over what the OpenRPC names, and says so.
    let (_, said, code, checked) = init(
        "ucp/source/services/shopping/rest.openapi.json",
        Some("ucp/source/services/shopping/mcp.openrpc.json"),
        "ucp-shop-plain",
        &["--binding", "plain"],
    );
    assert!(
        said.contains("binding: plain (chosen by --binding)"),
        "{said}"
    );
    assert_eq!(code, 0, "{checked}");
}

#[test]
fn ucp_lodging_with_its_openrpc_warns_for_the_unpublished_schemas() {
    let (out, said, code, checked) = init(
        "ucp/source/services/lodging/rest.openapi.json",
        Some("ucp/source/services/lodging/mcp.openrpc.json"),
        "ucp-lodging",
        &["--protocol-version", "draft"],
    );
    assert_eq!(code, 0, "{checked}");
    assert!(checked.starts_with("ok: 1 file(s), 5 tool(s)"), "{checked}");
    assert!(said.contains("5 method(s) paired, 0 TODO(s)"), "{said}");
    let (_, yaml) = mapping(&out);
    assert!(yaml.contains("unresolved_refs: warn\n"), "{yaml}");
    assert!(
        yaml.contains("  capability: dev.ucp.lodging.booking\n"),
        "{yaml}"
    );
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/ucp-lodging-warn.yaml"),
    )
    .unwrap();
    assert_eq!(tools(&yaml), tools(&fixture));
    // Lodging's REST document alone: the plain binding.
    let (_, _, code, checked) = init(
        "ucp/source/services/lodging/rest.openapi.json",
        None,
        "ucp-lodging-plain",
        &[],
    );
    assert_eq!(code, 0, "{checked}");
}

#[test]
fn a_bad_openrpc_is_refused_naming_the_file_and_nothing_is_written() {
    let d = tmp("bad");
    std::fs::create_dir_all(&d).unwrap();
    let api = upstream("usp/openapi/usp-rest.json");
    let cases: [(&str, &str, &str); 3] = [
        (
            "broken.json",
            "{\"openrpc\": \"1.3.2\", \"methods\": [",
            "the OpenRPC document does not parse as JSON or YAML",
        ),
        (
            "nomethods.json",
            "{\"info\": {}}",
            "not an OpenRPC document: it has no `openrpc` version field",
        ),
        (
            "clash.json",
            r#"{"openrpc": "1.3.2", "info": {"title": "t", "version": "1"}, "methods": [
                {"name": "get_x", "params": []}, {"name": "get_x", "params": []}]}"#,
            "(/methods/1/name): method name clash: `get_x` is the name of /methods/0 and /methods/1",
        ),
    ];
    for (file, body, expected) in cases {
        let p = d.join(file);
        std::fs::write(&p, body).unwrap();
        let out = d.join(format!("out-{file}"));
        let o = run(&[
            "init",
            "--openapi",
            api.to_str().unwrap(),
            "--openrpc",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let said = text(&o);
        assert!(!o.status.success(), "{said}");
        assert!(
            said.contains(&format!("error: {}", p.display())),
            "names the file: {said}"
        );
        assert!(said.contains(expected), "{said}");
        assert!(!out.exists(), "nothing written for {file}");
    }
}
