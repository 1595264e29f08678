//! portico loads the upstream protocol files UNCHANGED from the folder `scripts/fetch-upstream`
//! fills (`.upstream/`, pinned by `upstream.lock`; never committed into the repository).
//!
//! - USP: `usp/openrpc/usp-mcp.json` (27 methods) with its JSON Schemas mapped by `$id`.
//! - UCP: `ucp/source/services/lodging/mcp.openrpc.json`, whose `$ref` targets are only partly
//!   published (it comes from an unmerged revision): unresolved references must be
//!   reported with document and JSON pointer, as errors or (opt-in) warnings, never a panic.
//!
//! The mapping files are in `tests/fixtures/upstream/`. Nothing here calls a backend.

mod common;

use common::upstream;
use portico::config::{self, Diagnostic, Gateway, Severity};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    manifest_dir().join("tests/fixtures/upstream")
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn show(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Loads mapping files, turning a panic inside portico into a test failure that says so.
fn load(files: &[PathBuf]) -> Result<Gateway, Vec<Diagnostic>> {
    std::panic::catch_unwind(|| config::load(files))
        .unwrap_or_else(|_| panic!("portico panicked while loading {files:?}"))
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .unwrap_or_else(|e| panic!("schema does not compile: {e}\n{schema:#}"))
}

fn strings(v: &Value) -> BTreeSet<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// USP
// ---------------------------------------------------------------------------------------------

fn usp_mapping() -> PathBuf {
    fixtures().join("usp-upstream.yaml")
}

fn load_usp() -> Gateway {
    load(&[usp_mapping()]).unwrap_or_else(|ds| {
        panic!(
            "the upstream USP OpenRPC must load unchanged:\n{}",
            show(&ds)
        )
    })
}

#[test]
fn fixtures_point_at_the_fetched_upstream_files() {
    // The relative paths written in the mapping files resolve to the fetched upstream folder.
    let from_fixture = fixtures().join("../../../.upstream/usp/openrpc/usp-mcp.json");
    assert_eq!(
        std::fs::canonicalize(&from_fixture).expect("fixture-relative OpenRPC path resolves"),
        std::fs::canonicalize(upstream("usp/openrpc/usp-mcp.json")).expect("upstream path"),
    );
    let lodging =
        fixtures().join("../../../.upstream/ucp/source/services/lodging/mcp.openrpc.json");
    assert_eq!(
        std::fs::canonicalize(&lodging).expect("fixture-relative lodging path resolves"),
        std::fs::canonicalize(upstream("ucp/source/services/lodging/mcp.openrpc.json"))
            .expect("upstream path"),
    );
    // No upstream document was copied next to the mappings.
    let copies: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixture folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) != Some("yaml"))
        .collect();
    assert!(
        copies.is_empty(),
        "only mapping files belong here: {copies:?}"
    );
}

#[test]
fn usp_upstream_openrpc_loads_all_27_methods_without_warnings() {
    let gw = load_usp();
    assert!(
        gw.warnings.is_empty(),
        "no unresolved references (or other warnings) expected:\n{}",
        show(&gw.warnings)
    );
    assert_eq!(gw.tools.len(), 27);

    // Exactly the upstream methods, in the upstream order.
    let doc = read_json(&upstream("usp/openrpc/usp-mcp.json"));
    let methods: Vec<&str> = doc["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(methods.len(), 27);
    let tools: Vec<&str> = gw.tools.keys().map(String::as_str).collect();
    let mut sorted_tools = tools.clone();
    sorted_tools.sort_unstable();
    let mut sorted_methods = methods.clone();
    sorted_methods.sort_unstable();
    assert_eq!(sorted_tools, sorted_methods);

    // Descriptions and access tiers come from the upstream document.
    let create = &gw.tools["usp_bookings_create"];
    let upstream_create = doc["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["name"] == "usp_bookings_create")
        .expect("upstream usp_bookings_create");
    let descriptor = create.descriptor.value();
    assert_eq!(descriptor["title"], upstream_create["summary"]);
    assert_eq!(descriptor["title"], "Create Booking");
    assert_eq!(create.access.as_deref(), Some("privileged_platform"));
    assert_eq!(
        gw.tools["usp_services_list"].access.as_deref(),
        Some("public")
    );
    // The business's protocol version is the upstream spec version.
    assert_eq!(gw.businesses.len(), 1);
    assert_eq!(gw.businesses[0].binding.version, "2026-08-20");

    // Every served schema is self-contained: no `$ref` leaves the descriptor.
    for (name, tool) in &gw.tools {
        let descriptor = tool.descriptor.value();
        for key in ["inputSchema", "outputSchema"] {
            let schema = &descriptor[key];
            assert!(
                key == "outputSchema" || schema.is_object(),
                "{name}: no {key}"
            );
            let mut external = Vec::new();
            collect_refs(schema, &mut external);
            external.retain(|r| !r.starts_with("#/$defs/"));
            assert!(
                external.is_empty(),
                "{name}.{key} has outside refs: {external:?}"
            );
            if schema.is_object() {
                validator(schema);
            }
        }
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r.clone());
            }
            m.values().for_each(|c| collect_refs(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

#[test]
fn usp_bookings_create_output_schema_is_the_structured_content_part() {
    let gw = load_usp();
    let descriptor = gw.tools["usp_bookings_create"].descriptor.value();
    let out = &descriptor["outputSchema"];
    assert_eq!(out["type"], "object", "{out:#}");
    assert!(
        out.pointer("/properties/structuredContent").is_none(),
        "the outputSchema describes structuredContent itself, not the whole tool result: {out:#}"
    );
    let branches = out["anyOf"].as_array().expect("outputSchema.anyOf");
    let booking_branch = branches
        .iter()
        .find(|b| strings(&b["required"]).contains("booking"))
        .unwrap_or_else(|| panic!("no anyOf branch requires `booking`: {out:#}"));
    assert_eq!(
        strings(&booking_branch["required"]),
        BTreeSet::from(["usp", "booking"])
    );
    for p in ["usp", "booking", "messages", "booking_scoped_credential"] {
        assert!(
            booking_branch["properties"].get(p).is_some(),
            "upstream structuredContent property `{p}` missing: {booking_branch:#}"
        );
    }
    assert!(booking_branch["properties"].get("content").is_none());

    // The upstream playground's booking response is valid structuredContent; the same without
    // `booking` (and without messages[]) is not.
    let scenarios = read_json(&upstream("usp/playground/scenarios/bookings.json"));
    let body = scenarios["instant_confirmation"]["response"]["body"].clone();
    assert_eq!(body["booking"]["id"], "bkg_7f3a2b1c8d9e");
    let v = validator(out);
    let errors: Vec<String> = v.iter_errors(&body).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "playground booking rejected: {errors:?}");
    let mut no_booking = body.clone();
    no_booking
        .as_object_mut()
        .expect("object")
        .remove("booking");
    assert!(!v.is_valid(&no_booking));
    // A business outcome (messages[] only) is allowed by the binding's branch.
    let outcome = json!({
        "usp": { "version": "2026-08-20" },
        "messages": [{ "type": "error", "code": "slot_unavailable",
                       "content": "The requested slot is no longer available.",
                       "severity": "recoverable" }]
    });
    assert!(v.is_valid(&outcome));
}

/// The booking-creation arguments of the USP MCP binding's example (spec §9.2, "Booking creation
/// (with idempotency key)", `usp/specification.md`).
fn spec_booking_create_arguments() -> Value {
    json!({
        "service_id": "svc_haircut_001",
        "slot_id": "slot_20260315_0900",
        "buyer": {
            "first_name": "Alice",
            "email": "alice@example.com"
        },
        "_meta": {
            "usp": {
                "profile": "https://agent.example/profiles/scheduling-agent.json",
                "idempotency_key": "550e8400-e29b-41d4-a716-446655440000"
            }
        }
    })
}

#[test]
fn usp_bookings_create_input_schema_validates_booking_arguments() {
    let gw = load_usp();
    let tool = &gw.tools["usp_bookings_create"];
    let descriptor = tool.descriptor.value();
    let input = &descriptor["inputSchema"];
    assert_eq!(input["type"], "object");
    assert_eq!(
        strings(&input["required"]),
        BTreeSet::from(["service_id", "slot_id", "buyer", "_meta"])
    );
    let v = validator(input);

    // The spec example plus `last_name`: upstream `booking.json#/$defs/Buyer` requires
    // first_name, last_name and email.
    let mut valid = spec_booking_create_arguments();
    valid["buyer"]["last_name"] = json!("Smith");
    valid["buyer"]["phone_number"] = json!("+12125551234");
    valid["notes"] = json!("Window seat if possible.");
    valid["party_size"] = json!(1);
    let errors: Vec<String> = v.iter_errors(&valid).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "valid arguments rejected: {errors:?}");
    assert!(
        tool.input_validator.is_valid(&valid),
        "portico's own validator agrees"
    );

    // Missing `buyer`: invalid.
    let mut no_buyer = valid.clone();
    no_buyer.as_object_mut().expect("object").remove("buyer");
    assert!(!v.is_valid(&no_buyer));
    assert!(!tool.input_validator.is_valid(&no_buyer));
    let e = v.iter_errors(&no_buyer).next().expect("an error");
    assert!(e.to_string().contains("buyer"), "{e}");

    // Missing `_meta.usp.profile` (privileged method): invalid.
    let mut no_profile = valid.clone();
    no_profile["_meta"]["usp"]
        .as_object_mut()
        .expect("object")
        .remove("profile");
    assert!(!v.is_valid(&no_profile));

    // The verbatim spec example has no `buyer.last_name`, which the upstream Buyer schema
    // requires: the upstream files disagree with each other, and the loaded schema shows it
    // (proof that the `$ref` into booking.json was resolved rather than replaced by `{}`).
    let verbatim = spec_booking_create_arguments();
    let errors: Vec<(String, String)> = v
        .iter_errors(&verbatim)
        .map(|e| (e.instance_path().to_string(), e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "/buyer");
    assert!(errors[0].1.contains("last_name"), "{errors:?}");
}

// ---------------------------------------------------------------------------------------------
// UCP lodging
// ---------------------------------------------------------------------------------------------

const LODGING_TOOLS: [&str; 5] = [
    "create_booking_session",
    "get_booking_session",
    "update_booking_session",
    "complete_booking_session",
    "cancel_booking_session",
];

/// Unpublished `$ref` targets of the lodging files at the commits `upstream.lock` pins, as
/// absolute references: exactly these are reported.
const LODGING_UNRESOLVED: [&str; 7] = [
    "https://ucp.dev/schemas/common/types/payment.json",
    "https://ucp.dev/schemas/lodging/types/booker.json",
    "https://ucp.dev/schemas/lodging/types/booking_confirmation.json",
    "https://ucp.dev/schemas/lodging/types/guest.json",
    "https://ucp.dev/schemas/lodging/types/property.json",
    "https://ucp.dev/schemas/lodging/types/stay.json",
    "https://ucp.dev/schemas/ucp.json#/$defs/response_booking_schema",
];

/// `(reference, document, pointer)` of every unresolved-reference diagnostic, checking on the way
/// that each names the OpenRPC document and a JSON pointer to the `$ref`.
fn unresolved_refs(
    diags: &[Diagnostic],
    severity: Severity,
    openrpc: &Path,
) -> BTreeSet<(String, String, String)> {
    let openrpc = std::fs::canonicalize(openrpc).expect("OpenRPC path");
    let mut out = BTreeSet::new();
    for d in diags
        .iter()
        .filter(|d| d.message.contains("unresolvable `$ref"))
    {
        assert_eq!(d.severity, severity, "{d}");
        assert_eq!(
            std::fs::canonicalize(&d.file).ok().as_ref(),
            Some(&openrpc),
            "the diagnostic names the OpenRPC document: {d}"
        );
        let at =
            d.at.as_deref()
                .unwrap_or_else(|| panic!("no JSON pointer: {d}"));
        assert!(
            at.starts_with('/') && at.ends_with("/$ref"),
            "`at` is a JSON pointer to the `$ref`: {d}"
        );
        // "unresolvable `$ref: REF` (in DOC at POINTER): REASON"
        let rest = d.message.split_once("`$ref: ").expect("message shape").1;
        let (reference, rest) = rest.split_once("` (in ").expect("message shape");
        let (document, rest) = rest.split_once(" at ").expect("message shape");
        let (pointer, reason) = rest.split_once("): ").expect("message shape");
        assert_eq!(pointer, at, "{d}");
        assert!(!reason.is_empty(), "a reason is given: {d}");
        assert!(
            d.hint.as_deref().is_some_and(|h| h.contains("schema_ids")),
            "a fix hint is given: {d}"
        );
        out.insert((
            reference.to_string(),
            document.to_string(),
            pointer.to_string(),
        ));
    }
    out
}

fn check_lodging_refs(found: &BTreeSet<(String, String, String)>) {
    let refs: BTreeSet<&str> = found.iter().map(|(r, _, _)| r.as_str()).collect();
    assert_eq!(
        refs,
        BTreeSet::from(LODGING_UNRESOLVED),
        "reported: {refs:#?}"
    );
    // Published files resolve: they are never reported.
    for published in [
        "https://ucp.dev/schemas/lodging/booking.json",
        "https://ucp.dev/schemas/common/types/message.json",
        "https://ucp.dev/schemas/common/types/error_response.json",
        "https://ucp.dev/schemas/common/types/message_error.json",
        "https://ucp.dev/schemas/common/types/actions.json",
        "https://ucp.dev/schemas/common/types/totals.json",
    ] {
        assert!(
            !refs.contains(published),
            "published `{published}` reported"
        );
    }
    // The unpublished property reference, with its place in booking.json.
    assert!(
        found.contains(&(
            "https://ucp.dev/schemas/lodging/types/property.json".into(),
            "https://ucp.dev/schemas/lodging/booking.json".into(),
            "/properties/property/$ref".into(),
        )),
        "{found:#?}"
    );
    assert!(
        found.contains(&(
            "https://ucp.dev/schemas/ucp.json#/$defs/response_booking_schema".into(),
            "https://ucp.dev/schemas/lodging/booking.json".into(),
            "/properties/ucp/$ref".into(),
        )),
        "{found:#?}"
    );
}

fn lodging_openrpc() -> PathBuf {
    upstream("ucp/source/services/lodging/mcp.openrpc.json")
}

#[test]
fn ucp_lodging_unchanged_with_error_policy_fails_naming_each_unresolved_ref() {
    let mapping = fixtures().join("ucp-lodging-error.yaml");
    let diags = match load(&[mapping]) {
        Ok(gw) => panic!(
            "unresolved references must fail the load by default; loaded {} tools",
            gw.tools.len()
        ),
        Err(ds) => ds,
    };
    assert!(
        diags
            .iter()
            .all(|d| !d.is_error() || d.message.contains("unresolvable `$ref")),
        "the upstream file must be accepted apart from its unresolved references; got:\n{}",
        show(&diags)
    );
    let found = unresolved_refs(&diags, Severity::Error, &lodging_openrpc());
    assert!(
        !found.is_empty(),
        "expected one diagnostic per unresolved `$ref`, got:\n{}",
        show(&diags)
    );
    check_lodging_refs(&found);
}

#[test]
fn ucp_lodging_unchanged_with_warn_policy_loads_five_tools_and_warns() {
    let mapping = fixtures().join("ucp-lodging-warn.yaml");
    let gw = load(&[mapping]).unwrap_or_else(|ds| {
        panic!(
            "with `unresolved_refs: warn` the upstream lodging OpenRPC must load:\n{}",
            show(&ds)
        )
    });
    let names: BTreeSet<&str> = gw.tools.keys().map(String::as_str).collect();
    assert_eq!(names, LODGING_TOOLS.into_iter().collect());
    let found = unresolved_refs(&gw.warnings, Severity::Warning, &lodging_openrpc());
    check_lodging_refs(&found);
    // Same references as the error policy would report.
    let strict = load(&[fixtures().join("ucp-lodging-error.yaml")]).expect_err("strict fails");
    assert_eq!(
        unresolved_refs(&strict, Severity::Error, &lodging_openrpc()),
        found
    );
    // Unresolved parts became open schemas, so the tools still validate their known parts.
    let create = &gw.tools["create_booking_session"];
    assert_eq!(
        strings(&create.descriptor.value()["inputSchema"]["required"]),
        BTreeSet::from(["meta", "booking"])
    );
    assert!(!create.input_validator.is_valid(&json!({ "booking": {} })));
}

/// A folder under the system temp dir, removed on drop (also when an assertion fails).
struct TempDir(PathBuf);

impl TempDir {
    /// A new, unique folder path under the system temp dir (not created).
    fn fresh(prefix: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple();
        TempDir(std::env::temp_dir().join(format!("{prefix}-{}-{id}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lodging_mapping(dir: &Path, policy: &str, openrpc: &Path, schemas: &Path) -> PathBuf {
    let tools: String = LODGING_TOOLS
        .iter()
        .map(|t| format!("  {t}:\n    http: POST /{t}\n"))
        .collect();
    let text = format!(
        "business: lodging-{policy}\n\
         binding: ucp\n\
         openrpc: {openrpc}\n\
         schema_ids:\n  https://ucp.dev/schemas/: {schemas}/\n\
         unresolved_refs: {policy}\n\
         backend:\n  url: http://127.0.0.1:9/x\n\
         protocol:\n  version: draft\n  capability: dev.ucp.lodging.booking\n\
         tools:\n{tools}",
        openrpc = openrpc.display(),
        schemas = schemas.display(),
    );
    let path = dir.join(format!("lodging-{policy}.yaml"));
    std::fs::write(&path, text).expect("write mapping");
    path
}

/// Works around the missing `info.version` of the upstream lodging OpenRPC (see
/// `ucp_lodging_unchanged_*`): a copy with only `info.version` added, in a temporary folder
/// outside the repository, next to a symlink to the upstream `schemas/` folder, so every schema
/// is still read in place. Shows the unresolved-reference reporting on the real upstream schemas.
#[test]
fn ucp_lodging_refs_are_reported_when_only_info_version_is_added() {
    let tmp = TempDir(
        std::env::temp_dir().join(format!("portico-upstream-lodging-{}", std::process::id())),
    );
    let _ = std::fs::remove_dir_all(&tmp.0);
    let services = tmp.0.join("ucp/source/services/lodging");
    std::fs::create_dir_all(&services).expect("temp folder");
    let schemas = upstream("ucp/source/schemas");
    std::os::unix::fs::symlink(&schemas, tmp.0.join("ucp/source/schemas")).expect("symlink");
    let mut doc = read_json(&lodging_openrpc());
    assert!(
        doc.pointer("/info/version").is_none(),
        "upstream now has info.version: {:#}",
        doc["info"]
    );
    doc["info"]["version"] = json!("0dc293d6");
    let openrpc = services.join("mcp.openrpc.json");
    std::fs::write(&openrpc, serde_json::to_string_pretty(&doc).expect("json")).expect("write");

    let strict = match load(&[lodging_mapping(&tmp.0, "error", &openrpc, &schemas)]) {
        Ok(gw) => panic!("must fail, loaded {} tools", gw.tools.len()),
        Err(ds) => ds,
    };
    assert!(
        strict
            .iter()
            .all(|d| d.message.contains("unresolvable `$ref")),
        "only unresolved references are wrong:\n{}",
        show(&strict)
    );
    let strict_refs = unresolved_refs(&strict, Severity::Error, &openrpc);
    check_lodging_refs(&strict_refs);

    let gw = load(&[lodging_mapping(&tmp.0, "warn", &openrpc, &schemas)])
        .unwrap_or_else(|ds| panic!("warn policy must load:\n{}", show(&ds)));
    let names: BTreeSet<&str> = gw.tools.keys().map(String::as_str).collect();
    assert_eq!(names, LODGING_TOOLS.into_iter().collect());
    assert_eq!(gw.warnings.len(), strict.len());
    assert_eq!(
        unresolved_refs(&gw.warnings, Severity::Warning, &openrpc),
        strict_refs
    );
}

/// Copies the files of folder `from` into `to`, recursively.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create folder");
    for e in std::fs::read_dir(from)
        .expect("read folder")
        .filter_map(Result::ok)
    {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy file");
        }
    }
}

fn fetch_upstream(args: &[&Path]) -> (i32, String) {
    let script = manifest_dir().join("scripts/fetch-upstream");
    let mut cmd = std::process::Command::new(script);
    for (flag, value) in ["--mirror", "--dest"].iter().zip(args) {
        cmd.arg(flag).arg(value);
    }
    let out = cmd.output().expect("scripts/fetch-upstream runs (python3)");
    let code = out.status.code().unwrap_or(-1);
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn sha256_hex(bytes: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `scripts/fetch-upstream --mirror M --dest D` with a mirror copy in which one file was changed:
/// it refuses that file naming it and both checksums (the lock's and the file's), exits non-zero,
/// leaves no unverified copy behind, and fills the rest; once the mirror is repaired it completes.
#[test]
fn fetch_upstream_refuses_a_corrupted_mirror_file_with_both_checksums() {
    let tmp = TempDir::fresh("portico-fetch-upstream");
    let (mirror, dest) = (tmp.0.join("mirror"), tmp.0.join("dest"));
    let fetched = upstream("usp")
        .parent()
        .expect("fetched folder")
        .to_path_buf();
    copy_tree(&fetched, &mirror);
    let rel = "usp/schemas/booking.json";
    let good = std::fs::read(mirror.join(rel)).expect("mirror copy");
    let mut bad = good.clone();
    bad.extend_from_slice(b"\n");
    std::fs::write(mirror.join(rel), &bad).expect("corrupt the mirror copy");

    let (code, err) = fetch_upstream(&[&mirror, &dest]);
    assert_eq!(code, 1, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("checksum mismatch"))
        .unwrap_or_else(|| panic!("no checksum error:\n{err}"));
    assert!(line.contains(rel), "{line}");
    assert!(
        line.contains(&sha256_hex(&good)),
        "expected checksum: {line}"
    );
    assert!(line.contains(&sha256_hex(&bad)), "actual checksum: {line}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("checksum mismatch"))
            .count(),
        1,
        "only the changed file is refused:\n{err}"
    );
    assert!(!dest.join(rel).exists(), "no unverified copy is left");
    assert_eq!(
        std::fs::read(dest.join("usp/openrpc/usp-mcp.json")).expect("a good file is copied"),
        std::fs::read(fetched.join("usp/openrpc/usp-mcp.json")).expect("fetched file")
    );

    std::fs::write(mirror.join(rel), &good).expect("repair the mirror copy");
    let (code, err) = fetch_upstream(&[&mirror, &dest]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 copied"),
        "only the missing file is copied: {err}"
    );
    assert_eq!(std::fs::read(dest.join(rel)).expect("now present"), good);
}

/// The script never fills (or prunes) a non-empty folder it did not create.
#[test]
fn fetch_upstream_leaves_a_foreign_folder_alone() {
    let tmp = TempDir::fresh("portico-fetch-foreign");
    std::fs::create_dir_all(&tmp.0).expect("temp folder");
    std::fs::write(tmp.0.join("mine.txt"), "keep").expect("a foreign file");
    let mirror = upstream("usp")
        .parent()
        .expect("fetched folder")
        .to_path_buf();
    let (code, err) = fetch_upstream(&[&mirror, &tmp.0]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("was not filled by this script"), "{err}");
    assert_eq!(
        std::fs::read_to_string(tmp.0.join("mine.txt")).expect("kept"),
        "keep"
    );
}
