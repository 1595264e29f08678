//! `portico check`: every mistake names the file, the line (or JSON pointer) and a fix.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn workdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portico-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let openrpc = Path::new(env!("CARGO_MANIFEST_DIR")).join("openrpc/usp.openrpc.json");
    std::fs::copy(openrpc, d.join("usp.openrpc.json")).unwrap();
    d
}

fn check(paths: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_portico"))
        .arg("check")
        .args(paths)
        .output()
        .expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

const HEAD: &str = "business: spa\nbinding: usp\nopenrpc: usp.openrpc.json\nbackend:\n  url: http://127.0.0.1:1/api\n";

#[test]
fn the_shipped_configuration_checks_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // mappings/usp-facade.yaml derives its routes from the fetched USP documents.
    common::upstream("usp/openapi/usp-rest.json");
    let (code, text) = check(&[
        &root.join("mappings"),
        &root.join("openrpc/usp.openrpc.json"),
        &root.join("openrpc/ucp-lodging.openrpc.json"),
        &root.join("openrpc/ucp-ask.openrpc.json"),
    ]);
    assert_eq!(code, 0, "{text}");
    // 8 business mappings and the 2 facade mappings (reverse path), whose routes are no tools.
    assert!(text.starts_with("ok: 10 file(s), 60 tool(s)"), "{text}");
}

#[test]
fn each_mistake_points_at_file_line_and_fix() {
    let d = workdir("mistakes");
    // (mapping body after HEAD, expected line, expected fragments)
    let cases: &[(&str, usize, &[&str])] = &[
        (
            "tools:\n  usp_booking_create:\n    http: POST /b\n",
            7,
            &[
                "tool `usp_booking_create` is not a method",
                "did you mean `usp_bookings_create`",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: FETCH /b/{booking_id}\n",
            8,
            &["unknown HTTP method `FETCH`", "GET, POST"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{bookingid}\n",
            8,
            &["placeholder `{bookingid}` is not a param", "booking_id"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    result: '{ a: .b '\n",
            9,
            &["result:", "jq syntax"],
        ),
        (
            // A literal block: the line is the mistake's own, the column the file's.
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    result: |\n      { booking:\n          .appointment |, id: 1 }\n",
            11,
            &[
                "result:",
                "near column 25 of this line: `.appointment |, id: 1 }`",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    query:\n      a: .x\n      b: '.y |'\n",
            11,
            &["query.b:", "near column 5 of `.y |`"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    outcomes:\n      409:\n        business: slot_unavailable\n        content_from: |\n          .a\n          | .b |\n",
            14,
            &["content_from:", "near column 17 of this line: `| .b |`"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    result: '.a | nosuch'\n",
            9,
            &["undefined filter `nosuch`"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    outcomes:\n      404: { error: nope }\n",
            10,
            &[
                "`nope` is not an error code of the usp binding",
                "revision_mismatch",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    outcomes:\n      99x: { error: invalid_request }\n",
            10,
            &["`99x` is not an HTTP status"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    htp: GET /b/{booking_id}\n",
            8,
            &["htp", "did you mean `http`?"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    summary: '{{ booking.id '\n",
            9,
            &["summary template"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    input_schema:\n      type: array\n",
            9,
            &["`type: object` at its root", "add `type: object`"],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    input_schema:\n      type: object\n      properties: { a: { $ref: 'https://example.com/a.json' } }\n",
            9,
            &[
                "`$ref: https://example.com/a.json`",
                "not a local reference",
                "#/$defs/NAME",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    mcp_headers: { nope: X, booking_id: 'Bad Name' }\n",
            9,
            &[
                "`nope` is not a param",
                "`Bad Name` cannot end an `Mcp-Param-` header name",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    long_running:\n      states: { RUNNING: busy }\n",
            10,
            &[
                "`busy` (for backend state `RUNNING`) is not a task state",
                "working, completed, failed, cancelled",
                "maps no backend state to `completed`",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\n    long_running:\n      states: { DONE: completed }\n      poll_every: soon\n      cancel: FETCH\n      task: maybe\n",
            11,
            &[
                "`soon` is not a positive duration",
                "cancel: unknown HTTP method `FETCH`",
                "task: `maybe` is neither optional nor required",
            ],
        ),
    ];
    expect_mistakes(&d, HEAD, cases);
}

#[test]
fn backend_and_file_mistakes() {
    let d = workdir("backend");
    let p = d.join("m.yaml");
    std::fs::write(&p, "business: spa\nbinding: usp\nopenrpc: missing.json\nbackend:\n  url: http://127.0.0.1:1\ntools: {}\n").unwrap();
    let (code, text) = check(&[&p]);
    assert_eq!(code, 1);
    assert!(
        text.contains(&format!("{}:3", p.display())) && text.contains("not found"),
        "{text}"
    );

    std::fs::write(&p, "business: spa\nbinding: soap\nopenrpc: usp.openrpc.json\nbackend:\n  url: http://127.0.0.1:1\ntools: {}\n").unwrap();
    let (_, text) = check(&[&p]);
    assert!(
        text.contains(&format!("{}:2", p.display()))
            && text.contains("use one of: usp, ucp, plain"),
        "{text}"
    );

    std::fs::write(&p, "business: spa\nbinding: usp\nopenrpc: usp.openrpc.json\nbackend:\n  url: ftp://x\n  timeout: soon\n  headers:\n    X-Key: \"${PORTICO_CHECK_UNSET_VAR}\"\ntools: {}\n").unwrap();
    let (_, text) = check(&[&p]);
    assert!(
        text.contains(&format!("{}:5", p.display())) && text.contains("not an http(s) URL"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}:6", p.display())) && text.contains("`soon` is not a duration"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}:8", p.display())) && text.contains("PORTICO_CHECK_UNSET_VAR"),
        "{text}"
    );

    // A backend mistake does not hide the tools' mistakes: one run lists both.
    std::fs::write(&p, "business: spa\nbinding: usp\nopenrpc: usp.openrpc.json\nbackend:\n  url: http://127.0.0.1:1\n  timeout: 5x\ntools:\n  usp_bookings_get:\n    http: GET /b/{bookingid}\n").unwrap();
    let (code, text) = check(&[&p]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!("{}:6", p.display())) && text.contains("`5x` is not a duration"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}:9", p.display()))
            && text.contains("placeholder `{bookingid}` is not a param"),
        "{text}"
    );
    assert!(text.contains("check failed: 2 error(s)"), "{text}");

    std::fs::write(
        &p,
        "business: spa\nbinding: usp\nopenrpc: usp.openrpc.json\nbackend: [oops\n",
    )
    .unwrap();
    let (code, text) = check(&[&p]);
    assert_eq!(code, 1);
    assert!(text.contains(&format!("{}:", p.display())), "{text}");
}

#[test]
fn openrpc_reference_errors_name_document_and_pointer() {
    let d = workdir("refs");
    let doc = d.join("bad.openrpc.json");
    std::fs::write(
        &doc,
        r##"{
  "openrpc": "1.3.2",
  "info": { "title": "t", "version": "1" },
  "methods": [
    {
      "name": "m1",
      "params": [
        { "name": "a", "schema": { "$ref": "#/components/schemas/Missing" } }
      ],
      "result": { "name": "r", "schema": { "$ref": "nowhere.json#/X" } }
    }
  ]
}"##,
    )
    .unwrap();
    let (code, text) = check(&[&doc]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("/methods/0/params/0/schema/$ref"), "{text}");
    assert!(text.contains("/methods/0/result/schema/$ref"), "{text}");
    assert!(text.contains(&format!("{}:8", doc.display())), "{text}");
    std::fs::write(&doc, "{ \"openrpc\": 3 ").unwrap();
    let (code, text) = check(&[&doc]);
    assert_eq!(code, 1);
    assert!(text.contains("line 1"), "{text}");
}

#[test]
fn resource_prompt_and_content_mistakes_point_at_file_line_and_fix() {
    let d = workdir("surface");
    let openrpc = Path::new(env!("CARGO_MANIFEST_DIR")).join("openrpc/conformance.openrpc.json");
    std::fs::copy(openrpc, d.join("conformance.openrpc.json")).unwrap();
    const PLAIN: &str = "business: f\nbinding: plain\nopenrpc: conformance.openrpc.json\nbackend:\n  url: http://127.0.0.1:1/v1\n";
    let cases: &[(&str, usize, &[&str])] = &[
        (
            "tools: {}\nresources:\n  \"test://x/{id}\":\n    http: POST /x/{id}\n    name: x\n",
            9,
            &[
                "resources are read with GET, not `POST`",
                "hint: write `http: GET",
            ],
        ),
        (
            "tools: {}\nresources:\n  \"test://x/{id}\":\n    http: GET /x/{idd}\n    name: x\n",
            9,
            &[
                "placeholder `{idd}` is not a variable",
                "hint: variables: id",
            ],
        ),
        (
            "tools: {}\nresources:\n  \"test://x/{id}{n}\":\n    http: GET /x\n    name: x\n",
            8,
            &["two variables need a literal", "hint:"],
        ),
        (
            "tools: {}\nprompts:\n  p:\n    description: d\n    messages:\n      - text: \"hi {{ who }}\"\n",
            10,
            &[
                "undeclared argument(s): who",
                "hint: declare them under `prompts.p.arguments`",
            ],
        ),
        (
            "tools: {}\nprompts:\n  p:\n    description: d\n    messages:\n      - role: system\n        text: x\n",
            10,
            &["unknown role `system`", "hint: use `user` or `assistant`"],
        ),
        (
            "tools:\n  test_image_content:\n    http: GET /i\n    content: { kind: picture }\n",
            9,
            &[
                "unknown content kind `picture`",
                "hint: use one of: media, embedded, link, blocks",
            ],
        ),
        (
            "tools:\n  test_simple_text:\n    http: GET /g\n    content: { kind: blocks, blocks: '[.x]' }\n",
            9,
            &[
                "answers without structuredContent",
                "hint: remove the method's `result`",
            ],
        ),
        (
            "tools:\n  test_embedded_resource:\n    http: GET /e\n    content:\n      kind: embedded\n",
            10,
            &["`kind: embedded` needs `uri`", "hint:"],
        ),
    ];
    expect_mistakes(&d, PLAIN, cases);
}

/// Checks each mapping body (after `head`): exit 1, the file:line, and every fragment.
fn expect_mistakes(d: &Path, head: &str, cases: &[(&str, usize, &[&str])]) {
    for (body, line, fragments) in cases {
        let p = d.join("m.yaml");
        std::fs::write(&p, format!("{head}{body}")).unwrap();
        let (code, text) = check(&[&p]);
        assert_eq!(code, 1, "{body}\n{text}");
        let at = format!("{}:{line}", p.display());
        assert!(
            text.contains(&at),
            "expected `{at}` in:\n{text}\nfor:\n{body}"
        );
        for f in *fragments {
            assert!(text.contains(f), "expected `{f}` in:\n{text}");
        }
    }
}

#[test]
fn facade_mappings_are_checked_with_line_and_fix() {
    let d = workdir("facade");
    let file = d.join("bad-facade.yaml");
    std::fs::write(
        &file,
        "facade: x\nbinding: usb\nupstream:\n  url: ftp://x\n  timeout: soon\nroutes:\n  GET /a/{b: t\nderive:\n  openrpc: missing.json\n  openapi: missing.json\n",
    )
    .unwrap();
    let (code, text) = check(&[&d]);
    assert_eq!(code, 1, "{text}");
    for (line, fragment) in [
        (2, "unknown binding `usb`"),
        (4, "`ftp://x` is not an http(s) URL"),
        (5, "`soon` is not a duration"),
        (7, "route `GET /a/{b`"),
        (8, "cannot read"),
    ] {
        let at = format!("bad-facade.yaml:{line}:");
        assert!(
            text.lines()
                .any(|l| l.contains(&at) && l.contains(fragment)),
            "no `{at}` ... `{fragment}` in:\n{text}"
        );
    }
    assert!(text.contains("hint:"), "{text}");
    // A folder of facade mappings only is not a folder without mappings.
    assert!(!text.contains("no mapping files"), "{text}");
}

#[test]
fn mcp_authorization_mistakes_point_at_file_line_and_fix() {
    let d = workdir("mcp-authorization");
    const TOOLS: &str =
        "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\nmcp_authorization:\n";
    let cases: &[(&str, usize, &[&str])] = &[
        (
            "  issuers: [http://login.example.com]\n",
            10,
            &[
                "must be https",
                "hint: write the authorization server's issuer",
            ],
        ),
        (
            "  issuers: [https://login.example.com]\n  tiers:\n    gold: [a]\n",
            11,
            &["`gold` is not an access tier", "hint: use public"],
        ),
        (
            "  tools:\n    usp_nope: [a]\n",
            11,
            &[
                "`usp_nope` is not a tool of this mapping",
                "hint: name a tool",
            ],
        ),
        (
            "  scopes: [\"a b\"]\n",
            9,
            &[
                "`a b` is not a scope token",
                "hint: a scope is visible ASCII",
            ],
        ),
        (
            "  resource: not-a-uri\n",
            10,
            &[
                "is not an absolute http(s) URI",
                "hint: write the public URL",
            ],
        ),
    ];
    let cases: Vec<(String, usize, &[&str])> = cases
        .iter()
        .map(|(b, l, f)| (format!("{TOOLS}{b}"), *l, *f))
        .collect();
    let borrowed: Vec<(&str, usize, &[&str])> =
        cases.iter().map(|(b, l, f)| (b.as_str(), *l, *f)).collect();
    expect_mistakes(&d, HEAD, &borrowed);
}

#[test]
fn backend_oauth_mistakes_point_at_file_line_and_fix() {
    let d = workdir("backend-oauth");
    const OAUTH: &str = "  oauth:\n    client_id: portico\n";
    let cases: &[(&str, usize, &[&str])] = &[
        (
            "    token_url: http://as.example/token\n    client_secret: s\ntools: {}\n",
            8,
            &["is not an https URL", "hint: write the token endpoint"],
        ),
        (
            "    token_url: https://as.example/token\n    client_secret: ${PORTICO_TEST_UNSET_SECRET_VAR}\ntools: {}\n",
            9,
            &["client secret:", "hint: set the variable"],
        ),
        (
            "    token_url: https://as.example/token\n    client_secret: s\n    audience: https://api.example\ntools: {}\n",
            10,
            &[
                "`audience` applies to `grant: token_exchange` only",
                "hint: remove it, or set `grant: token_exchange`",
            ],
        ),
        (
            "    token_url: https://as.example/token\n    client_secret: s\n    grant: password\ntools: {}\n",
            10,
            &[
                "unknown variant `password`",
                "client_credentials",
                "token_exchange",
            ],
        ),
    ];
    expect_mistakes(&d, &format!("{HEAD}{OAUTH}"), cases);
}

#[test]
fn an_unresolved_ref_offers_the_nearest_name() {
    let d = workdir("ref-hint");
    std::fs::write(
        d.join("svc.openrpc.json"),
        r##"{
  "openrpc": "1.3.2",
  "info": { "title": "t", "version": "1" },
  "methods": [
    { "name": "get_booking", "params": [
        { "name": "booking", "schema": { "$ref": "#/components/schemas/Bokking" } } ],
      "result": { "name": "r", "schema": { "type": "object" } } }
  ],
  "components": { "schemas": { "Booking": { "type": "object" } } }
}"##,
    )
    .unwrap();
    let mapping = d.join("svc.yaml");
    std::fs::write(
        &mapping,
        "business: svc\nbinding: plain\nopenrpc: svc.openrpc.json\nbackend:\n  url: http://127.0.0.1:1/api\ntools:\n  get_booking:\n    http: GET /bookings\n",
    )
    .unwrap();
    let (code, text) = check(&[&mapping]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("svc.openrpc.json#/components/schemas/Bokking`")
            && text.contains("hint: did you mean `$ref: #/components/schemas/Booking`?"),
        "{text}"
    );
}

#[test]
fn todo_entries_are_errors_naming_their_candidates() {
    let d = workdir("todo");
    let cases: &[(&str, usize, &[&str])] = &[
        (
            // What `portico init --openrpc` writes for a method it could not pair.
            "tools: {}\ntodo:\n  usp_bookings_get:\n    reason: \"two operations fit about as well\"\n    candidates:\n      - \"GET /b/{booking_id} (getB): score 80, same name\"\n",
            8,
            &[
                "TODO: method `usp_bookings_get` is not paired with a backend operation (two operations fit about as well), so it is not served",
                "candidates: GET /b/{booking_id} (getB): score 80, same name",
                "Move it under `tools:`",
            ],
        ),
        (
            "tools: {}\ntodo:\n  usp_bookings_gett: {}\n",
            8,
            &[
                "todo: `usp_bookings_gett` is not a method",
                "delete the entry",
            ],
        ),
        (
            "tools:\n  usp_bookings_get:\n    http: GET /b/{booking_id}\ntodo:\n  usp_bookings_get: {candidates: []}\n",
            10,
            &["`usp_bookings_get` is both under `tools:` and under `todo:`"],
        ),
        (
            "tools: {}\ntodo:\n  usp_bookings_get:\n    candidate: []\n",
            9,
            &["unknown field `candidate`", "did you mean `candidates`"],
        ),
    ];
    expect_mistakes(&d, HEAD, cases);
}

/// A mapping body whose `usp_bookings_create` has the given `schema_patches:` items.
macro_rules! patched {
    ($items:literal) => {
        concat!(
            "tools:\n  usp_bookings_create:\n    http: POST /b\n    schema_patches:\n",
            $items
        )
    };
}

#[test]
fn schema_patch_mistakes_point_at_the_item_and_every_patch_is_noted() {
    let d = workdir("schema-patches");
    let cases: &[(&str, usize, &[&str])] = &[
        (
            patched!(
                "      - {target: params.buyer, op: replace, pointer: /properties/first_name, value: {type: string}}\n      - {target: params.buyer, op: replace, pointer: /properties/nope/type, value: integer}\n"
            ),
            11,
            &[
                "pointer `/properties/nope/type` into `params.buyer` does not resolve: `/properties` has no `nope`",
                "a `$ref` is followed",
            ],
        ),
        (
            patched!("      - {target: params.byer, op: remove, pointer: /required}\n"),
            10,
            &["no param `byer`", "the params are:", "buyer"],
        ),
        (
            patched!("      - {target: output, op: remove, pointer: /required}\n"),
            10,
            &["unknown target `output`", "`params.<name>` or `result`"],
        ),
        (
            patched!("      - {target: result, op: add, pointer: /properties/x}\n"),
            10,
            &["needs a `value`"],
        ),
    ];
    expect_mistakes(&d, HEAD, cases);

    // A clean patch list: one `note:` line per patch, in order.
    let p = d.join("m.yaml");
    let body = patched!(
        "      - {target: params.buyer, op: remove, pointer: /required/1}\n      - {target: result, op: add, pointer: /properties/receipt, value: {type: string}}\n"
    );
    std::fs::write(&p, format!("{HEAD}{body}")).unwrap();
    let (code, text) = check(&[&p]);
    assert_eq!(code, 0, "{text}");
    for note in [
        "note: tool `usp_bookings_create` patches its `params.buyer` schema: remove `/required/1` (schema_patches[0])",
        "note: tool `usp_bookings_create` patches its `result` schema: add `/properties/receipt` (schema_patches[1])",
    ] {
        assert!(text.contains(note), "expected `{note}` in:\n{text}");
    }
}

#[test]
fn follow_up_mistakes_point_at_file_line_and_fix() {
    let d = workdir("follow-up");
    let cases: &[(&str, usize, &[&str])] = &[
        (
            "tools:\n  usp_bookings_cancel:\n    http: POST /b/{booking_id}/cancel\n    outcomes:\n      409:\n        business: booking_not_cancellable\n        follow_up: {method: POST, path: '/b/{booking_id}'}\n",
            10,
            &["a follow-up read cannot be `POST`", "use `GET` or `HEAD`"],
        ),
        (
            "tools:\n  usp_bookings_cancel:\n    http: POST /b/{booking_id}/cancel\n    outcomes:\n      409:\n        business: booking_not_cancellable\n        follow_up: {path: '/b/{booking}'}\n",
            9,
            &[
                "the follow-up read's `{booking}` is no param of `usp_bookings_cancel`",
                "booking_id",
            ],
        ),
        (
            "tools:\n  usp_bookings_cancel:\n    http: POST /b/{booking_id}/cancel\n    outcomes:\n      409:\n        error: idempotency_conflict\n        follow_up: {path: '/b/{booking_id}'}\n",
            10,
            &["`follow_up` only applies to `business` outcomes"],
        ),
    ];
    expect_mistakes(&d, HEAD, cases);
}
