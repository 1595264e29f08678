//! The demo's jq programs run on the native evaluator (the fast path the benchmarks measure),
//! and on real demo-backend bodies its answers equal jaq's.

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
