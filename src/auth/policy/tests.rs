//! Unit tests of loading an AuthorizationPolicy: every mistake is a diagnostic without the
//! secret, and the defaults for scope and tiers. Test-only code.

use super::*;

fn load(yaml: &str) -> Result<Policy, Vec<Diagnostic>> {
    let spec: AuthorizationSpec = serde_saphyr::from_str(yaml).unwrap();
    let text = format!(
        "authorization:\n{}",
        yaml.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let fact = |name: &str, access: &str, params: &[&str]| ToolFacts {
        name: name.into(),
        access: Some(access.into()),
        params: params.iter().map(|p| p.to_string()).collect(),
    };
    let tools = vec![
        fact(
            "usp_bookings_create",
            "privileged_platform",
            &["service_id", "hold_id"],
        ),
        fact("usp_bookings_get", "privileged_scoped", &["booking_id"]),
        fact("usp_bookings_confirm", "privileged_scoped", &["booking_id"]),
    ];
    compile(&spec, Path::new("m.yaml"), &text, &tools)
}

fn messages(r: Result<Policy, Vec<Diagnostic>>) -> String {
    r.err()
        .map(|ds| {
            ds.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn every_mistake_is_a_diagnostic_without_the_secret() {
    let m = messages(load(
        "accepted_mechanisms: [api_key]\napi_keys:\n  - { name: a, value: short-secret }\n",
    ));
    assert!(
        m.contains("shorter than 16") && !m.contains("short-secret"),
        "{m}"
    );
    let m = messages(load(
        "accepted_mechanisms: [http_message_signature, mtls]\nhttp_message_signature: { max_age: soon, algorithms: [rsa-pss-sha512] }\nmtls: { clients: [{ name: a, sha256: nothex }] }\n",
    ));
    assert!(m.contains("`max_age` is not a duration"), "{m}");
    assert!(m.contains("`rsa-pss-sha512` is not supported"), "{m}");
    assert!(m.contains("`sha256` is not 64 hex digits"), "{m}");
    assert!(
        messages(load("accepted_mechanisms: [magic]\n"))
            .contains("no mechanism portico implements")
    );
    assert!(
        messages(load("accepted_mechanisms: [oauth2_bearer]\n"))
            .contains("no `oauth2_bearer:` settings")
    );
    assert!(messages(load("accepted_mechanisms: [platform_key_pop]\n")).contains("audiences"));
    let m = messages(load(
        "accepted_mechanisms: [oauth2_bearer]\noauth2_bearer: { jwks_url: http://idp.example/j, issuer: i, audience: a }\n",
    ));
    assert!(m.contains("must be an https URL"), "{m}");
    let m = messages(load(
        "accepted_mechanisms: [booking_scoped_credential]\nbooking_scoped_credential: { issue: { nope: /x }, ttl: soon }\n",
    ));
    assert!(m.contains("`ttl` is not a duration"), "{m}");
    assert!(messages(load("accepted_mechanisms: [api_key]\napi_keys: [{name: a, value: 0123456789abcdef}]\ntools: { x: secret }\n")).contains("unknown access tier"));
}

#[test]
fn defaults_scope_and_tiers() {
    let p = load("accepted_mechanisms: [platform_key_pop, booking_scoped_credential]\nplatform_key_pop: { audiences: [https://b/.well-known/usp] }\nbooking_scoped_credential: { issue: { usp_bookings_create: /booking/id } }\n").unwrap();
    assert!(p.require);
    let c = p.credentials.as_ref().unwrap();
    assert_eq!(c.scope, ["usp_bookings_get", "usp_bookings_confirm"]);
    assert_eq!(c.ttl, Duration::from_secs(30 * 86_400));
    assert_eq!(p.business_only, ["usp_bookings_confirm"]);
    assert_eq!(p.tier("anything", None), Tier::Platform, "fail closed");
    assert_eq!(p.tier("t", Some("public")), Tier::Public);
    // Scoped tools naming a booking act on it; creating one does not.
    assert_eq!(p.acts_on.get("usp_bookings_get").unwrap(), "booking_id");
    assert!(!p.acts_on.contains_key("usp_bookings_create"));
    assert_eq!(p.creates.get("usp_bookings_create").unwrap(), "/booking/id");
    let m = messages(load(
        "accepted_mechanisms: [platform_key_pop]\nplatform_key_pop: { audiences: [https://b/u] }\nacts_on: { usp_bookings_get: id, nope: id }\n",
    ));
    assert!(m.contains("has no parameter `id`"), "{m}");
    assert!(m.contains("`nope` is not a tool"), "{m}");
    let keyed = load("accepted_mechanisms: [api_key]\napi_keys: [{name: front, value: 0123456789abcdef-secret}]\n").unwrap();
    let shown = format!("{keyed:?}");
    assert!(
        shown.contains("front") && !shown.contains("secret"),
        "{shown}"
    );
}
