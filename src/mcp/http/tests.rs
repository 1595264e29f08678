//! Unit tests of the MCP endpoint's helpers: Accept, rate buckets, Host, header values.
//! They never start a server: the integration tests under tests/ do.

use super::respond::{accepts, decode_header_value};
use super::*;
use http::HeaderMap;

#[test]
fn accept_header_parsing() {
    let mut h = HeaderMap::new();
    assert_eq!(accepts(&h), (true, true));
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    assert_eq!(accepts(&h), (true, true));
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    assert_eq!(accepts(&h), (false, true));
    h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
    assert_eq!(accepts(&h), (false, false));
    // Parameters, spaces, case and wildcards.
    for (value, want) in [
        (" Application/JSON ; q=0.9 ,TEXT/*", (true, true)),
        ("application/*;q=1", (true, false)),
        ("*/*", (true, true)),
        ("text/event-streams, application/jsonx", (false, false)),
        (",;, ,", (false, false)),
    ] {
        h.insert(header::ACCEPT, HeaderValue::from_static(value));
        assert_eq!(accepts(&h), want, "{value}");
    }
    // A value that is not visible ASCII is skipped; with no other, everything is accepted.
    let odd = HeaderValue::from_bytes(b"text/event-stream\xff").expect("obs-text is a valid value");
    h.insert(header::ACCEPT, odd);
    assert_eq!(accepts(&h), (true, true));
    h.append(header::ACCEPT, HeaderValue::from_static("application/json"));
    assert_eq!(accepts(&h), (true, false));
}

#[test]
fn session_rate_buckets_are_per_ipv4_address_and_per_ipv6_64() {
    let key = |a: &str| ClientAddr(a.parse().expect("an address")).bucket();
    assert_eq!(key("192.0.2.7"), "192.0.2.7");
    assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
    assert_eq!(key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
    assert_eq!(key("2001:db8:1:2:bbbb::9"), key("2001:db8:1:2:aaaa::1"));
    assert_ne!(key("2001:db8:1:3::1"), key("2001:db8:1:2::1"));
}

#[test]
fn host_parsing() {
    assert_eq!(host_of("localhost:8080"), "localhost");
    assert_eq!(host_of("[::1]:8080"), "::1");
    assert_eq!(host_of("Example.COM"), "example.com");
    // The borrowed form keeps the case sent and cuts the same bytes.
    for a in [
        "Example.COM:8080",
        " [::1]:8080 ",
        "[FE80::1]",
        "host:port",
        "LOCALHOST",
        "a:b:8080",
        "",
    ] {
        assert_eq!(host_part(a).to_ascii_lowercase(), host_of(a), "{a:?}");
    }
    assert_eq!(host_part("Example.COM:8080"), "Example.COM");
    assert_eq!(host_part("host:port"), "host:port");
}

#[test]
fn base64_header_values() {
    assert_eq!(
        decode_header_value("tools/call").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        decode_header_value("=?base64?Y2Fmw6k=?=").as_deref(),
        Some("café")
    );
    assert_eq!(decode_header_value("=?base64?!!?="), None);
}
