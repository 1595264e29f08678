//! `backend.openapi`: `portico check` verifies a mapping against its backend's OpenAPI document
//! (method and path, query parameter names, fields the transforms read, with did-you-mean), and
//! the same mapping without it still loads; plus the diagnostics a stranger acts on (YAML line
//! and column, a `definitions` mistake reported once, an empty envelope version).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_portico");

fn messy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openapi/messy.yaml")
}

/// A mapping folder generated from the messy clinic document, then edited as a user would.
fn folder(name: &str, with_openapi: bool) -> (PathBuf, PathBuf) {
    let out = std::env::temp_dir().join(format!("portico-bdoc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(BIN)
        .args([
            "init",
            "--openapi",
            messy().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mapping = out.join("messy-clinic-api.yaml");
    let mut s = std::fs::read_to_string(&mapping).unwrap();
    if with_openapi {
        s = s.replacen(
            "  timeout: 10s\n",
            &format!("  timeout: 10s\n  openapi: {}\n", messy().display()),
            1,
        );
    }
    s = s.replacen(
        "    http: GET /appointments/{appointment_id}\n",
        "    http: GET /appointments/{appointment_id}\n    query: { verbose: .appointment_id }\n    result: '{ id: .apointment.id, who: .appointment.patient }'\n",
        1,
    );
    s = s.replacen("    http: GET /ghosts\n", "    http: GET /ghost\n", 1);
    std::fs::write(&mapping, s).unwrap();
    (out, mapping)
}

fn check(dir: &Path) -> (Option<i32>, String) {
    let o = Command::new(BIN).arg("check").arg(dir).output().unwrap();
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn line_of(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn a_jq_field_typo_a_wrong_path_and_an_unknown_query_name_are_caught_before_any_call() {
    let (dir, mapping) = folder("typo", true);
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1), "{said}");
    let m = mapping.display();
    let result_line = line_of(&mapping, "result: '{ id: .apointment.id");
    assert!(
        said.contains(&format!(
            "error: {m}:{result_line} (tools.getAppointment.result): `result` of `getAppointment` reads `.apointment`, which the answer of `GET /appointments/{{appointment_id}}` never has"
        )),
        "{said}"
    );
    assert!(
        said.contains("hint: did you mean `.appointment`?"),
        "{said}"
    );
    // `.appointment.patient` exists (in the cross-file schema): no error for it.
    assert!(!said.contains("`.patient`"), "{said}");
    let http_line = line_of(&mapping, "http: GET /ghost\n".trim_end());
    assert!(
        said.contains(&format!(
            "error: {m}:{http_line} (tools.listGhosts.http): `GET /ghost` is not an operation of"
        )),
        "{said}"
    );
    assert!(said.contains("hint: did you mean `/ghosts`?"), "{said}");
    assert!(
        said.contains("(tools.getAppointment.query.verbose): query parameter `verbose` is not a parameter of `GET /appointments/{appointment_id}`"),
        "{said}"
    );
    assert!(said.contains("check failed: 3 error(s)"), "{said}");
}

#[test]
fn the_same_mapping_without_backend_openapi_still_loads() {
    let (dir, _) = folder("plain", false);
    let (code, said) = check(&dir);
    assert_eq!(code, Some(0), "{said}");
}

#[test]
fn a_missing_openapi_file_is_named() {
    let (dir, mapping) = folder("missing", true);
    let s = std::fs::read_to_string(&mapping)
        .unwrap()
        .replace(&messy().display().to_string(), "no-such.yaml");
    std::fs::write(&mapping, s).unwrap();
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("(backend.openapi): backend.openapi: cannot read"),
        "{said}"
    );
    assert!(said.contains("no-such.yaml"), "{said}");
}

#[test]
fn a_yaml_mistake_is_placed_at_its_line_and_column_with_the_line_quoted() {
    let dir = std::env::temp_dir().join(format!("portico-yamlcol-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("m.yaml");
    std::fs::write(
        &f,
        "business: spa\nbinding: plain\nopenrpc: x.json\nbackend:\n  url: http://127.0.0.1:1\n  timout: 5s\ntools: {}\n",
    )
    .unwrap();
    let (code, said) = check(&f);
    assert_eq!(code, Some(1));
    assert!(
        said.contains(&format!(
            "error: {}:6:3: unknown field `timout`",
            f.display()
        )),
        "{said}"
    );
    assert!(said.contains("\n      timout: 5s\n      ^\n"), "{said}");
    assert!(said.contains("hint: did you mean `timeout`?"), "{said}");
    std::fs::write(
        &f,
        "business: spa\nbinding: plain\nopenrpc: x.json\nbackend:\n  url: http://127.0.0.1:1\n  timeout: [5s\ntools: {}\n",
    )
    .unwrap();
    let (code, said) = check(&f);
    assert_eq!(code, Some(1));
    assert!(
        said.contains(&format!("error: {}:6:12: ", f.display())),
        "{said}"
    );
    assert!(
        said.contains("\n      timeout: [5s\n               ^\n"),
        "{said}"
    );
}

#[test]
fn a_dry_run_without_a_sample_uses_the_documented_answer() {
    let out = std::env::temp_dir().join(format!("portico-bdoc-{}-example", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(BIN)
        .args([
            "init",
            "--openapi",
            messy().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let mapping = out.join("messy-clinic-api.yaml");
    let s = std::fs::read_to_string(&mapping).unwrap().replacen(
        "  timeout: 10s\n",
        &format!("  timeout: 10s\n  openapi: {}\n", messy().display()),
        1,
    );
    std::fs::write(&mapping, s).unwrap();
    let o = Command::new(BIN)
        .arg("check")
        .arg(&out)
        .args([
            "--try",
            "getAppointment",
            "--args",
            r#"{"appointment_id":"A-1"}"#,
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        said.contains("sample answer: the documented 200 example of"),
        "{said}"
    );
    assert!(
        said.contains("  clinic-version: 2024-06-01\n"),
        "the fixed header is sent: {said}"
    );
    assert!(
        said.contains("with a 200 answer, the client gets this result:"),
        "{said}"
    );
    assert!(said.contains("\"patient\": \"Ann\""), "{said}");
}

#[test]
fn an_empty_envelope_version_is_refused() {
    let dir = std::env::temp_dir().join(format!("portico-version-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gateway");
    let mut rpc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("test.openrpc.json")).unwrap())
            .unwrap();
    rpc["info"]["version"] = serde_json::json!("");
    std::fs::write(dir.join("test.openrpc.json"), rpc.to_string()).unwrap();
    let f = dir.join("m.yaml");
    std::fs::write(
        &f,
        "business: v\nbinding: usp\nopenrpc: test.openrpc.json\nbackend:\n  url: http://127.0.0.1:1\ntools:\n  echo_get:\n    http: GET /echo/items/{id}\n",
    )
    .unwrap();
    let (code, said) = check(&f);
    assert_eq!(code, Some(1), "an empty info.version is no version: {said}");
    assert!(
        said.contains(&format!(
            "error: {}:2 (protocol.version): the `usp.version` of every result would be empty",
            f.display()
        )),
        "{said}"
    );
    assert!(said.contains("hint: set the protocol version"), "{said}");
}

#[test]
fn a_jq_mistake_in_definitions_is_reported_once_at_its_own_line_and_column() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("portico-defs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mappings")).unwrap();
    std::fs::create_dir_all(dir.join("openrpc")).unwrap();
    std::fs::copy(
        root.join("openrpc/usp.openrpc.json"),
        dir.join("openrpc/usp.openrpc.json"),
    )
    .unwrap();
    let good = std::fs::read_to_string(root.join("mappings/demo-spa.yaml")).unwrap();
    let line = "  def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber);";
    assert!(good.contains(line));
    let bad = good.replace(line, "  def minutes: (.[11:13] | tonumber) * 60 + ;");
    let f = dir.join("mappings/spa.yaml");
    std::fs::write(&f, &bad).unwrap();
    let n = bad.lines().position(|l| l.contains("* 60 + ;")).unwrap() + 1;
    let (code, said) = check(&f);
    assert_eq!(code, Some(1));
    assert!(
        said.contains(&format!(
            "error: {}:{n} (definitions): definitions: expected term",
            f.display()
        )),
        "{said}"
    );
    assert!(said.contains("near column 45 of this line"), "{said}");
    assert!(
        said.contains("check failed: 1 error(s)"),
        "reported once: {said}"
    );
}

fn fit_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/backend-fit")
}

/// `file:line:column` of the first line of `file` containing `line_has`, at `needle` on it.
fn place(file: &Path, line_has: &str, needle: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let (n, l) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(line_has))
        .unwrap();
    format!(
        "{}:{}:{}",
        file.display(),
        n + 1,
        l.find(needle).unwrap() + 1
    )
}

#[test]
fn placed_params_whose_types_do_not_fit_and_misspelt_headers_are_caught_with_their_fix() {
    let mapping = fit_fixture().join("vet.yaml");
    let (code, said) = check(&mapping);
    assert_eq!(code, Some(1), "{said}");
    let expect = [
        (
            place(&mapping, "X-Api-Kye:", "X-Api-Kye"),
            "(backend.headers.X-Api-Kye): header `X-Api-Kye` is not a header parameter of any operation in vet-api.yaml\n  hint: did you mean `X-Api-Key`?",
        ),
        (
            place(&mapping, "X-Api-Versoin:", "X-Api-Versoin"),
            "(tools.list_visits.headers.X-Api-Versoin): header `X-Api-Versoin` is not a header parameter of `GET /visits` in vet-api.yaml\n  hint: did you mean `X-Api-Version`?",
        ),
        (
            place(&mapping, "query: { day:", "day:"),
            "(tools.list_visits.query.day): param `day` is an integer, but the query parameter `day` of `GET /visits` in vet-api.yaml takes a string (format date)\n  hint: declare `day` as a string (format date) in the OpenRPC document (a `schema_patches` entry changes a published one), so the agent is asked for what the backend takes",
        ),
        (
            place(&mapping, "query: { day:", "kind:"),
            "(tools.list_visits.query.kind): param `kind` allows surgry, which the query parameter `kind` of `GET /visits` in vet-api.yaml does not take (it takes checkup, surgery)\n  hint: did you mean `surgery` (not `surgry`)?",
        ),
        (
            place(&mapping, "http: POST /visits", "http"),
            "(tools.create_visit.http (body)): param `minutes` is a string, but the body property `minutes` of `POST /visits` in vet-api.yaml takes an integer\n  hint: declare `minutes` as an integer in the OpenRPC document",
        ),
        (
            place(&mapping, "http: GET /visits/{visit_id}", "{visit_id}"),
            "(tools.get_visit.http): param `visit_id` is a string, but the path parameter `visit_id` of `GET /visits/{visit_id}` in vet-api.yaml takes an integer\n  hint: declare `visit_id` as an integer in the OpenRPC document",
        ),
    ];
    for (at, rest) in &expect {
        let line = format!("error: {at} {rest}");
        assert!(said.contains(&line), "missing:\n{line}\nin:\n{said}");
    }
    // `limit` (integer into integer) and the declared credentials header are fine.
    assert!(!said.contains("`limit`"), "{said}");
    assert!(
        said.contains("check failed: 6 error(s), 0 warning(s)"),
        "{said}"
    );

    // Fixed as the hints say, the same mapping passes with nothing to report.
    let dir = std::env::temp_dir().join(format!("portico-fit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let copy = |name: &str, fixes: &[(&str, &str)]| {
        let mut text = std::fs::read_to_string(fit_fixture().join(name)).unwrap();
        for (from, to) in fixes {
            assert!(text.contains(from), "{name}: {from}");
            text = text.replace(from, to);
        }
        std::fs::write(dir.join(name), text).unwrap();
    };
    copy("vet-api.yaml", &[]);
    copy(
        "vet.yaml",
        &[
            ("X-Api-Kye", "X-Api-Key"),
            ("X-Api-Versoin", "x-api-version"),
        ],
    );
    copy(
        "vet.openrpc.json",
        &[
            (
                r#""name": "day", "schema": { "type": "integer" }"#,
                r#""name": "day", "schema": { "type": "string", "format": "date" }"#,
            ),
            ("surgry", "surgery"),
            (
                r#""name": "minutes", "schema": { "type": "string" }"#,
                r#""name": "minutes", "schema": { "type": "integer" }"#,
            ),
            (
                r#""name": "visit_id", "required": true, "schema": { "type": "string" }"#,
                r#""name": "visit_id", "required": true, "schema": { "type": "integer" }"#,
            ),
        ],
    );
    let (code, said) = check(&dir.join("vet.yaml"));
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("0 warning(s)"), "{said}");
}

#[test]
fn a_header_no_operation_declares_and_nothing_resembles_is_a_warning() {
    let dir = std::env::temp_dir().join(format!("portico-fit-warn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["vet-api.yaml", "vet.openrpc.json"] {
        std::fs::copy(fit_fixture().join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(fit_fixture().join("vet.yaml"))
        .unwrap()
        .replace("  headers:\n    X-Api-Kye: \"static-key\"\n", "")
        .replace("X-Api-Versoin", "X-Request-Source")
        .replace(
            "query: { day: .day, kind: .kind, limit: .limit }",
            "query: { limit: .limit }",
        )
        .replace("  create_visit:\n    http: POST /visits\n", "")
        .replace("  get_visit:\n    http: GET /visits/{visit_id}\n", "");
    let mapping = dir.join("vet.yaml");
    std::fs::write(&mapping, text).unwrap();
    let (code, said) = check(&mapping);
    assert_eq!(code, Some(0), "a warning does not fail the check: {said}");
    let at = place(&mapping, "X-Request-Source:", "X-Request-Source");
    assert!(
        said.contains(&format!("warning: {at} (tools.list_visits.headers.X-Request-Source): header `X-Request-Source` is not a header parameter of `GET /visits` in vet-api.yaml\n  hint: its header parameters: X-Api-Version, X-Api-Key; the backend may ignore this one")),
        "{said}"
    );
}

#[test]
fn init_output_checked_against_its_own_public_document_has_no_type_or_header_findings() {
    // What `init` placed it placed where the document says: comparing a generated mapping with
    // its own source must find nothing (real documents: nullable enums, bodies, API-version and
    // idempotency headers, integer path params).
    for (i, doc) in [
        "openapi/adyen-checkout/CheckoutService-v72.json",
        "openapi/pretalx/schema.yml",
        "openapi/medusa-store/openapi.yaml",
        "openapi/oai-examples/v3.0/petstore-expanded.yaml",
    ]
    .iter()
    .enumerate()
    {
        let source = common::upstream(doc);
        let out =
            std::env::temp_dir().join(format!("portico-selfcheck-{}-{i}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let o = Command::new(BIN)
            .arg("init")
            .arg("--openapi")
            .arg(&source)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{doc}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mapping = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "yaml")
                    && !p.to_string_lossy().ends_with(".schema.json")
            })
            .unwrap();
        let text = std::fs::read_to_string(&mapping).unwrap();
        let with = text.replacen(
            "  timeout: 10s\n",
            &format!("  timeout: 10s\n  openapi: {}\n", source.display()),
            1,
        );
        assert_ne!(text, with, "{doc}: backend.openapi added");
        std::fs::write(&mapping, with).unwrap();
        let (_, said) = check(&out);
        for finding in [
            "param `",
            "header `",
            "is not an operation of",
            "query parameter `",
        ] {
            assert!(!said.contains(finding), "{doc}: {finding}\n{said}");
        }
        assert!(said.contains("ok: 1 file(s)"), "{doc}: {said}");
    }
}
