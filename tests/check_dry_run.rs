//! `portico check --try TOOL --args JSON [--response STATUS:FILE]`: the exact backend request a
//! call would send (credentials masked) and the reply a sample answer becomes, with nothing sent.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_portico");

fn check(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn answer(name: &str, body: &str) -> String {
    let p = std::env::temp_dir().join(format!("portico-dry-{}-{name}.json", std::process::id()));
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn the_request_is_printed_with_its_secret_masked_and_nothing_is_sent() {
    // 127.0.0.1:9101 (the demo backend's port) is not listening in this test: nothing is sent.
    let (code, said) = check(&[
        "mappings/demo-spa.yaml",
        "--try",
        "usp_availability_query",
        "--args",
        r#"{"service_id":"MASSAGE-60","start_date":"2026-12-01","end_date":"2026-12-02"}"#,
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("request (not sent):\n  GET http://127.0.0.1:9101/spa/v1/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-02\n"), "{said}");
    assert!(said.contains("x-api-key: *** (masked)"), "{said}");
    assert!(
        !said.contains("demo-key"),
        "the key's value never shows: {said}"
    );
}

#[test]
fn a_sample_answer_becomes_the_result_the_client_would_get() {
    let body = answer(
        "ok",
        r#"{"treatment":{"code":"FACIAL-45","title":"Sea-mineral facial","blurb":"b","category":"face","minutes":45,"price":{"amount_cents":6500,"ccy":"EUR"}}}"#,
    );
    let (code, said) = check(&[
        "mappings/demo-spa.yaml",
        "--try",
        "usp_services_get",
        "--args",
        r#"{"service_id":"FACIAL-45"}"#,
        "--response",
        &format!("200:{body}"),
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("with a 200 answer, the client gets this result:"),
        "{said}"
    );
    assert!(
        said.contains("\"text\": \"Sea-mineral facial: PT45M, 6500 EUR minor units.\""),
        "{said}"
    );
    // A 404 answer takes the tool's outcome rule.
    let missing = answer("missing", "{}");
    let (code, said) = check(&[
        "mappings/demo-spa.yaml",
        "--try",
        "usp_services_get",
        "--args",
        r#"{"service_id":"NOPE"}"#,
        "--response",
        &format!("404:{missing}"),
    ]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("the client gets an error"), "{said}");
    assert!(said.contains("No such service."), "{said}");
}

#[test]
fn an_answer_that_does_not_fit_the_output_schema_is_refused_as_at_run_time() {
    let body = answer("bad", r#"{"treatment":{"code":"FACIAL-45"}}"#);
    let (code, said) = check(&[
        "mappings/demo-spa.yaml",
        "--try",
        "usp_services_get",
        "--args",
        r#"{"service_id":"FACIAL-45"}"#,
        "--response",
        &format!("200:{body}"),
    ]);
    assert_eq!(code, Some(1), "{said}");
    // The deepest failing place of the closest branch, not the root `anyOf`.
    assert!(
        said.contains("does not fit the tool's output schema (at `/service/categories/0/name`: `type` does not hold; schema rule `/$defs/usp.openrpc.ServiceCategory/properties/name/type`)"),
        "{said}"
    );
}

#[test]
fn bad_arguments_and_unknown_tools_are_refused_before_any_request() {
    let (code, said) = check(&[
        "mappings/demo-spa.yaml",
        "--try",
        "usp_services_get",
        "--args",
        "{}",
    ]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("arguments refused before any backend call"),
        "{said}"
    );
    assert!(!said.contains("request (not sent)"), "{said}");
    let (code, said) = check(&["mappings/demo-spa.yaml", "--try", "usp_service_get"]);
    assert_eq!(code, Some(1));
    assert!(said.contains("did you mean `usp_services_get`?"), "{said}");
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mappings/demo-spa.yaml")
            .exists()
    );
}
