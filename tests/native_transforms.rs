//! The demo's jq programs run on the native evaluator (the fast path the benchmarks measure),
//! and on real demo-backend bodies its answers equal jaq's, as they do through the response
//! path for a body holding an integer past i64.

use portico::translate::transform::Vars3;
use serde_json::{Value, json};

#[tokio::test]
async fn every_demo_transform_is_native_and_agrees_with_jaq_on_real_bodies() {
    let (backend, _task) = portico::demo::backend::spawn("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("demo backend");
    let dir = portico::demo::write_files(backend, None).expect("demo files");
    let gateway = portico::config::load(&[dir.join("mappings")]).expect("demo mappings load");
    let mut count = 0;
    for tool in gateway.tools.values() {
        for (place, t) in tool.transforms() {
            assert!(
                t.is_native(),
                "{}: `{place}` fell outside the native subset: {}",
                tool.name,
                t.source()
            );
            count += 1;
        }
    }
    assert!(count >= 20, "only {count} transforms found");

    // Real bodies from the legacy API, through the tools that read them.
    let http = reqwest::Client::new();
    let base = format!("http://{backend}/spa/v1");
    let get = |path: String| {
        let http = http.clone();
        async move {
            http.get(path)
                .send()
                .await
                .expect("backend answers")
                .json::<Value>()
                .await
                .expect("JSON")
        }
    };
    let cases = [
        (
            "usp_services_list",
            get(format!("{base}/treatments")).await,
            json!({}),
        ),
        (
            "usp_availability_query",
            get(format!(
                "{base}/treatments/MASSAGE-60/openings?from=2026-12-01&to=2026-12-03"
            ))
            .await,
            json!({"service_id": "MASSAGE-60", "start_date": "2026-12-01", "end_date": "2026-12-03"}),
        ),
        (
            "usp_services_get",
            get(format!("{base}/treatments/FACIAL-45")).await,
            json!({"service_id": "FACIAL-45"}),
        ),
    ];
    for (name, body, args) in cases {
        let tool = gateway.tools.get(name).expect("demo tool");
        let t = tool.result.as_ref().expect("result transform");
        let vars = Vars3 {
            args: &args,
            status: 200,
            meta: &Value::Null,
        };
        let native = t.run(&body, vars).expect("native run");
        let reference = t.run_jaq(&body, vars).expect("jaq run");
        assert_eq!(native, reference, "{name}");
        assert!(
            native.is_some_and(|v| v.is_object()),
            "{name} produced an object"
        );
    }
}

/// A backend body holding an integer past i64 gets jaq's answer through the response path
/// (jaq reads it as a float), and a body without one keeps its exact integers: the reader's
/// word that a body holds none is what spares the transform's look through its answer.
#[test]
fn a_wide_integer_in_a_backend_body_gets_jaqs_answer() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gateway");
    let dir = std::env::temp_dir().join(format!("portico-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let plain = std::fs::read_to_string(src.join("plain.yaml")).expect("plain.yaml");
    assert!(
        plain.contains("result: '{ wrong: true }'"),
        "the fixture changed"
    );
    let plain = plain.replace(
        "result: '{ wrong: true }'",
        "result: '{ n: .n, m: (.m + 1) }'",
    );
    std::fs::write(dir.join("plain.yaml"), plain).expect("write mapping");
    std::fs::copy(src.join("test.openrpc.json"), dir.join("test.openrpc.json")).expect("copy");
    let gateway = portico::config::load(std::slice::from_ref(&dir.join("plain.yaml")))
        .expect("the mapping loads");
    let _ = std::fs::remove_dir_all(&dir);
    let tool = gateway.tools.get("shape").expect("tool shape");
    let call = portico::model::Call {
        tool: "shape".into(),
        args: json!({}),
        meta: Default::default(),
        text: None,
    };
    let answer = |body: &'static str| {
        let resp = portico::translate::response::RestResponse {
            status: 200,
            headers: http::HeaderMap::new(),
            body: bytes::Bytes::from_static(body.as_bytes()),
        };
        match portico::translate::response::outcome(tool, &call, resp) {
            portico::model::Outcome::Success { body } => body,
            other => panic!("not a success: {other:?}"),
        }
    };
    let wide = answer(r#"{"n": 10000000000854346115, "m": 1}"#);
    assert!(
        wide["n"].is_f64(),
        "jaq's float, not the exact integer: {wide}"
    );
    assert_eq!(wide["n"].as_f64(), Some(10000000000854346115u64 as f64));
    assert_eq!(wide["m"], json!(2));
    let narrow = answer(r#"{"n": 9223372036854775807, "m": 1}"#);
    assert_eq!(narrow, json!({"n": 9223372036854775807i64, "m": 2}));
    assert!(narrow["n"].is_i64());
}
