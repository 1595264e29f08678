//! Criterion benchmarks of the translation step alone (no network): MCP arguments -> REST
//! request, and REST answer -> MCP result, for the demo's USP and UCP tools.

use criterion::{Criterion, criterion_group, criterion_main};
use portico::forward;
use portico::translate::request;
use portico::translate::response::RestResponse;
use serde_json::json;
use std::hint::black_box;

fn gateway() -> portico::config::Gateway {
    let dir = portico::demo::write_files("127.0.0.1:9".parse().unwrap()).expect("demo files");
    portico::config::load(&[dir.join("mappings")]).expect("demo config loads")
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
    c.bench_function(
        "usp_availability_query: response -> result (8 slots)",
        |b| {
            b.iter(|| {
                let resp = RestResponse {
                    status: 200,
                    headers: headers.clone(),
                    body: body.clone().into(),
                };
                black_box(forward::translate_response(&availability, &call, resp))
            })
        },
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
