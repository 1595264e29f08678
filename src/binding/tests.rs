//! Unit tests of the USP and UCP bindings' envelopes: metadata to headers, profile checks,
//! success and failure shapes, and plain tool errors. Test-only code.

use super::*;

fn usp() -> Binding {
    Binding {
        kind: Kind::Usp,
        version: "2026-08-20".into(),
        capabilities: Some(
            json!({"dev.usp-protocol.services.availability": [{"version": "2026-08-20"}]}),
        ),
        capability: None,
        ucp: None,
    }
}

fn ucp() -> Binding {
    Binding {
        kind: Kind::Ucp,
        version: "draft".into(),
        capabilities: None,
        capability: Some("dev.ucp.lodging.booking".into()),
        ucp: None,
    }
}

#[test]
fn usp_meta_becomes_headers_and_leaves_the_arguments() {
    let mut args = json!({"service_id": "s1", "_meta": {"usp": {"profile": "https://a.example/p.json", "idempotency_key": "k-1", "correlation_id": "c-9"}}});
    let meta = usp().extract(&mut args).unwrap();
    assert_eq!(args, json!({"service_id": "s1"}));
    let headers = usp().headers(&meta).unwrap();
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.to_str().unwrap().to_string())
    };
    assert_eq!(
        get("usp-agent").as_deref(),
        Some("profile=\"https://a.example/p.json\"")
    );
    assert_eq!(get("idempotency-key").as_deref(), Some("k-1"));
    assert_eq!(get("usp-correlation-id").as_deref(), Some("c-9"));
}

#[test]
fn crlf_in_metadata_is_refused() {
    let meta = Meta {
        idempotency_key: Some("a\r\nX-Evil: 1".into()),
        ..Meta::default()
    };
    let err = usp().headers(&meta).unwrap_err();
    assert_eq!(err.kind, FailureKind::InvalidRequest);
    let meta = Meta {
        profile: Some("https://a/\"x\"\n".into()),
        ..Meta::default()
    };
    assert_eq!(
        usp().headers(&meta).unwrap_err().code.as_deref(),
        Some("invalid_profile_url")
    );
}

#[test]
fn profiles_must_be_https_urls() {
    for bad in [
        "not a url",
        "ftp://x/p.json",
        "http://agent.example/p.json",
        "https://",
    ] {
        let mut args = json!({"_meta": {"usp": {"profile": bad}}});
        let err = usp().extract(&mut args).unwrap_err();
        assert_eq!(err.code.as_deref(), Some("invalid_profile_url"), "{bad}");
    }
    let mut args = json!({"_meta": {"usp": {"profile": "http://localhost:8080/p.json"}}});
    assert!(usp().extract(&mut args).is_ok());
}

#[test]
fn ucp_requires_a_profile() {
    let mut args = json!({"booking": {}});
    let err = ucp().extract(&mut args).unwrap_err();
    assert_eq!(err.code.as_deref(), Some("invalid_profile_url"));
    let mut args = json!({"meta": {"ucp-agent": {"profile": "https://p"}, "idempotency-key": "k"}, "id": "b1"});
    let meta = ucp().extract(&mut args).unwrap();
    assert_eq!(meta.idempotency_key.as_deref(), Some("k"));
    assert_eq!(args, json!({"id": "b1"}));
}

#[test]
fn usp_success_and_business_envelopes() {
    let Reply::Result(r) = usp().render(
        Outcome::Success {
            body: json!({"slots": []}),
        },
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!(r["structuredContent"]["usp"]["version"], "2026-08-20");
    assert_eq!(r["structuredContent"]["messages"], json!([]));
    assert_eq!(r["content"][0]["type"], "text");
    let msg = json!({"type": "error", "code": "slot_unavailable", "content": "taken", "severity": "recoverable"});
    let Reply::Result(r) = usp().render(
        Outcome::Business {
            body: Map::new(),
            messages: vec![msg.clone()],
        },
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!(r["structuredContent"]["messages"], json!([msg]));
    assert_eq!(r["content"][0]["text"], "Error: taken");
    assert!(r.get("isError").is_none());
}

#[test]
fn usp_failures_use_the_code_table() {
    let f = Failure {
        retry_after: Some(30),
        ..Failure::new(FailureKind::RateLimited, "slow down")
    };
    let Reply::Error(e) = usp().render(Outcome::Failure(f), &ToolCtx::default()) else {
        panic!()
    };
    assert_eq!((e.code, e.message.as_str()), (-32007, "rate_limited"));
    assert_eq!(e.data.as_ref().unwrap()["retry_after"], 30);
    let Reply::Error(e) = usp().render(
        Outcome::Failure(Failure::new(FailureKind::Timeout, "t")),
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!(e.code, -32009);
}

#[test]
fn ucp_error_response_and_http_status() {
    let msg = json!({"type": "error", "code": "inventory_exhausted", "content": "gone", "severity": "unrecoverable"});
    let Reply::Result(r) = ucp().render(
        Outcome::Business {
            body: Map::new(),
            messages: vec![msg],
        },
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!(r["structuredContent"]["ucp"]["status"], "error");
    let Reply::Error(e) = ucp().render(
        Outcome::Failure(Failure::new(FailureKind::Conflict, "dup")),
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!((e.code, e.http_status), (-32000, Some(409)));
}

#[test]
fn plain_failures_are_tool_errors() {
    let plain = Binding {
        kind: Kind::Plain,
        version: String::new(),
        capabilities: None,
        capability: None,
        ucp: None,
    };
    let Reply::Result(r) = plain.render(
        Outcome::Failure(Failure::new(FailureKind::UpstreamError, "boom")),
        &ToolCtx::default(),
    ) else {
        panic!()
    };
    assert_eq!(r["isError"], true);
}

/// A business outcome is not the tool's output: no `structuredContent` (which clients check
/// against the outputSchema), the messages as text.
#[test]
fn plain_and_autonym_business_outcomes_carry_no_structured_content() {
    let msg = json!({"type": "error", "code": "slot_unavailable", "content": "taken", "severity": "recoverable"});
    let business = || Outcome::Business {
        body: Map::new(),
        messages: vec![msg.clone()],
    };
    let binding = |kind| Binding {
        kind,
        version: String::new(),
        capabilities: None,
        capability: None,
        ucp: None,
    };
    let Reply::Result(r) = binding(Kind::Plain).render(business(), &ToolCtx::default()) else {
        panic!()
    };
    assert_eq!(r["isError"], true);
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert_eq!(r["content"][0]["text"], "Error: taken");
    let detail: Value = serde_json::from_str(r["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(detail["messages"], json!([msg]));

    let Reply::Result(r) = binding(Kind::Autonym).render(business(), &ToolCtx::default()) else {
        panic!()
    };
    assert_eq!(r["isError"], true);
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert_eq!(r["content"].as_array().map(Vec::len), Some(1));
    let problem: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(problem["code"], "value_rejected");
    assert_eq!(problem["status"], 422);
}
