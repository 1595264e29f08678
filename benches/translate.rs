//! Criterion benchmarks of the translation step alone (no network): MCP arguments -> REST
//! request, and REST answer -> MCP result, for the demo's USP and UCP tools.

use criterion::{Criterion, criterion_group, criterion_main};
use portico::forward;
use portico::translate::request;
use portico::translate::response::RestResponse;
use serde_json::json;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

fn gateway() -> portico::config::Gateway {
    let dir = portico::demo::write_files("127.0.0.1:9".parse().unwrap(), None).expect("demo files");
    portico::config::load(&[dir.join("mappings")]).expect("demo config loads")
}

const DEFS: &str = r#"def lisbon: if . >= "2027-03-28T01:00" then . + ":00+01:00" else . + ":00+00:00" end;
def minutes: (.[11:13] | tonumber) * 60 + (.[14:16] | tonumber);
def iso_minutes: "PT" + tostring + "M";
def names: {"MASSAGE-60": "Deep tissue massage", "FACIAL-45": "Sea-mineral facial", "SAUNA-30": "Private sauna session"};
def service: {
  id: .code, business_id: "seaside-spa", name: .title,
  description: { plain: .blurb }, type: "appointment",
  categories: [{ taxonomy: "seaside-spa", id: .category, name: .category, primary: true }],
  duration: { fixed: (.minutes | iso_minutes) },
  pricing: { model: "fixed", amount: .price.amount_cents, currency: .price.ccy },
  channel: { type: "at_business_location" },
  policies: {
    cancellation: { allowed: true }, rescheduling: { allowed: true },
    booking_window: { min_advance: "PT2H", max_advance: "P120D", slot_interval: "PT2H" },
    confirmation_mode: "auto", requires_payment: false
  },
  status: "active"
};
def slot_ref: { id: .opening, start: (.begins | lisbon), end: (.ends | lisbon),
                duration: ((.ends | minutes) - (.begins | minutes) | iso_minutes) };
def booking: {
  id: .number, service_id: .treatment, service_name: (names[.treatment] // .treatment),
  slot: slot_ref,
  buyer: ({ first_name: (.client.name | split(" ")[0]), email: .client.email }
          + (if (.client.name | split(" ") | length) > 1 then { last_name: (.client.name | split(" ")[1:] | join(" ")) } else {} end)
          + (if .client.phone then { phone_number: .client.phone } else {} end)),
  party_size: 1,
  status: (if .status == "CANCELLED" then "canceled" else "confirmed" end),
  confirmation_mode: "auto",
  created_at: .booked_at, updated_at: .changed_at,
  revision: (.moves | tostring)
};
def validation: if .errors then [ .errors[] | { type: "error", code: "validation_error", content: .msg,
                  path: ("$." + .field), severity: "requires_buyer_input" } ] else null end;"#;

/// demo-spa.yaml's `usp_availability_query` result transform, by hand.
fn availability_by_hand(
    body: &serde_json::Value,
    args: &serde_json::Value,
) -> Option<serde_json::Value> {
    use serde_json::{Map, Value};
    let lisbon = |s: &str| {
        let zone = if s >= "2027-03-28T01:00" {
            ":00+01:00"
        } else {
            ":00+00:00"
        };
        Value::String(format!("{s}{zone}"))
    };
    let minutes = |s: &str| -> Option<i64> {
        Some(s.get(11..13)?.parse::<i64>().ok()? * 60 + s.get(14..16)?.parse::<i64>().ok()?)
    };
    let mut slots = Vec::new();
    for o in body.get("openings")?.as_array()? {
        if o.get("free") != Some(&Value::Bool(true)) {
            continue;
        }
        let (begins, ends) = (o.get("begins")?.as_str()?, o.get("ends")?.as_str()?);
        let mut slot = Map::with_capacity(6);
        slot.insert("id".into(), o.get("ref")?.clone());
        slot.insert("service_id".into(), args.get("service_id")?.clone());
        slot.insert("start".into(), lisbon(begins));
        slot.insert("end".into(), lisbon(ends));
        let duration = minutes(ends)? - minutes(begins)?;
        slot.insert("duration".into(), Value::String(format!("PT{duration}M")));
        slot.insert("state".into(), Value::String("available".into()));
        slots.push(Value::Object(slot));
    }
    let mut top = Map::with_capacity(2);
    top.insert("service_id".into(), body.get("treatment")?.clone());
    top.insert("slots".into(), Value::Array(slots));
    Some(Value::Object(top))
}

fn bench(c: &mut Criterion) {
    let g = gateway();
    let availability = g.tools.get("usp_availability_query").unwrap().clone();
    let args =
        json!({"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-02"});
    let openings: Vec<_> = (0..8)
        .map(|i| json!({"ref": format!("MASSAGE-60@2026-12-0{}T{}:00", 1 + i / 4, ["09","11","14","16"][i % 4]), "begins": format!("2026-12-0{}T{}:00", 1 + i / 4, ["09","11","14","16"][i % 4]), "ends": format!("2026-12-0{}T{}:00", 1 + i / 4, ["10","12","15","17"][i % 4]), "free": i != 1}))
        .collect();
    let body = serde_json::to_vec(
        &json!({"treatment": "MASSAGE-60", "tz": "Europe/Lisbon", "openings": openings}),
    )
    .unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());

    c.bench_function("usp_availability_query: prepare + build request", |b| {
        b.iter(|| {
            let call = forward::prepare(&availability, black_box(args.clone()))
                .ok()
                .unwrap();
            black_box(request::build(&availability, &call).ok().unwrap())
        })
    });
    let call = forward::prepare(&availability, args.clone()).ok().unwrap();
    let availability_answer = || RestResponse {
        status: 200,
        headers: headers.clone(),
        body: body.clone().into(),
    };
    // The hot path (`translate::answer`) and the tree path it stands in for.
    c.bench_function(
        "usp_availability_query: response -> result (8 slots)",
        |b| {
            b.iter(|| {
                black_box(forward::translate_response(
                    &availability,
                    &call,
                    availability_answer(),
                ))
            })
        },
    );
    c.bench_function(
        "usp_availability_query: response -> result (8 slots), tree path",
        |b| {
            b.iter(|| {
                black_box(forward::translate_response_tree(
                    &availability,
                    &call,
                    availability_answer(),
                ))
            })
        },
    );

    // Writing the answer: portico's writer against serde_json's (the same bytes; a test checks).
    let resp = availability_answer();
    if let portico::binding::Reply::Result(answer) =
        forward::translate_response_tree(&availability, &call, resp)
    {
        c.bench_function("usp_availability_query: answer JSON text, json_text", |b| {
            b.iter(|| black_box(portico::json_text::to_vec(black_box(&answer))))
        });
        c.bench_function(
            "usp_availability_query: answer JSON text, serde_json (reference)",
            |b| b.iter(|| black_box(serde_json::to_vec(black_box(&answer)).unwrap())),
        );
    }

    // Reading the backend body: portico's reader against serde_json's (the same values; tests
    // and the `jsonrpc` fuzz target check).
    c.bench_function(
        "usp_availability_query: read backend body, json_text",
        |b| b.iter(|| black_box(portico::json_text::from_slice(black_box(&body)).unwrap())),
    );
    c.bench_function(
        "usp_availability_query: read backend body, serde_json (reference)",
        |b| {
            b.iter(|| {
                black_box(serde_json::from_slice::<serde_json::Value>(black_box(&body)).unwrap())
            })
        },
    );

    // The pieces of the return path on their own.
    let body_json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let meta = json!({});
    let vars = portico::translate::transform::Vars3 {
        args: &call.args,
        status: 200,
        meta: &meta,
    };
    let result_t = availability.result.clone().unwrap();
    c.bench_function("usp_availability_query: jq result transform only", |b| {
        b.iter(|| black_box(result_t.run(black_box(&body_json), vars).unwrap()))
    });
    c.bench_function(
        "usp_availability_query: jq result transform only, jaq (reference)",
        |b| b.iter(|| black_box(result_t.run_jaq(black_box(&body_json), vars).unwrap())),
    );
    // The floor for any evaluator that builds serde_json values: the same transform written by
    // hand in Rust (same output, checked here), so the evaluator's own cost is the difference.
    let by_hand = availability_by_hand(&body_json, &call.args).unwrap();
    assert_eq!(
        serde_json::to_string(&by_hand).unwrap(),
        serde_json::to_string(&result_t.run(&body_json, vars).unwrap().unwrap()).unwrap()
    );
    c.bench_function(
        "usp_availability_query: result transform written by hand (floor)",
        |b| b.iter(|| black_box(availability_by_hand(black_box(&body_json), &call.args))),
    );
    for (label, prog) in [
        (
            "v1 select+ref",
            "[.openings[] | select(.free) | {id: .ref}]",
        ),
        (
            "v2 concat",
            "[.openings[] | select(.free) | {id: .ref, s: (.begins + \":00+00:00\")}]",
        ),
        (
            "v3 compare",
            "[.openings[] | select(.free) | {id: .ref, s: (if .begins >= \"2027-03-28T01:00\" then 1 else 2 end)}]",
        ),
        (
            "v4 slice",
            "[.openings[] | select(.free) | {id: .ref, m: (.begins[11:13])}]",
        ),
        (
            "v5 tonumber",
            "[.openings[] | select(.free) | {id: .ref, m: (.begins[11:13] | tonumber)}]",
        ),
        (
            "m1 no-defs inline",
            "{ service_id: .treatment, slots: [ .openings[] | select(.free) | { id: .ref, service_id: \"x\", start: .begins, end: .ends, duration: \"PT60M\", state: \"available\" } ] }",
        ),
        (
            "m2 with defs unused",
            &format!(
                "{}\n{{ service_id: .treatment, slots: [ .openings[] | select(.free) | {{ id: .ref, service_id: \"x\", start: .begins, end: .ends, duration: \"PT60M\", state: \"available\" }} ] }}",
                DEFS
            ),
        ),
        ("r1000 range", "[range(1000)] | length"),
        ("r1000 objs", "[range(1000) | {a: .}] | length"),
        (
            "v6 defs",
            "def f: . + \"x\"; [.openings[] | select(.free) | {id: .ref, s: (.begins | f)}]",
        ),
    ] {
        let t = portico::translate::transform::Transform::compile(prog).unwrap();
        c.bench_function(&format!("jq variant {label}"), |b| {
            b.iter(|| black_box(t.run(black_box(&body_json), vars).unwrap()))
        });
    }
    let identity = portico::translate::transform::Transform::compile(".").unwrap();
    let null = serde_json::Value::Null;
    let nvars = portico::translate::transform::Vars3 {
        args: &null,
        status: 200,
        meta: &null,
    };
    c.bench_function("jq identity on null", |b| {
        b.iter(|| black_box(identity.run(black_box(&null), nvars).unwrap()))
    });
    c.bench_function("jq identity on the same body", |b| {
        b.iter(|| black_box(identity.run(black_box(&body_json), vars).unwrap()))
    });
    let resp = availability_answer();
    let portico::binding::Reply::Result(result) =
        forward::translate_response_tree(&availability, &call, resp)
    else {
        panic!()
    };
    let sc = result["structuredContent"].clone();
    let validator = availability.output_validator.as_ref().unwrap();
    c.bench_function(
        "usp_availability_query: outputSchema validation only",
        |b| b.iter(|| black_box(validator.is_valid(black_box(&sc)))),
    );

    let create = g.tools.get("create_booking_session").unwrap().clone();
    let args = json!({"meta": {"ucp-agent": {"profile": "https://platform.example/p.json"}},
        "booking": {"property": {"id": "HH-LIS"}, "stays": [{"accommodation_type": {"id": "DBL"}, "rate_plan": {"id": "FLEX"}, "occupancy": {"adults": 2}, "stay_dates": {"start_date": "2026-12-10", "end_date": "2026-12-12"}}]}});
    let quote = serde_json::to_vec(&json!({"quote": {"qid": "Q-5001", "state": "OPEN",
        "hotel": {"code": "HH-LIS", "name": "Harbour Hotel Lisbon", "street": "Rua do Cais 1", "city": "Lisboa", "country": "PT", "zip": "1100-001"},
        "room": {"code": "DBL", "label": "Double room, harbour view", "max_adults": 2, "max_kids": 1},
        "rate": {"code": "FLEX", "label": "Flexible rate"}, "arrive": "2026-12-10", "depart": "2026-12-12", "nights": 2,
        "adults": 2, "kids": 0, "guest": null, "price": {"net_cents": 28000, "tax_cents": 1680, "gross_cents": 29680, "ccy": "EUR"},
        "confirmation": null, "valid_until": "2026-12-10T12:00"}})).unwrap();
    c.bench_function("create_booking_session: prepare + build request", |b| {
        b.iter(|| {
            let call = forward::prepare(&create, black_box(args.clone()))
                .ok()
                .unwrap();
            black_box(request::build(&create, &call).ok().unwrap())
        })
    });
    let call = forward::prepare(&create, args.clone()).ok().unwrap();
    c.bench_function("create_booking_session: response -> result", |b| {
        b.iter(|| {
            let resp = RestResponse {
                status: 201,
                headers: headers.clone(),
                body: quote.clone().into(),
            };
            black_box(forward::translate_response(&create, &call, resp))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
