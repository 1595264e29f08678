//! Criterion benchmarks of the translation step (no network) for each workload of
//! `scripts/bench-workloads`: MCP arguments -> REST request, and REST answer -> MCP result.
//!
//! The mappings and backend answers are the ones the load benchmark uses
//! (benches/fixtures/workloads/; the `openapi` mapping is generated here by `portico init` from
//! examples/seaside-spa/openapi.yaml, as the script does), so a change in the per-call cost of
//! any mapping shape shows up in a criterion diff, not only the demo tool's. Each call carries
//! its JSON-RPC request's text, so a body is lent from it where the HTTP endpoint would.

use criterion::{Criterion, criterion_group, criterion_main};
use portico::forward;
use portico::translate::request;
use portico::translate::response::RestResponse;
use serde_json::{Value, json};
use std::hint::black_box;
use std::path::{Path, PathBuf};

#[global_allocator]
static GLOBAL: portico::ops::alloc::Allocator = portico::ops::alloc::Allocator;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("benches/fixtures/workloads").join(name)).expect("fixture")
}

/// The mapping `portico init --openapi examples/seaside-spa/openapi.yaml` writes.
fn openapi_mapping(dir: &Path) -> PathBuf {
    let report = portico::init::run(&portico::init::Options {
        openapi: root().join("examples/seaside-spa/openapi.yaml"),
        backend: Some("http://127.0.0.1:9/spa/v1".into()),
        out: dir.to_path_buf(),
        ..Default::default()
    })
    .expect("init writes a mapping");
    report.mapping
}

/// 16 KB of arguments, the shape scripts/bench-workloads sends.
fn large_args() -> Value {
    let words = [
        "quay", "tide", "lantern", "ferry", "anchor", "rope", "sail", "gull", "pier", "dock",
        "crane", "cargo",
    ];
    let sections: Vec<Value> = (0..44)
        .map(|i| {
            let text: Vec<&str> = (0..60).map(|k| words[(i + k) % words.len()]).collect();
            json!({"heading": format!("Part {i}"), "text": text.join(" ")})
        })
        .collect();
    json!({"folder_id": "F-1", "document": {"title": "Harbour log", "sections": sections}})
}

fn ucp_args() -> Value {
    json!({"id": "Q-5001", "meta": {"ucp-agent": {"profile": "https://platform.example/p.json"}},
        "booking": {"property": {"id": "HH-LIS"}, "stays": [{"accommodation_type": {"id": "DBL"},
        "rate_plan": {"id": "FLEX"}, "occupancy": {"adults": 2},
        "stay_dates": {"start_date": "2026-12-10", "end_date": "2026-12-12"}}],
        "booker": {"first_name": "Rui", "last_name": "Costa", "email": "rui@example.org"}}})
}

fn bench(c: &mut Criterion) {
    let tmp = std::env::temp_dir().join(format!("portico-bench-workloads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let openapi = openapi_mapping(&tmp);
    let workloads = [
        (
            "openapi",
            openapi,
            "list_openings",
            json!({"code": "MASSAGE-60", "from": "2026-12-01", "to": "2026-12-02"}),
            fixture("openings.json"),
        ),
        (
            "ucp",
            root().join("benches/fixtures/workloads/ucp.yaml"),
            "update_booking_session",
            ucp_args(),
            fixture("quote.json"),
        ),
        (
            "large",
            root().join("benches/fixtures/workloads/documents.yaml"),
            "put_document",
            large_args(),
            fixture("documents.json"),
        ),
    ];
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    for (name, mapping, tool, args, answer) in workloads {
        // SAFETY: single-threaded here; the mappings read the backend port at load.
        unsafe { std::env::set_var("PORTICO_BENCH_BACKEND_PORT", "9") };
        let g = portico::config::load(&[mapping]).expect("workload mapping loads");
        let t = g.tools.get(tool).expect("workload tool").clone();
        let answer = bytes::Bytes::from(answer);
        let response = || RestResponse {
            status: 200,
            headers: headers.clone(),
            body: answer.clone(),
        };
        // The MCP request the call came in: a body that is a path into the arguments is lent
        // from it, as the HTTP endpoint lets `forward::run` do (`translate::lent`).
        let text = bytes::Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": tool, "arguments": args}})
            .to_string(),
        );
        let prepared = |args: Value| {
            forward::prepare(&t, args).ok().map(|mut call| {
                call.text = Some(text.clone());
                call
            })
        };
        // The benchmark is only worth its figure if the call succeeds.
        let Some(call) = prepared(args.clone()) else {
            panic!("{name}: arguments refused")
        };
        let Ok(req) = request::build(&t, &call) else {
            panic!("{name}: no request")
        };
        // `large`'s body (`.document`) is the request's own bytes, not a copy.
        if name == "large" {
            let body = req.body.as_deref().unwrap_or_default();
            assert!(
                text.as_ptr_range().contains(&body.as_ptr()),
                "{name}: the body is not lent"
            );
        }
        let mut reply = forward::translate_response(&t, &call, response());
        reply.materialize();
        let portico::binding::Reply::Result(result) = reply else {
            panic!("{name}: the fixed answer is not a result")
        };
        assert!(
            result.get("structuredContent").is_some(),
            "{name}: {result}"
        );

        c.bench_function(&format!("{name} {tool}: prepare + build request"), |b| {
            b.iter(|| {
                let call = prepared(black_box(args.clone())).unwrap();
                black_box(request::build(&t, &call).ok().unwrap())
            })
        });
        c.bench_function(&format!("{name} {tool}: response -> result"), |b| {
            b.iter(|| black_box(forward::translate_response(&t, &call, response())))
        });
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

criterion_group!(benches, bench);
criterion_main!(benches);
